#include "config/yaml_document.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

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

StatusOr<YamlDocument> YamlDocument::Load(const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
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
