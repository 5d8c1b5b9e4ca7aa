#include "server/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>

namespace tidal::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() &&
        std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return {};
}

bool HttpRequest::has_param(std::string_view name) const {
  return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
}

std::string HttpRequest::param(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return v;
  }
  return {};
}

bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex(in[i + 1]);
      const int lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  // A NUL would cut the path short wherever it meets a C API.
  return out->find('\0') == std::string::npos;
}

namespace {

std::string_view Std(beast::string_view s) { return {s.data(), s.size()}; }

struct RouteEntry {
  std::string method;
  std::vector<std::string> segments;  // "{...}" = any one non-empty segment
  HttpServer::Handler handler;      // one of the two
  HttpServer::AsyncHandler async;
};

// "/a/b/c" -> {"a", "b", "c"}; "/" -> {""}.
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (true) {
    const size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

bool IsParam(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

// The request line's target -> decoded path, its segments and the query.
bool ParseTarget(std::string_view target, HttpRequest* req, std::vector<std::string>* segments) {
  if (target.empty() || target.front() != '/') return false;
  const size_t q = target.find('?');
  const std::string_view raw_path = target.substr(0, q);
  std::string decoded;
  for (std::string_view s : SplitPath(raw_path)) {
    if (!PercentDecode(s, false, &decoded)) return false;
    segments->push_back(decoded);
    req->path += '/';
    req->path += decoded;
  }
  if (q == std::string_view::npos) return true;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!PercentDecode(pair.substr(0, eq), true, &key)) return false;
    if (eq != std::string_view::npos && !PercentDecode(pair.substr(eq + 1), true, &value)) return false;
    req->params.emplace_back(std::move(key), std::move(value));
  }
  return true;
}

// Maps a read error to the reply it gets; nullopt = close without one (the
// peer went away, or a deadline closed the socket).
struct ReadFailure {
  std::optional<Rejection> why;
  int status = 0;
  std::string message;
};
ReadFailure Classify(const beast::error_code& ec) {
  if (ec == http::error::body_limit) return {Rejection::kBodyTooLarge, 413, "body: above the size limit"};
  if (ec == http::error::header_limit) {
    return {Rejection::kHeaderTooLarge, 431, "headers: above the size limit"};
  }
  if (ec == beast::error::timeout) return {Rejection::kReadTimeout, 0, ""};
  if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
    return {Rejection::kMalformed, 400, fmt::format("request: malformed HTTP ({})", ec.message())};
  }
  return {};
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : options(std::move(o)),
        io_threads(std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4)),
        ioc(io_threads),
        acceptor(net::make_strand(ioc)),
        retry_timer(acceptor.get_executor()),
        pool(static_cast<size_t>(options.workers)) {}

  void Accept();
  void OnAccept(tcp::socket socket);
  // Routes `req` (or the fallback) and answers through `reply`, now or
  // (an asynchronous route) later; a handler's exception is a 500.
  void Handle(HttpRequest& req, const std::vector<std::string>& segments, const Responder& reply) const;
  // The server's own reply (`status`, `message`), with the hook's body;
  // counts `why`.
  HttpResponse Refusal(std::optional<Rejection> why, int status, std::string_view message) const;

  const HttpServerOptions options;
  std::vector<RouteEntry> routes;
  Handler fallback;
  ErrorHook error_hook;
  int max_connections = 0;  // options' limit, lowered to what the fd limit allows
  std::atomic<int> connections{0};
  std::atomic<int> queued{0};

  // The session objects live in `ioc` and the jobs in `pool`: destroyed in
  // this order (pool first, whose jobs hold sessions), after the counters.
  const int io_threads;
  std::optional<ssl::context> tls;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  net::thread_pool pool;
};

