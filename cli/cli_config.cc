#include "cli/cli_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/yaml_document.h"
#include "protocol/leader_redirect.h"

namespace tidal::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Reads `server:`, `token:` and `ca_file:` of one mapping; `where` prefixes errors.
StatusOr<CliContext> ReadContext(const json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": expected a mapping with server and token");
  CliContext c;
  for (const auto& [key, value] : j.items()) {
    if (key != "server" && key != "token" && key != "ca_file") {
      return InvalidArgument(fmt::format("{}: unknown key '{}' (expected server, token, ca_file)", where, key));
    }
    if (!value.is_string()) return InvalidArgument(fmt::format("{}.{}: expected a string", where, key));
    (key == "server" ? c.server : key == "token" ? c.token : c.ca_file) = value.get<std::string>();
  }
  return c;
}

}  // namespace

std::string NormalizeServerUrl(std::string url) {
  if (url.empty()) return url;
  if (url.find("://") == std::string::npos) url = "http://" + url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.ends_with("/v1")) url.resize(url.size() - 3);
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

StatusOr<std::vector<std::string>> ParseServerUrls(std::string_view list) {
  std::string normalized;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string url(list.substr(start, end - start));
    url.erase(0, url.find_first_not_of(' '));
    url.erase(url.find_last_not_of(' ') + 1);
    if (start > 0) normalized += ',';
    normalized += NormalizeServerUrl(url);
    start = end + 1;
  }
  return protocol::ParseServerList(normalized, "--server");
}

std::string CliConfig::DefaultPath() {
  if (const char* p = std::getenv("TIDAL_CONFIG"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/tidal/config.yaml";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/tidal/config.yaml";
  return "";
}

StatusOr<CliConfig> CliConfig::Load(const std::string& path) {
  CliConfig config;
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return config;
  auto doc = config::YamlDocument::Load(path);
  if (!doc.ok()) return doc.status();
  const json& root = doc->root();
  if (root.is_null()) return config;
  if (!root.is_object()) return InvalidArgument(path + ": expected a mapping (server, token, current_context, contexts)");
  json top = json::object();
  for (const auto& [key, value] : root.items()) {
    if (key == "server" || key == "token" || key == "ca_file") {
      top[key] = value;
    } else if (key == "current_context") {
      if (!value.is_string()) return InvalidArgument(path + ": current_context: expected a string");
      config.current_ = value.get<std::string>();
    } else if (key == "contexts") {
      if (!value.is_object()) return InvalidArgument(path + ": contexts: expected a mapping of name to {server, token}");
      for (const auto& [name, c] : value.items()) {
        auto context = ReadContext(c, fmt::format("{}: contexts.{}", path, name));
        if (!context.ok()) return context.status();
        config.contexts_[name] = *context;
      }
    } else {
      return InvalidArgument(fmt::format(
          "{}: unknown key '{}' (expected server, token, ca_file, current_context, contexts)", path, key));
    }
  }
  auto t = ReadContext(top, path);
  if (!t.ok()) return t.status();
  config.top_ = *t;
  if (!config.current_.empty() && !config.contexts_.count(config.current_)) {
    return InvalidArgument(fmt::format("{}: current_context: no context named '{}'", path, config.current_));
  }
  return config;
}

Status CliConfig::Save(const std::string& path) const {
  std::error_code ec;
  if (empty()) {
    fs::remove(path, ec);
    return ec ? Internal(fmt::format("{}: cannot remove: {}", path, ec.message())) : Status::Ok();
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!top_.server.empty()) out << YAML::Key << "server" << YAML::Value << top_.server;
  if (!top_.token.empty()) out << YAML::Key << "token" << YAML::Value << top_.token;
  if (!top_.ca_file.empty()) out << YAML::Key << "ca_file" << YAML::Value << top_.ca_file;
  if (!current_.empty()) out << YAML::Key << "current_context" << YAML::Value << current_;
  if (!contexts_.empty()) {
    out << YAML::Key << "contexts" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, c] : contexts_) {
      out << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "server" << YAML::Value
          << c.server << YAML::Key << "token" << YAML::Value << c.token;
      if (!c.ca_file.empty()) out << YAML::Key << "ca_file" << YAML::Value << c.ca_file;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal(fmt::format("{}: cannot write: {}", tmp, std::strerror(errno)));
  const std::string text = std::string(out.c_str()) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Internal(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  }
  return Status::Ok();
}

CliContext CliConfig::Effective() const {
  if (!current_.empty()) {
    auto it = contexts_.find(current_);
    if (it != contexts_.end()) return it->second;
  }
  return top_;
}

bool CliConfig::RemoveContextIf(const std::string& name, const CliContext& expected) {
  auto it = contexts_.find(name);
  if (it == contexts_.end() || !(it->second == expected)) return false;
  contexts_.erase(it);
  if (current_ == name) current_.clear();
  return true;
}

}  // namespace tidal::cli
