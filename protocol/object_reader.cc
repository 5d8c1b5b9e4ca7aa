#include "protocol/object_reader.h"

#include <cmath>

#include "core/common/did_you_mean.h"

namespace tidal::protocol {

using nlohmann::json;

std::string JoinPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string IndexPath(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

Status FieldError(std::string_view path, std::string_view message) {
  return InvalidArgument(std::string(path.empty() ? "(message)" : path) + ": " + std::string(message));
}

std::string_view FieldOfMessage(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0 || message.find_first_of(" \"'") < colon) return {};
  return message.substr(0, colon);
}

std::string Shown(const json& value) {
  if (value.is_null()) return "nothing";
  if (value.is_object()) return "an object";
  if (value.is_array()) return "a list";
  return value.dump();
}

StatusOr<ObjectReader> ObjectReader::Open(const json& value, std::string path,
                                          std::optional<std::vector<std::string_view>> allowed) {
  if (!value.is_object()) return FieldError(path, "expected an object, got " + Shown(value));
  if (allowed) {
    for (const auto& [key, unused] : value.items()) {
      bool known = false;
      for (std::string_view a : *allowed) known = known || key == a;
      if (known) continue;
      std::string list;
      for (std::string_view a : *allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      const std::string guess = ClosestName(key, *allowed);
      return FieldError(JoinPath(path, key), "unknown field '" + key + "'" +
                                                 (guess.empty() ? "" : ": did you mean '" + guess + "'?") +
                                                 " (known fields: " + list + ")");
    }
  }
  return ObjectReader(value, std::move(path));
}

bool ObjectReader::Has(std::string_view key) const {
  auto it = obj_->find(key);
  return it != obj_->end() && !it->is_null();
}

const json& ObjectReader::at(std::string_view key) const { return *obj_->find(key); }

Status ObjectReader::Missing(std::string_view key) const {
  return FieldError(FieldPath(key), "required field is missing");
}

namespace {

std::string IntegerRange(int64_t min, int64_t max, int64_t type_max) {
  if (min == 1 && max == type_max) return "a positive integer";
  if (min == 0 && max == type_max) return "a non-negative integer";
  if (max == type_max) return "an integer";
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

// Integers only: 2.5 for a rank is an error, not rank 2.
Status ReadInteger(const ObjectReader& r, std::string_view key, int64_t min, int64_t max,
                   int64_t type_max, int64_t* out) {
  const json& v = r.at(key);
  const std::string expected = IntegerRange(min, max, type_max);
  if (!v.is_number_integer()) return FieldError(r.FieldPath(key), "expected " + expected + ", got " + Shown(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
    return FieldError(r.FieldPath(key), "expected " + expected + ", got " + Shown(v));
  }
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) return FieldError(r.FieldPath(key), "expected " + expected + ", got " + Shown(v));
  *out = x;
  return Status::Ok();
}

}  // namespace

Status ObjectReader::Int(std::string_view key, int* out, int64_t min, int64_t max) const {
  if (!Has(key)) return Status::Ok();
  int64_t x = 0;
  TIDAL_RETURN_IF_ERROR(ReadInteger(*this, key, min, max, std::numeric_limits<int>::max(), &x));
  *out = static_cast<int>(x);
  return Status::Ok();
}

Status ObjectReader::Int64(std::string_view key, int64_t* out, int64_t min, int64_t max) const {
  if (!Has(key)) return Status::Ok();
  return ReadInteger(*this, key, min, max, std::numeric_limits<int64_t>::max(), out);
}

Status ObjectReader::Double(std::string_view key, double* out, double min, double max) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  const std::string expected = "a number from " + json(min).dump() + " to " + json(max).dump();
  if (!v.is_number()) return FieldError(FieldPath(key), "expected " + expected + ", got " + Shown(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    return FieldError(FieldPath(key), "expected " + expected + ", got " + Shown(v));
  }
  *out = x;
  return Status::Ok();
}

Status ObjectReader::Bool(std::string_view key, bool* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_boolean()) return FieldError(FieldPath(key), "expected true or false, got " + Shown(v));
  *out = v.get<bool>();
  return Status::Ok();
}

Status ObjectReader::String(std::string_view key, std::string* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_string()) return FieldError(FieldPath(key), "expected a string, got " + Shown(v));
  *out = v.get<std::string>();
  return Status::Ok();
}

Status ObjectReader::StringList(std::string_view key, std::vector<std::string>* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  TIDAL_RETURN_IF_ERROR(ExpectArray(v, FieldPath(key)));
  std::vector<std::string> list;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return FieldError(IndexPath(FieldPath(key), i), "expected a string, got " + Shown(v[i]));
    }
    list.push_back(v[i].get<std::string>());
  }
  *out = std::move(list);
  return Status::Ok();
}

Status ObjectReader::StringMap(std::string_view key, std::map<std::string, std::string>* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_object()) return FieldError(FieldPath(key), "expected an object of strings, got " + Shown(v));
  std::map<std::string, std::string> map;
  for (const auto& [k, value] : v.items()) {
    if (!value.is_string()) return FieldError(JoinPath(FieldPath(key), k), "expected a string, got " + Shown(value));
    map[k] = value.get<std::string>();
  }
  *out = std::move(map);
  return Status::Ok();
}

Status ObjectReader::IntList(std::string_view key, std::vector<int>* out, int min, int max) const {
  if (!Has(key)) return Status::Ok();
  return ReadIntList(at(key), FieldPath(key), min, max, out);
}

Status ReadIntList(const json& value, std::string_view path, int min, int max, std::vector<int>* out) {
  TIDAL_RETURN_IF_ERROR(ExpectArray(value, path));
  std::vector<int> list;
  for (size_t i = 0; i < value.size(); ++i) {
    const json& x = value[i];
    if (!x.is_number_integer() || x.get<int64_t>() < min || x.get<int64_t>() > max) {
      return FieldError(IndexPath(path, i),
                        "expected " + IntegerRange(min, max, std::numeric_limits<int>::max()) + ", got " + Shown(x));
    }
    list.push_back(x.get<int>());
  }
  *out = std::move(list);
  return Status::Ok();
}

Status ExpectArray(const json& value, std::string_view path) {
  if (!value.is_array()) return FieldError(path, "expected a list, got " + Shown(value));
  return Status::Ok();
}

}  // namespace tidal::protocol