namespace {

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... StreamArgs>
  Session(HttpServer::Impl* server, std::string remote, StreamArgs&&... args)
      : server_(server), stream_(std::forward<StreamArgs>(args)...), remote_(std::move(remote)) {}
  ~Session() { server_->connections.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    beast::error_code ignored;
    // Without it Nagle holds a reply body behind its headers for ~40 ms.
    Lowest().socket().set_option(tcp::no_delay(true), ignored);
    if constexpr (kTls) {
      Lowest().expires_after(server_->options.header_timeout);
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (!ec) self->WaitForRequest();
      });
    } else {
      WaitForRequest();
    }
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // An idle connection waits up to idle_timeout for the first byte of its
  // next request; only then does the header's deadline start.
  void WaitForRequest() {
    if (buffer_.size() > 0) return ReadHeader();
    Lowest().expires_after(server_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return;  // closed, or idle too long: nothing to answer
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    Lowest().expires_after(server_->options.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Fail(ec);
                              self->OnHeader();
                            });
  }

  void OnHeader() {
    const auto& req = parser_->get();
    version_ = req.version();
    if (parser_->is_done()) return Dispatch();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      continue_.emplace(http::status::continue_, version_);
      Lowest().expires_after(server_->options.body_timeout);
      return http::async_write(stream_, *continue_,
                               [self = this->shared_from_this()](beast::error_code ec, size_t) {
                                 if (!ec) self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(server_->options.body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Fail(ec);
      self->Dispatch();
    });
  }

  void Fail(const beast::error_code& ec) {
    ReadFailure f = Classify(ec);
    if (!f.why) return;
    if (f.status == 0) {  // a deadline: the socket is closed already
      server_->Refusal(f.why, 408, "request: read timed out");
      return;
    }
    Write(server_->Refusal(f.why, f.status, f.message), false);
  }

  void Dispatch() {
    Lowest().expires_never();  // the handler's time is the server's, not the client's
    auto& msg = parser_->get();
    auto job = std::make_shared<Job>();
    if (!ParseTarget(Std(msg.target()), &job->req, &job->segments)) {
      parser_.reset();
      return Write(server_->Refusal(Rejection::kMalformed, 400, "request: malformed target"), false);
    }
    job->req.method = std::string(Std(msg.method_string()));
    job->req.headers.reserve(8);
    for (const auto& field : msg) job->req.headers.emplace_back(Std(field.name_string()), Std(field.value()));
    job->req.body = std::move(msg.body());
    job->req.remote_addr = remote_;
    job->keep_alive = msg.keep_alive();
    parser_.reset();
    if (server_->queued.fetch_add(1, std::memory_order_relaxed) >= server_->options.max_queued) {
      server_->queued.fetch_sub(1, std::memory_order_relaxed);
      return Write(server_->Refusal(Rejection::kInFlightLimit, 503, "server busy: too many requests in flight"),
                   false);
    }
    net::post(server_->pool, [self = this->shared_from_this(), job] {
      auto reply = [self, keep = job->keep_alive](HttpResponse res) {
        net::post(self->stream_.get_executor(), [self, keep, res = std::move(res)]() mutable {
          self->Write(std::move(res), keep);
        });
      };
      self->server_->Handle(job->req, job->segments, reply);
      self->server_->queued.fetch_sub(1, std::memory_order_relaxed);
    });
  }

  void Write(HttpResponse r, bool keep_alive) {
    res_ = {};
    res_.version(version_);
    res_.result(static_cast<unsigned>(r.status));
    res_.set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res_.insert(k, v);
    res_.keep_alive(keep_alive);
    res_.body() = std::move(r.body);
    res_.prepare_payload();
    Lowest().expires_after(server_->options.body_timeout);
    http::async_write(stream_, res_, [self = this->shared_from_this(), keep_alive](beast::error_code ec, size_t) {
      if (ec) return;
      if (keep_alive) return self->WaitForRequest();
      self->Close();
    });
  }

  // After a reply that ends the connection: shut down our side, then read
  // and drop what the client still sends (the rest of a refused body) until
  // it closes or a short deadline passes. Closing at once would reset the
  // connection and could destroy the reply before the client reads it.
  void Close() {
    Lowest().expires_after(std::chrono::seconds(2));
    if constexpr (kTls) {
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Drain();
    }
  }
  void Drain() {
    Lowest().async_read_some(net::buffer(drain_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (!ec) self->Drain();
                             });
  }

  struct Job {
    HttpRequest req;
    std::vector<std::string> segments;
    bool keep_alive = true;
  };

  HttpServer::Impl* const server_;
  Stream stream_;
  const std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  http::response<http::string_body> res_;
  unsigned version_ = 11;
  char drain_[4096];
};

}  // namespace

HttpResponse HttpServer::Impl::Refusal(std::optional<Rejection> why, int status, std::string_view message) const {
  HttpResponse res;
  res.status = status;
  res.set_content(std::string(message), "text/plain");
  if (error_hook) error_hook(why, res);
  return res;
}

void HttpServer::Impl::Handle(HttpRequest& req, const std::vector<std::string>& segments,
                              const Responder& reply) const {
  const RouteEntry* route = nullptr;
  for (const RouteEntry& r : routes) {
    if (r.method != req.method || r.segments.size() != segments.size()) continue;
    bool match = true;
    req.path_params.clear();
    for (size_t i = 0; i < segments.size() && match; ++i) {
      if (IsParam(r.segments[i])) {
        match = !segments[i].empty();
        req.path_params.push_back(segments[i]);
      } else {
        match = r.segments[i] == segments[i];
      }
    }
    if (match) {
      route = &r;
      break;
    }
  }
  if (route == nullptr) req.path_params.clear();
  // An asynchronous handler owns the reply from here: it must not throw.
  if (route != nullptr && route->async) return route->async(req, reply);
  HttpResponse res;
  try {
    if (route != nullptr) {
      route->handler(req, res);
    } else {
      fallback(req, res);
    }
  } catch (const std::exception& e) {
    res = Refusal(std::nullopt, 500, fmt::format("unexpected error: {}", e.what()));
  }
  reply(std::move(res));
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) {
      // Out of file descriptors, most likely: retrying at once would spin.
      retry_timer.expires_after(std::chrono::milliseconds(50));
      retry_timer.async_wait([this](beast::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    OnAccept(std::move(socket));
    Accept();
  });
}

