#include "config/input_limits.h"

#include <fmt/format.h>

#include "config/field_reader.h"

namespace tidal::config {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsPrintableAscii(char c) { return c >= 0x21 && c <= 0x7e; }

// One DNS-1123 label; "" when it is one, else what is wrong with it.
std::string LabelProblem(std::string_view s) {
  if (s.empty()) return "an empty part";
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') {
      return IsPrintableAscii(c) ? fmt::format("the character '{}'", c)
                                 : fmt::format("the byte 0x{:02x}", static_cast<unsigned char>(c));
    }
  }
  if (s.front() == '-' || s.back() == '-') return "a '-' at the start or end";
  return "";
}

}  // namespace

Status CheckJsonDepth(std::string_view text, std::string_view what, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be '"'
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgument(fmt::format(
            "{}: nested deeper than the limit of {} levels of [ and {{ (at byte {})", what,
            max_depth, i));
      }
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;  // unbalanced input is the parser's to report
    }
  }
  return Status::Ok();
}

Status CheckObjectName(std::string_view path, std::string_view name) {
  const std::string problem = LabelProblem(name);
  if (name.size() > kMaxObjectNameLength || !problem.empty()) {
    return FieldError(path, fmt::format(
        "expected a name of 1 to {} lowercase letters, digits and '-', starting and ending "
        "with a letter or digit (DNS-1123 label){}",
        kMaxObjectNameLength,
        name.size() > kMaxObjectNameLength ? fmt::format("; got {} characters", name.size())
                                           : "; got " + problem));
  }
  return Status::Ok();
}

Status CheckNodeName(std::string_view path, std::string_view name) {
  std::string problem;
  if (name.size() > kMaxNodeNameLength) {
    problem = fmt::format("{} characters", name.size());
  } else {
    size_t start = 0;
    while (problem.empty()) {
      const size_t dot = name.find('.', start);
      const std::string_view part = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
      problem = part.size() > kMaxObjectNameLength ? "a part longer than 63 characters" : LabelProblem(part);
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
  }
  if (!problem.empty()) {
    return FieldError(path, fmt::format(
        "expected a host name of up to {} characters: parts of lowercase letters, digits and "
        "'-' joined by '.' (DNS-1123 subdomain); got {}",
        kMaxNodeNameLength, problem));
  }
  return Status::Ok();
}

Status CheckLabelKey(std::string_view path, std::string_view key) {
  if (key.empty() || key.size() > kMaxLabelKeyLength) {
    return FieldError(path, fmt::format("label key: expected 1 to {} characters, got {}",
                                        kMaxLabelKeyLength, key.size()));
  }
  for (char c : key) {
    if (!IsPrintableAscii(c)) {
      return FieldError(path, fmt::format("label key: expected printable ASCII without spaces, got the byte 0x{:02x}",
                                          static_cast<unsigned char>(c)));
    }
  }
  return Status::Ok();
}

Status CheckLabelValue(std::string_view path, std::string_view value) {
  if (value.size() > kMaxLabelValueLength) {
    return FieldError(path, fmt::format("expected at most {} characters, got {}", kMaxLabelValueLength,
                                        value.size()));
  }
  for (char c : value) {
    if (!IsPrintableAscii(c) && c != ' ') {
      return FieldError(path, fmt::format("expected printable ASCII, got the byte 0x{:02x}",
                                          static_cast<unsigned char>(c)));
    }
  }
  return Status::Ok();
}

Status CheckEnvName(std::string_view path, std::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxEnvNameLength && !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) {
    ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!ok) {
    return FieldError(path, fmt::format(
        "expected an environment variable name of 1 to {} letters, digits and '_', not starting "
        "with a digit", kMaxEnvNameLength));
  }
  return Status::Ok();
}

Status CheckProcessText(std::string_view path, std::string_view text, size_t max_length) {
  if (text.size() > max_length) {
    return FieldError(path, fmt::format("expected at most {} bytes, got {}", max_length, text.size()));
  }
  if (text.find('\0') != std::string_view::npos) return FieldError(path, "must not contain a NUL byte");
  return Status::Ok();
}

Status CheckCount(std::string_view path, size_t count, size_t max) {
  if (count > max) return FieldError(path, fmt::format("expected at most {} entries, got {}", max, count));
  return Status::Ok();
}

}  // namespace tidal::config
