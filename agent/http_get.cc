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

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
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

}  // namespace

StatusOr<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                            Duration timeout, size_t max_body_bytes) {
  namespace net = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  const std::string target = fmt::format("{}:{}{}", host, port, path);
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) return InvalidArgument(fmt::format("GET {}: host must be an IP address", target));
  if (path.empty() || path.front() != '/') return InvalidArgument(fmt::format("GET {}: path must start with /", target));

  // One io_context per call: a probe is rare (seconds apart per pod) and
  // must not share a loop with another pod's slow probe.
  net::io_context io;
  beast::tcp_stream stream(io);
  // One deadline for the whole exchange: tcp_stream's expiry applies to
  // every operation started before it passes, and closes the socket then.
  stream.expires_after(timeout);
  http::request<http::empty_body> request{http::verb::get, path, 11};
  request.set(http::field::host, fmt::format("{}:{}", host, port));
  request.set(http::field::connection, "close");
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body_bytes);
  parser.header_limit(16 * 1024);
  boost::system::error_code result;
  stream.async_connect(net::ip::tcp::endpoint(address, static_cast<uint16_t>(port)),
                       [&](boost::system::error_code connected) {
    if (connected) {
      result = connected;
      return;
    }
    http::async_write(stream, request, [&](boost::system::error_code written, size_t) {
      if (written) {
        result = written;
        return;
      }
      // The header first: Boost 1.74's response parser can let a
      // Content-Length over the body limit through (it enters the body
      // state before it reports the limit), so that check is made here.
      http::async_read_header(stream, buffer, parser, [&](boost::system::error_code header, size_t) {
        if (header) {
          result = header;
          return;
        }
        if (parser.content_length() && *parser.content_length() > max_body_bytes) {
          result = http::error::body_limit;
          return;
        }
        http::async_read(stream, buffer, parser, [&](boost::system::error_code read, size_t) { result = read; });
      });
    });
  });
  io.run();
  if (result == http::error::body_limit) {
    return ResourceExhausted(fmt::format("GET http://{}: body over {} bytes", target, max_body_bytes));
  }
  if (result == beast::error::timeout) {
    return Unavailable(fmt::format("GET http://{}: no whole reply within {} ms", target,
                                   std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  }
  if (result) return Unavailable(fmt::format("GET http://{}: {}", target, result.message()));
  http::response<http::string_body> reply = parser.release();
  return HttpReply{static_cast<int>(reply.result_int()), std::move(reply.body())};
}

StatusOr<int> PickFreePort() {
  const int port = BindLoopback(0);
  if (port < 0) return Internal(fmt::format("bind 127.0.0.1:0: {}", std::strerror(-port)));
  return port;
}

bool PortIsFree(int port) { return BindLoopback(port) == port; }

}  // namespace tidal::agent
