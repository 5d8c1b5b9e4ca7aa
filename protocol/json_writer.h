// Appends compact JSON text to a string without building a nlohmann::json
// tree first. A hot record (the journal's submit, ~1 KB per durable submit)
// built as a tree costs one allocation per key and value and a second pass
// to print it; written directly it costs a few appends into one buffer.
//
// The text is byte for byte what nlohmann::json::dump() gives for the same
// values (tests compare the two), so the caller must emit an object's keys
// in sorted order, the order dump() prints a tree's keys in. Strings that
// are not plain ASCII and all doubles go through nlohmann itself, so that
// escaping, UTF-8 checks and float formatting stay nlohmann's.
#ifndef TIDAL_PROTOCOL_JSON_WRITER_H_
#define TIDAL_PROTOCOL_JSON_WRITER_H_

#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/cluster.h"
#include "core/model/workload.h"

namespace tidal::protocol {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  // A key inside an object; the value follows.
  void Key(std::string_view key) {
    Separate();
    AppendString(key);
    out_ += ':';
    after_key_ = true;
  }

  void String(std::string_view s) {
    Separate();
    AppendString(s);
  }
  void Int(int64_t v) {
    Separate();
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }
  void Uint(uint64_t v) {
    Separate();
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }
  void Double(double v) {
    Separate();
    out_ += nlohmann::json(v).dump();
  }
  void Bool(bool v) {
    Separate();
    out_ += v ? "true" : "false";
  }
  void Null() {
    Separate();
    out_ += "null";
  }
  // A value already printed as compact JSON (a small tree's dump()).
  void Raw(std::string_view json_text) {
    Separate();
    out_.append(json_text);
  }
  void StringArray(const std::vector<std::string>& v) {
    BeginArray();
    for (const std::string& s : v) String(s);
    EndArray();
  }
  void StringMap(const std::map<std::string, std::string>& m) {
    BeginObject();
    for (const auto& [k, v] : m) {
      Key(k);
      String(v);
    }
    EndObject();
  }

 private:
  void Open(char c) {
    Separate();
    out_ += c;
    first_ = true;
  }
  void Close(char c) {
    out_ += c;
    first_ = false;
  }
  // A comma before every value of an object or array but its first.
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) out_ += ',';
    first_ = false;
  }
  void AppendString(std::string_view s) {
    for (unsigned char c : s) {
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') {
        out_ += nlohmann::json(std::string(s)).dump();  // escapes and checks UTF-8 as dump() does
        return;
      }
    }
    out_ += '"';
    out_.append(s);
    out_ += '"';
  }

  std::string& out_;
  bool first_ = true;
  bool after_key_ = false;
};

// Model values both direct writers (a journal record's workload, a stored
// workload record) print alike: a priority with its derivation, and taints.
inline void WritePriority(JsonWriter& out, const Priority& p) {
  out.BeginObject();
  out.Key("awaiting_approval");
  out.Bool(p.awaiting_approval);
  out.Key("borrowing_start_delta");
  out.Int(p.borrowing_start_delta);
  out.Key("derivation");
  out.StringArray(p.derivation);
  out.Key("preemptibility");
  out.String(PreemptibilityClassName(p.preemptibility));
  out.Key("resume_bonus");
  out.Int(p.resume_bonus);
  out.Key("template");
  out.String(p.template_name);
  out.Key("value");
  out.Int(p.value);
  out.EndObject();
}

inline void WriteTaints(JsonWriter& out, const std::vector<Taint>& taints) {
  out.BeginArray();
  for (const Taint& t : taints) {
    out.BeginObject();
    out.Key("key");
    out.String(t.key);
    out.Key("value");
    out.String(t.value);
    out.EndObject();
  }
  out.EndArray();
}

// j.dump() into a buffer of `reserve` bytes: a record of a few KB printed
// into a growing string reallocates (and copies) at every doubling, and each
// large allocation makes glibc consolidate its fast bins first.
inline std::string DumpReserved(const nlohmann::json& j, size_t reserve = 2048) {
  std::string out;
  out.reserve(reserve);
  nlohmann::detail::serializer<nlohmann::json> s(nlohmann::detail::output_adapter<char, std::string>(out), ' ',
                                                 nlohmann::json::error_handler_t::strict);
  s.dump(j, /*pretty_print=*/false, /*ensure_ascii=*/false, 0);
  return out;
}

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_JSON_WRITER_H_
