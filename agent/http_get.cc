#include "agent/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include <curl/curl.h>
#include <fmt/core.h>

namespace tidal::agent {

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

// curl_global_init is not thread-safe in every libcurl a node may have: run
// it once, before the first handle.
void InitCurlOnce() {
  static const bool initialized = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)initialized;
}

struct BodySink {
  std::string body;
  size_t limit = 0;
  bool over_limit = false;
};

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const size_t n = size * count;
  if (sink->body.size() + n > sink->limit) {
    sink->over_limit = true;
    return 0;  // anything but n makes libcurl abort the transfer
  }
  sink->body.append(data, n);
  return n;
}

}  // namespace

StatusOr<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                            Duration timeout, size_t max_body_bytes) {
  InitCurlOnce();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return Internal("curl_easy_init failed");
  const std::string url = fmt::format("http://{}:{}{}", host, port, path);
  BodySink sink;
  sink.limit = max_body_bytes;
  char error[CURL_ERROR_SIZE] = "";
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  // No signals: the agent has threads, and libcurl's SIGALRM-based DNS
  // timeout is not thread-safe.
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  const long timeout_ms = std::max<long>(1, static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(c);
  if (sink.over_limit) {
    return ResourceExhausted(fmt::format("GET {}: body over {} bytes", url, max_body_bytes));
  }
  if (rc != CURLE_OK) {
    return Unavailable(fmt::format("GET {}: {}", url, error[0] ? error : curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  return HttpReply{static_cast<int>(status), std::move(sink.body)};
}

StatusOr<int> PickFreePort() {
  const int port = BindLoopback(0);
  if (port < 0) return Internal(fmt::format("bind 127.0.0.1:0: {}", std::strerror(-port)));
  return port;
}

bool PortIsFree(int port) { return BindLoopback(port) == port; }

}  // namespace tidal::agent
