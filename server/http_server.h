// Event-driven HTTP/1.1 server (Boost.Beast on Asio) under the control
// plane's API: a connection costs a socket and a small buffer, never a
// thread, so thousands of agents on keep-alive connections cannot starve
// the API the way cpp-httplib's thread per connection did (issue #12).
//
// How a request flows:
// - A few I/O threads (one per core, at most 4) run every connection's
//   reads and writes as asynchronous operations, each connection on a strand
//   of its own.
// - An idle keep-alive connection waits for its next request's first byte
//   for up to `idle_timeout`. From that byte on, the header must be complete
//   within `header_timeout` and the body within `body_timeout`; a slow or
//   partial request (slowloris) is closed when its deadline passes.
// - A complete request is handed to the worker pool (`workers` threads),
//   because the handlers block: a submit waits until its journal record is
//   durable. At most `max_queued` requests may wait for or hold a worker;
//   beyond that the answer is 503 at once, from the I/O thread.
// - The reply is written back on the connection's strand, and the
//   connection reads its next request (no pipelining: one request at a time
//   per connection, as HTTP/1.1 clients use it).
// - Past `max_connections` open connections a new one is answered 503 and
//   closed. A refused or malformed request is answered (400, 413, 431, 503)
//   and its connection closed after the unread input is drained, so the
//   client reads the answer instead of a reset.
//
// An asynchronous route's handler gets a responder instead of a reply to
// fill: it may park the request (a long-poll) and answer from another
// thread, holding no handler thread meanwhile.
//
// Routes are matched on path segments: "{name}" in a pattern matches one
// non-empty segment, which the handler finds in `path_params`. The path is
// percent-decoded before matching, the query into `params`.
#ifndef TIDAL_SERVER_HTTP_SERVER_H_
#define TIDAL_SERVER_HTTP_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/status.h"
#include "server/overload_guard.h"

namespace tidal::server {

struct HttpRequest {
  std::string method;
  std::string path;  // percent-decoded, without the query
  std::vector<std::pair<std::string, std::string>> params;   // the query, decoded, in order
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::vector<std::string> path_params;                      // the pattern's "{...}" segments
  std::string body;
  std::string remote_addr;

  // The first header of that name (case-insensitive), or "".
  std::string_view header(std::string_view name) const;
  bool has_param(std::string_view name) const;
  // The first value of the query parameter, or "".
  std::string param(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain";
  std::vector<std::pair<std::string, std::string>> headers;

  void set_content(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

struct HttpServerOptions {
  int workers = 64;
  int max_queued = 4096;        // requests waiting for or holding a worker
  int max_connections = 16384;  // open connections
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 16 << 10;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds idle_timeout{300'000};
  std::string tls_cert_file;  // both set: serve TLS only
  std::string tls_key_file;
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  // Sends the reply to one request: call it exactly once, from any thread.
  using Responder = std::function<void(HttpResponse)>;
  // A handler that may answer later (a long-poll): it returns at once, and
  // the request holds no handler thread while it waits.
  using AsyncHandler = std::function<void(const HttpRequest&, Responder)>;
  // Gives the body of a reply the server makes itself (its status is set,
  // its body is the message) and counts `why`, the refusal, when there is
  // one (not for a handler's exception: a 500). Called from any thread, and
  // for read timeouts too, whose reply cannot be sent (the deadline closed
  // the socket).
  using ErrorHook = std::function<void(std::optional<Rejection> why, HttpResponse&)>;

  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before Bind. `pattern` is a path with "{name}" segments.
  void Route(std::string_view method, std::string_view pattern, Handler handler);
  void RouteAsync(std::string_view method, std::string_view pattern, AsyncHandler handler);
  // For every request no route matches.
  void Fallback(Handler handler);
  void OnError(ErrorHook hook);

  // Binds host:port (port 0 = any free port) and returns the port. An
  // unusable TLS certificate or key is InvalidArgument.
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(), then waits for the requests being handled.
  void Serve();
  // From any thread (a signal watcher's): makes Serve() return.
  void Stop();

  // Open connections, for the gauge.
  int connections() const;

  struct Impl;  // server/http_server.cc; public for its connection sessions

 private:
  std::unique_ptr<Impl> impl_;
};

// "a%20b" -> "a b"; with `plus_is_space` (a query) also "+" -> " ". False
// for a malformed escape.
bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_HTTP_SERVER_H_
