#include "agent/token_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
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

Status WriteTokenFile(const std::string& path, const std::string& token) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable(fmt::format("{}: {}", tmp, std::strerror(errno)));
  const std::string line = token + "\n";
  // fchmod: a file left by an earlier run keeps its old mode through O_CREAT.
  const bool written = fchmod(fd, 0600) == 0 &&
                       write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const bool closed = close(fd) == 0;
  if (!written || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    return Unavailable(fmt::format("writing {}: {}", path, why));
  }
  return Status::Ok();
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
