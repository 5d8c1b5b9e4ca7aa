// Strict, typed reading of one JSON object of an agent<->server message.
// Every error names the field by its path ("events[2].rank: expected an
// integer from 0 to ..., got \"x\""), so a bad message is answered with a
// 400 that says what to fix. A duplicate of config/field_reader.h in spirit
// only: the protocol library depends on nothing but core and nlohmann-json.
#ifndef TIDAL_PROTOCOL_OBJECT_READER_H_
#define TIDAL_PROTOCOL_OBJECT_READER_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/common/time.h"

namespace tidal::protocol {

// Times on the wire are integer milliseconds within these bounds (half of
// int64's range, so that the difference of two never overflows).
inline constexpr int64_t kMinTimeMs = std::numeric_limits<int64_t>::min() / 2;
inline constexpr int64_t kMaxTimeMs = std::numeric_limits<int64_t>::max() / 2;
// A time in ms, or null for none.
inline nlohmann::json OptionalMillisJson(const std::optional<Time>& t) {
  return t ? nlohmann::json(ToMillis(*t)) : nlohmann::json(nullptr);
}

// "a.b" for a field of an object at "a"; just "b" at the root.
std::string JoinPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);
// An error at `path`: "path: message".
Status FieldError(std::string_view path, std::string_view message);
// The field path an error message opens with ("replicas: ...",
// "gpus[2].index: ..."; no space or quote before the first ": "), or "".
std::string_view FieldOfMessage(std::string_view message);
// The value as it appears in an error: strings quoted, numbers bare.
std::string Shown(const nlohmann::json& value);

class ObjectReader {
 public:
  // Fails unless `value` is an object. With `allowed`, a key outside it is
  // an error too (the server is strict with what agents send); without, an
  // unknown key is ignored (an agent reads a newer server's reply).
  static StatusOr<ObjectReader> Open(const nlohmann::json& value, std::string path,
                                     std::optional<std::vector<std::string_view>> allowed);

  const std::string& path() const { return path_; }
  std::string FieldPath(std::string_view key) const { return JoinPath(path_, key); }
  // Present and not null.
  bool Has(std::string_view key) const;
  const nlohmann::json& at(std::string_view key) const;
  Status Missing(std::string_view key) const;

  // Each reader leaves `out` untouched when the field is absent or null.
  Status Int(std::string_view key, int* out, int64_t min = std::numeric_limits<int>::min(),
             int64_t max = std::numeric_limits<int>::max()) const;
  Status Int64(std::string_view key, int64_t* out, int64_t min = std::numeric_limits<int64_t>::min(),
               int64_t max = std::numeric_limits<int64_t>::max()) const;
  Status Double(std::string_view key, double* out, double min, double max) const;
  Status Bool(std::string_view key, bool* out) const;
  Status String(std::string_view key, std::string* out) const;
  Status StringList(std::string_view key, std::vector<std::string>* out) const;
  Status StringMap(std::string_view key, std::map<std::string, std::string>* out) const;
  Status IntList(std::string_view key, std::vector<int>* out, int min, int max) const;

  // The same, into an optional that stays empty when the field is absent.
  template <typename T, typename... Params, typename... Args>
  Status Optional(Status (ObjectReader::*read)(std::string_view, T*, Params...) const,
                  std::string_view key, std::optional<T>* out, Args... args) const {
    if (!Has(key)) return Status::Ok();
    T value{};
    TIDAL_RETURN_IF_ERROR((this->*read)(key, &value, static_cast<Params>(args)...));
    *out = std::move(value);
    return Status::Ok();
  }

 private:
  ObjectReader(const nlohmann::json& obj, std::string path) : obj_(&obj), path_(std::move(path)) {}

  const nlohmann::json* obj_;
  std::string path_;
};

// Fails unless `value` is an array.
Status ExpectArray(const nlohmann::json& value, std::string_view path);
// A list of integers from `min` to `max` at `path`.
Status ReadIntList(const nlohmann::json& value, std::string_view path, int min, int max,
                   std::vector<int>* out);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_OBJECT_READER_H_