void HttpServer::Impl::OnAccept(tcp::socket socket) {
  beast::error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  if (ec) return;
  if (connections.fetch_add(1, std::memory_order_relaxed) >= max_connections) {
    connections.fetch_sub(1, std::memory_order_relaxed);
    // The refusal fits the socket's empty send buffer: a non-blocking write
    // never stalls the accept loop.
    HttpResponse r = Refusal(Rejection::kConnectionLimit, 503, "server busy: too many open connections");
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res.insert(k, v);
    res.keep_alive(false);
    res.body() = std::move(r.body);
    res.prepare_payload();
    socket.non_blocking(true, ec);
    if (!tls) http::write(socket, res, ec);
    socket.close(ec);
    return;
  }
  std::string remote = endpoint.address().to_string();
  if (tls) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(this, std::move(remote), std::move(socket), *tls)
        ->Start();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(this, std::move(remote), std::move(socket))->Start();
  }
}

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->fallback = [](const HttpRequest& req, HttpResponse& res) {
    res.status = 404;
    res.set_content(fmt::format("no route for {} {}", req.method, req.path), "text/plain");
  };
}

HttpServer::~HttpServer() {
  Stop();
  impl_->pool.stop();
  impl_->pool.join();
}

void HttpServer::Route(std::string_view method, std::string_view pattern, Handler handler) {
  RouteEntry r{std::string(method), {}, std::move(handler)};
  for (std::string_view s : SplitPath(pattern)) r.segments.emplace_back(s);
  impl_->routes.push_back(std::move(r));
}

void HttpServer::RouteAsync(std::string_view method, std::string_view pattern, AsyncHandler handler) {
  RouteEntry r{std::string(method), {}, nullptr, std::move(handler)};
  for (std::string_view s : SplitPath(pattern)) r.segments.emplace_back(s);
  impl_->routes.push_back(std::move(r));
}

void HttpServer::Fallback(Handler handler) { impl_->fallback = std::move(handler); }
void HttpServer::OnError(ErrorHook hook) { impl_->error_hook = std::move(hook); }
int HttpServer::connections() const { return impl_->connections.load(std::memory_order_relaxed); }

StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  Impl& s = *impl_;
  if (!s.options.tls_cert_file.empty()) {
    try {
      s.tls.emplace(ssl::context::tls_server);
      s.tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                         ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
      s.tls->use_certificate_chain_file(s.options.tls_cert_file);
      s.tls->use_private_key_file(s.options.tls_key_file, ssl::context::pem);
    } catch (const std::exception& e) {
      s.tls.reset();
      return InvalidArgument(fmt::format("tls_cert_file '{}' / tls_key_file '{}': OpenSSL cannot use them ({})",
                                         s.options.tls_cert_file, s.options.tls_key_file, e.what()));
    }
  }
  // Every connection is a file descriptor: take what the hard limit allows,
  // and keep some for the store, the logs and the pods' files.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
    getrlimit(RLIMIT_NOFILE, &nofile);
  }
  constexpr rlim_t kReservedFds = 256;
  s.max_connections = s.options.max_connections;
  if (nofile.rlim_cur != RLIM_INFINITY && nofile.rlim_cur > kReservedFds) {
    s.max_connections = static_cast<int>(std::min<rlim_t>(s.max_connections, nofile.rlim_cur - kReservedFds));
  }

  beast::error_code ec;
  tcp::resolver resolver(s.ioc);
  const auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || found.empty()) return InvalidArgument(fmt::format("--listen: cannot resolve host \"{}\"", host));
  const tcp::endpoint endpoint = found.begin()->endpoint();
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);  // so that a caller may try again
    return Unavailable(fmt::format("cannot bind {}:{}: {}", host, port, ec.message()));
  }
  s.Accept();
  return static_cast<int>(s.acceptor.local_endpoint().port());
}

void HttpServer::Serve() {
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->io_threads; ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (std::thread& t : threads) t.join();
  // Requests being handled finish (their replies are not sent); queued ones
  // are dropped unanswered, as if the connection had broken.
  impl_->pool.stop();
  impl_->pool.join();
}

void HttpServer::Stop() { impl_->ioc.stop(); }

}  // namespace tidal::server
