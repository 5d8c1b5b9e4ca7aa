#include "agent/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>
#include <httplib.h>

namespace tidal::agent {

StatusOr<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                            Duration timeout) {
  httplib::Client client(host, port);
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
  client.set_connection_timeout(0, usec);
  client.set_read_timeout(0, usec);
  client.set_write_timeout(0, usec);
  auto res = client.Get(path.c_str());
  if (!res) {
    return Unavailable(fmt::format("GET http://{}:{}{}: {}", host, port, path,
                                   httplib::to_string(res.error())));
  }
  return HttpReply{res->status, res->body};
}

namespace {

// Binds 127.0.0.1:port (0 = any); returns the bound port, or -errno.
int BindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return -err;
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace

StatusOr<int> PickFreePort() {
  const int port = BindLoopback(0);
  if (port < 0) return Internal(fmt::format("bind 127.0.0.1:0: {}", std::strerror(-port)));
  return port;
}

bool PortIsFree(int port) { return BindLoopback(port) == port; }

}  // namespace tidal::agent
