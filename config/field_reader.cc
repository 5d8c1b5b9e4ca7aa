#include "config/field_reader.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/common/did_you_mean.h"

namespace tidal::config {

using nlohmann::json;

std::string JoinPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

std::string IndexPath(std::string_view parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

Status FieldError(std::string_view path, std::string_view message) {
  return InvalidArgument(fmt::format("{}: {}", path.empty() ? "(document)" : path, message));
}

std::string Shown(const json& value) {
  if (value.is_null()) return "nothing";
  if (value.is_object()) return "an object";
  if (value.is_array()) return "a list";
  // YAML strings may hold bytes that are not UTF-8 (nlohmann's own parser
  // refuses them, yaml-cpp does not); a strict dump() would throw out of an
  // error message (found by fuzz/cluster_loader).
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<ObjectReader> ObjectReader::Open(const json& value, std::string path,
                                          const std::vector<std::string_view>& allowed) {
  if (!value.is_object()) {
    return FieldError(path, "expected an object, got " + Shown(value));
  }
  for (const auto& [key, unused] : value.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (known) continue;
    if (key == "priority") {
      return FieldError(JoinPath(path, key),
                        "priority is derived from templates; remove field 'priority'");
    }
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    const std::string guess = ClosestName(key, allowed);
    return FieldError(JoinPath(path, key),
                      guess.empty() ? fmt::format("unknown field '{}' (known fields: {})", key, list)
                                    : fmt::format("unknown field '{}': did you mean '{}'? (known fields: {})", key, guess, list));
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

bool ObjectReader::IsNull(std::string_view key) const {
  auto it = obj_->find(key);
  return it != obj_->end() && it->is_null();
}

namespace {

// The value of an integer JSON number, or nullopt when it is not one or does
// not fit in int64 (9223372036854775808 parses as unsigned).
std::optional<int64_t> IntegerOf(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

}  // namespace

Status ObjectReader::Int(std::string_view key, int* out, int min, int max, bool required) const {
  if (!Has(key) && !IsNull(key)) return required ? Missing(key) : Status::Ok();
  const json& v = at(key);
  std::string expected;
  if (min == 1 && max == INT_MAX) {
    expected = "a positive integer";
  } else if (min == 0 && max == INT_MAX) {
    expected = "a non-negative integer";
  } else if (min == INT_MIN && max == INT_MAX) {
    expected = "an integer";
  } else {
    expected = fmt::format("an integer from {} to {}", min, max);
  }
  const std::optional<int64_t> x = IntegerOf(v);
  if (!x || *x < min || *x > max) {
    return FieldError(FieldPath(key), fmt::format("expected {}, got {}", expected, Shown(v)));
  }
  *out = static_cast<int>(*x);
  return Status::Ok();
}

Status ObjectReader::Int64(std::string_view key, int64_t* out, int64_t min, int64_t max) const {
  if (!Has(key) && !IsNull(key)) return Status::Ok();
  const json& v = at(key);
  const std::optional<int64_t> x = IntegerOf(v);
  if (!x || *x < min || *x > max) {
    return FieldError(FieldPath(key), fmt::format("expected an integer from {} to {}, got {}",
                                                  min, max, Shown(v)));
  }
  *out = *x;
  return Status::Ok();
}

Status ObjectReader::Double(std::string_view key, double* out, double min, double max) const {
  if (!Has(key) && !IsNull(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_number()) {
    return FieldError(FieldPath(key),
                      fmt::format("expected a number from {} to {}, got {}", min, max, Shown(v)));
  }
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    return FieldError(FieldPath(key),
                      fmt::format("expected a number from {} to {}, got {}", min, max, Shown(v)));
  }
  *out = x;
  return Status::Ok();
}

Status ObjectReader::Bool(std::string_view key, bool* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_boolean()) {
    return FieldError(FieldPath(key), "expected true or false, got " + Shown(v));
  }
  *out = v.get<bool>();
  return Status::Ok();
}

Status ObjectReader::String(std::string_view key, std::string* out, bool required) const {
  if (!Has(key)) return required ? Missing(key) : Status::Ok();
  const json& v = at(key);
  // A YAML value like `driver: 550.54` arrives as a number; names are text.
  if (v.is_number()) {
    *out = v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump();
    return Status::Ok();
  }
  if (!v.is_string()) {
    return FieldError(FieldPath(key), "expected a string, got " + Shown(v));
  }
  if (required && v.get_ref<const std::string&>().empty()) {
    return FieldError(FieldPath(key), "must not be empty");
  }
  *out = v.get<std::string>();
  return Status::Ok();
}

Status ObjectReader::StringList(std::string_view key, std::vector<std::string>* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_array()) {
    return FieldError(FieldPath(key), "expected a list of strings, got " + Shown(v));
  }
  std::vector<std::string> result;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return FieldError(IndexPath(FieldPath(key), i), "expected a string, got " + Shown(v[i]));
    }
    result.push_back(v[i].get<std::string>());
  }
  *out = std::move(result);
  return Status::Ok();
}

Status ObjectReader::StringMap(std::string_view key,
                               std::map<std::string, std::string>* out) const {
  if (!Has(key)) return Status::Ok();
  const json& v = at(key);
  if (!v.is_object()) {
    return FieldError(FieldPath(key), "expected a map of strings, got " + Shown(v));
  }
  std::map<std::string, std::string> result;
  for (const auto& [k, item] : v.items()) {
    if (item.is_string()) {
      result[k] = item.get<std::string>();
    } else if (item.is_number() || item.is_boolean()) {
      result[k] = item.dump();  // label values are text: `gen: 5` means "5"
    } else {
      return FieldError(JoinPath(FieldPath(key), k), "expected a string, got " + Shown(item));
    }
  }
  *out = std::move(result);
  return Status::Ok();
}

Status ObjectReader::Seconds(std::string_view key, Duration* out, double max_s) const {
  double s = 0;
  if (!Has(key) && !IsNull(key)) return Status::Ok();
  TIDAL_RETURN_IF_ERROR(Double(key, &s, 0, max_s));
  *out = Duration(std::llround(s * 1000.0));
  return Status::Ok();
}

Status ObjectReader::Millis(std::string_view key, Duration* out, double max_ms) const {
  double ms = 0;
  if (!Has(key) && !IsNull(key)) return Status::Ok();
  TIDAL_RETURN_IF_ERROR(Double(key, &ms, 0, max_ms));
  *out = Duration(static_cast<int64_t>(ms));
  return Status::Ok();
}

Status ExpectArray(const json& value, std::string_view path) {
  if (!value.is_array()) return FieldError(path, "expected a list, got " + Shown(value));
  return Status::Ok();
}

}  // namespace tidal::config

namespace tidal::config {

Status ReadTaintList(const json& list, const std::string& path, std::vector<Taint>* out) {
  TIDAL_RETURN_IF_ERROR(ExpectArray(list, path));
  std::vector<Taint> taints;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item_path = IndexPath(path, i);
    Taint t;
    if (list[i].is_string()) {
      const std::string& s = list[i].get_ref<const std::string&>();
      const size_t eq = s.find('=');
      t.key = s.substr(0, eq);
      if (eq != std::string::npos) t.value = s.substr(eq + 1);
    } else {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, ObjectReader::Open(list[i], item_path, {"key", "value"}));
      TIDAL_RETURN_IF_ERROR(tr.String("key", &t.key, /*required=*/true));
      TIDAL_RETURN_IF_ERROR(tr.String("value", &t.value));
    }
    if (t.key.empty()) return FieldError(item_path, "key must not be empty");
    taints.push_back(std::move(t));
  }
  *out = std::move(taints);
  return Status::Ok();
}

}  // namespace tidal::config
