#include "config/yaml_document.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/input_limits.h"

namespace tidal::config {
namespace {

using nlohmann::json;

// A plain (unquoted) YAML scalar gets the JSON type it looks like, following
// the YAML 1.2 core schema; quoted scalars always stay strings.
json PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  {
    int64_t v = 0;
    const char* begin = s.data();
    const char* end = s.data() + s.size();
    if (*begin == '+') ++begin;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ec == std::errc() && ptr == end) return v;
    // Above INT64_MAX: kept exact (as JSON does), so that the range error
    // shows the number written, not its double.
    uint64_t u = 0;
    auto [uptr, uec] = std::from_chars(begin, end, u);
    if (uec == std::errc() && uptr == end) return u;
  }
  {
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && ptr == s.data() + s.size()) return v;
  }
  return s;
}

class Converter {
 public:
  explicit Converter(std::map<std::string, int, std::less<>>& lines) : lines_(lines) {}

  Status Convert(const YAML::Node& node, const std::string& path, json& out) {
    if (!path.empty()) lines_.emplace(path, node.Mark().line + 1);
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out = nullptr;
        return Status::Ok();
      case YAML::NodeType::Scalar:
        out = node.Tag() == "!" ? json(node.Scalar()) : PlainScalar(node.Scalar());
        return Status::Ok();
      case YAML::NodeType::Sequence: {
        out = json::array();
        size_t i = 0;
        for (const YAML::Node& item : node) {
          json child;
          TIDAL_RETURN_IF_ERROR(Convert(item, fmt::format("{}[{}]", path, i++), child));
          out.push_back(std::move(child));
        }
        return Status::Ok();
      }
      case YAML::NodeType::Map: {
        out = json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            lines_[path + ".<key>"] = kv.first.Mark().line + 1;
            return InvalidArgument(fmt::format("{}.<key>: keys must be plain names", path));
          }
          const std::string key = kv.first.Scalar();
          const std::string child_path = path.empty() ? key : path + "." + key;
          if (out.contains(key)) {
            return InvalidArgument(fmt::format("{}: duplicate field '{}'", child_path, key));
          }
          // The key's line is where a reader looks for the field.
          lines_[child_path] = kv.first.Mark().line + 1;
          json child;
          TIDAL_RETURN_IF_ERROR(Convert(kv.second, child_path, child));
          lines_[child_path] = kv.first.Mark().line + 1;
          out[key] = std::move(child);
        }
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

 private:
  std::map<std::string, int, std::less<>>& lines_;
};

// The line of every value in a JSON text nlohmann already accepted, by the
// same paths the YAML converter records ("a.b[2]"): a field's line is its
// key's, an array item's is where the item starts. Keys with escapes other
// than \" and \\ are kept undecoded; such a path falls back to its parent.
void RecordJsonLines(std::string_view text, std::map<std::string, int, std::less<>>& lines) {
  struct Frame {
    bool object = false;
    std::string path;
    size_t next_index = 0;  // arrays
    std::string key;        // objects: the current member's key
    bool expect_key = true;  // objects
  };
  std::vector<Frame> stack;
  int line = 1;
  size_t i = 0;
  auto value_path = [&]() -> std::string {
    if (stack.empty()) return "";
    Frame& f = stack.back();
    if (f.object) return f.path.empty() ? f.key : f.path + "." + f.key;
    std::string p = fmt::format("{}[{}]", f.path, f.next_index++);
    lines.emplace(p, line);
    return p;
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == ':') {
      ++i;
    } else if (c == ',') {
      if (!stack.empty() && stack.back().object) stack.back().expect_key = true;
      ++i;
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      ++i;
    } else if (c == '"') {
      std::string str;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          const char e = text[++i];
          if (e == '"' || e == '\\' || e == '/') {
            str += e;
          } else {
            str += '\\';
            str += e;
          }
        } else {
          str += text[i];
        }
      }
      ++i;  // the closing quote
      if (!stack.empty() && stack.back().object && stack.back().expect_key) {
        Frame& f = stack.back();
        f.key = std::move(str);
        f.expect_key = false;
        lines[f.path.empty() ? f.key : f.path + "." + f.key] = line;
      } else {
        value_path();
      }
    } else if (c == '{' || c == '[') {
      Frame f;
      f.object = c == '{';
      f.path = value_path();
      stack.push_back(std::move(f));
      ++i;
    } else {
      // A number or a literal: runs to the next delimiter.
      value_path();
      while (i < text.size() && std::string_view(",]} \t\r\n").find(text[i]) == std::string_view::npos) ++i;
    }
  }
}

}  // namespace

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

StatusOr<YamlDocument> YamlDocument::Parse(std::string_view text, std::string source_name) {
  YamlDocument doc;
  doc.source_name_ = std::move(source_name);
  YAML::Node node;
  try {
    node = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(
        fmt::format("{}:{}: invalid YAML: {}", doc.source_name_, e.mark.line + 1, e.msg));
  }
  Converter converter(doc.lines_);
  Status s = converter.Convert(node, "", doc.root_);
  if (!s.ok()) return doc.Locate(s);
  return doc;
}

StatusOr<YamlDocument> YamlDocument::ParseJson(std::string_view text, std::string source_name) {
  YamlDocument doc;
  doc.source_name_ = std::move(source_name);
  auto line_at = [&](size_t byte) {
    const size_t end = std::min(byte, text.size());
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + end, '\n'));
  };
  if (text.size() > kMaxJsonFileBytes) {
    return InvalidArgument(fmt::format("{}:1: {} bytes is above the limit of {} for a JSON file",
                                       doc.source_name_, text.size(), kMaxJsonFileBytes));
  }
  if (Status depth = CheckJsonDepth(text, "document"); !depth.ok()) {
    return InvalidArgument(fmt::format("{}:1: {}", doc.source_name_, depth.message()));
  }
  try {
    doc.root_ = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte counts from 1 and points at the character that broke the parse.
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    return InvalidArgument(fmt::format("{}:{}: invalid JSON: {}", doc.source_name_,
                                       line_at(e.byte == 0 ? 0 : e.byte - 1),
                                       colon == std::string::npos ? what : what.substr(colon + 2)));
  } catch (const json::exception& e) {
    // Out-of-range numbers (1e309) are not parse errors to nlohmann.
    return InvalidArgument(fmt::format("{}:1: invalid JSON: {}", doc.source_name_, e.what()));
  }
  RecordJsonLines(text, doc.lines_);
  return doc;
}

StatusOr<YamlDocument> YamlDocument::Load(const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return ParseJson(text, path);
  // Errors name the file as given, so they are clickable from the shell.
  return Parse(text, path);
}

int YamlDocument::LineOf(std::string_view path) const {
  std::string p(path);
  while (!p.empty()) {
    auto it = lines_.find(p);
    if (it != lines_.end()) return it->second;
    // Strip the last ".field" or "[index]".
    const size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p.resize(cut);
  }
  return 1;
}

Status YamlDocument::Locate(const Status& status) const {
  if (status.ok()) return status;
  const std::string& msg = status.message();
  const size_t colon = msg.find(": ");
  const std::string path = colon == std::string::npos ? "" : msg.substr(0, colon);
  const bool looks_like_path =
      !path.empty() && path.find(' ') == std::string::npos && path.find('\'') == std::string::npos;
  const int line = looks_like_path ? LineOf(path) : 1;
  return Status(status.code(), fmt::format("{}:{}: {}", source_name_, line, msg));
}

}  // namespace tidal::config
