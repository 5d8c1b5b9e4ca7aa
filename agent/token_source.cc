#include "agent/token_source.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

extern char** environ;

namespace tidal::agent {

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return InvalidArgument(fmt::format("--token-file {}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(fmt::format("--token-file {}: not a regular file", path));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return InvalidArgument(fmt::format(
        "--token-file {}: mode {:04o} lets others read it; chmod 600 it", path, st.st_mode & 07777));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return InvalidArgument(fmt::format("--token-file {}: cannot read it", path));
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return InvalidArgument(fmt::format("--token-file {}: is empty", path));
  return token;
}

std::optional<std::string> TakeEnvToken(const char* name) {
  const size_t name_len = std::strlen(name);
  std::optional<std::string> value;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, name, name_len) != 0 || (*e)[name_len] != '=') continue;
    char* v = *e + name_len + 1;
    if (!value) value = std::string(v);
    // The kernel shows the initial environment block, not `environ`:
    // overwrite the bytes wherever they live, then drop the variable.
    std::memset(v, 0, std::strlen(v));
  }
  unsetenv(name);
  return value;
}

}  // namespace tidal::agent
