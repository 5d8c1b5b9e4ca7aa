// Strict reading of one JSON object (from a JSON body or a converted YAML
// document): unknown fields, wrong types and out-of-range numbers are errors
// whose message starts with the field's path, e.g.
// "nodes[3].gpus: expected a positive integer, got -2". YamlDocument::Locate
// then adds "file:line: ".
#ifndef TIDAL_CONFIG_FIELD_READER_H_
#define TIDAL_CONFIG_FIELD_READER_H_

#include <climits>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/common/time.h"
#include "core/model/cluster.h"

namespace tidal::config {

// "a.b" for a field of an object at "a"; just "b" at the root.
std::string JoinPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);
// An error at `path`: "path: message".
Status FieldError(std::string_view path, std::string_view message);
// The value as it appears in an error: strings quoted, numbers bare.
std::string Shown(const nlohmann::json& value);

class ObjectReader {
 public:
  // Fails unless `value` is an object whose keys are all in `allowed`.
  static StatusOr<ObjectReader> Open(const nlohmann::json& value, std::string path,
                                     std::initializer_list<std::string_view> allowed) {
    return Open(value, std::move(path), std::vector<std::string_view>(allowed));
  }
  static StatusOr<ObjectReader> Open(const nlohmann::json& value, std::string path,
                                     const std::vector<std::string_view>& allowed);

  const std::string& path() const { return path_; }
  std::string FieldPath(std::string_view key) const { return JoinPath(path_, key); }
  // Present and not null.
  bool Has(std::string_view key) const;
  const nlohmann::json& at(std::string_view key) const;

  // Present with the value null.
  bool IsNull(std::string_view key) const;

  // Each reader leaves `out` untouched when the field is absent, unless
  // `required`, which makes absence an error. The number readers refuse an
  // explicit null ("expected ..., got nothing"): `replicas: null` is a
  // mistake, not a request for the default. The others treat null as absent.
  Status Int(std::string_view key, int* out, int min = INT_MIN, int max = INT_MAX,
             bool required = false) const;
  Status Int64(std::string_view key, int64_t* out, int64_t min, int64_t max) const;
  Status Double(std::string_view key, double* out, double min, double max) const;
  Status Bool(std::string_view key, bool* out) const;
  Status String(std::string_view key, std::string* out, bool required = false) const;
  Status StringList(std::string_view key, std::vector<std::string>* out) const;
  Status StringMap(std::string_view key, std::map<std::string, std::string>* out) const;
  // A duration given as a number of seconds (fractions allowed).
  Status Seconds(std::string_view key, Duration* out, double max_s = 1e9) const;
  // A duration given as a number of milliseconds.
  Status Millis(std::string_view key, Duration* out, double max_ms = 1e12) const;

  template <typename T>
  Status Enum(std::string_view key, T* out,
              std::initializer_list<std::pair<std::string_view, T>> names) const {
    if (!Has(key)) return Status::Ok();
    const nlohmann::json& v = at(key);
    if (v.is_string()) {
      for (const auto& [name, value] : names) {
        if (v.get_ref<const std::string&>() == name) {
          *out = value;
          return Status::Ok();
        }
      }
    }
    std::string choices;
    for (const auto& [name, value] : names) {
      if (!choices.empty()) choices += '|';
      choices += name;
    }
    return FieldError(FieldPath(key), "expected one of " + choices + ", got " + Shown(v));
  }

 private:
  ObjectReader(const nlohmann::json& obj, std::string path) : obj_(&obj), path_(std::move(path)) {}
  Status Missing(std::string_view key) const;

  const nlohmann::json* obj_;
  std::string path_;
};

// Fails unless `value` is an array.
Status ExpectArray(const nlohmann::json& value, std::string_view path);

// Taints and tolerations: a list of "key=value" (or "key") strings or
// {key, value} objects.
Status ReadTaintList(const nlohmann::json& value, const std::string& path, std::vector<Taint>* out);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_FIELD_READER_H_
