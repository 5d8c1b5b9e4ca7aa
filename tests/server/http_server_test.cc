// The HTTP layer on its own (server/http_server.h), in process, spoken to
// over raw sockets: what a hostile or careless client can do with
// connections (hold thousands idle, send a header one byte at a time, send
// too much), and that none of it keeps another client from being served.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tidal::server {
namespace {

// A client socket whose reads give up after 10 s, so that a server that
// never answers fails the test instead of hanging it.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() { close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) const {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // One reply: its status (0 when the connection closed or timed out
  // first) and body.
  std::pair<int, std::string> Read() {
    while (true) {
      const size_t end = in_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const int status = std::atoi(in_.substr(9, 3).c_str());
        size_t length = 0;
        const size_t cl = in_.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) length = std::strtoul(in_.c_str() + cl + 16, nullptr, 10);
        if (status == 100) {
          in_.erase(0, end + 4);
          return {100, ""};
        }
        if (in_.size() >= end + 4 + length) {
          std::string body = in_.substr(end + 4, length);
          in_.erase(0, end + 4 + length);
          return {status, body};
        }
      }
      if (!Fill()) return {0, ""};
    }
  }
  // True when the server closed the connection (not a read timeout).
  bool ClosedByServer() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }
  std::pair<int, std::string> Request(const std::string& method, const std::string& target,
                                      const std::string& body = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: test\r\n";
    if (!body.empty() || method == "POST") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    if (!Send(req + "\r\n" + body)) return {0, ""};
    return Read();
  }

 private:
  bool Fill() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string in_;
};

// An HttpServer on a free loopback port, serving on a thread of its own;
// counts the refusals it reports.
class TestServer {
 public:
  explicit TestServer(HttpServerOptions options, std::function<void(HttpServer&)> routes = {})
      : server_(std::move(options)) {
    server_.Route("GET", "/echo/{id}", [](const HttpRequest& req, HttpResponse& res) {
      res.set_content(req.path_params[0] + "|" + req.param("q") + "|" + (req.has_param("flag") ? "flag" : ""),
                      "text/plain");
    });
    server_.Route("POST", "/echo", [](const HttpRequest& req, HttpResponse& res) {
      res.status = 201;
      res.set_content(req.body + "|" + std::string(req.header("x-TEST")), "text/plain");
    });
    server_.Route("GET", "/throw", [](const HttpRequest&, HttpResponse&) { throw std::runtime_error("boom"); });
    if (routes) routes(server_);
    server_.OnError([this](std::optional<Rejection> why, HttpResponse&) {
      std::lock_guard lock(mu_);
      if (why) ++refusals_[*why];
      counted_.notify_all();
    });
    auto port = server_.Bind("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().message();
    port_ = port.ok() ? *port : 0;
    thread_ = std::thread([this] { server_.Serve(); });
  }
  ~TestServer() {
    server_.Stop();
    thread_.join();
  }
  int port() const { return port_; }
  // The refusals of that kind counted so far, once there are at least
  // `expected` (or 10 s passed): a deadline closes the socket before the
  // server's completion handler counts it.
  int refusals(Rejection why, int expected = 0) {
    std::unique_lock lock(mu_);
    counted_.wait_for(lock, std::chrono::seconds(10), [&] { return refusals_[why] >= expected; });
    return refusals_[why];
  }
  HttpServer& server() { return server_; }

 private:
  HttpServer server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable counted_;
  std::map<Rejection, int> refusals_;
};

HttpServerOptions SmallOptions() {
  HttpServerOptions o;
  o.workers = 2;
  o.max_queued = 64;
  o.max_connections = 1000;
  return o;
}

TEST(PercentDecodeTest, DecodesEscapesAndRefusesMalformedOnes) {
  std::string out;
  EXPECT_TRUE(PercentDecode("a%20b%2Fc", false, &out));
  EXPECT_EQ(out, "a b/c");
  EXPECT_TRUE(PercentDecode("x+y", true, &out));
  EXPECT_EQ(out, "x y");
  EXPECT_TRUE(PercentDecode("x+y", false, &out));
  EXPECT_EQ(out, "x+y");
  EXPECT_FALSE(PercentDecode("%zz", false, &out));
  EXPECT_FALSE(PercentDecode("abc%4", false, &out));
  EXPECT_FALSE(PercentDecode("a%00b", false, &out));  // a NUL would cut the path short
}

TEST(HttpServerTest, RoutesOnPathSegmentsAndDecodesTheQuery) {
  TestServer s(SmallOptions());
  Client c(s.port());
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.Request("GET", "/echo/a%20b?q=x+y&flag"), std::make_pair(200, std::string("a b|x y|flag")));
  // Several requests on one keep-alive connection.
  EXPECT_EQ(c.Request("GET", "/echo/7"), std::make_pair(200, std::string("7||")));
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nX-Test: yes\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_EQ(c.Read(), std::make_pair(201, std::string("hello|yes")));
  // An empty segment does not match "{id}"; nor does a method or a longer path.
  EXPECT_EQ(c.Request("GET", "/echo/").first, 404);
  EXPECT_EQ(c.Request("POST", "/echo/7").first, 404);
  EXPECT_EQ(c.Request("GET", "/echo/7/more").first, 404);
  // A handler that throws is a 500, and the connection goes on.
  EXPECT_EQ(c.Request("GET", "/throw").first, 500);
  EXPECT_EQ(c.Request("GET", "/echo/8").first, 200);
}

// A client that announces its body waits for "100 Continue" before sending
// it (curl does for large bodies).
TEST(HttpServerTest, AnswersExpectContinue) {
  TestServer s(SmallOptions());
  Client c(s.port());
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"));
  EXPECT_EQ(c.Read().first, 100);
  ASSERT_TRUE(c.Send("abc"));
  EXPECT_EQ(c.Read(), std::make_pair(201, std::string("abc|")));
}

// The point of the event-driven layer: with 2 handler threads, hundreds of
// idle keep-alive connections (some that never sent a byte) hold none, and a
// new client is answered at once. A thread-per-connection server with 2
// threads would leave it unanswered (the client gives up after 10 s).
TEST(HttpServerTest, IdleKeepAliveConnectionsHoldNoThread) {
  TestServer s(SmallOptions());
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(std::make_unique<Client>(s.port()));
    ASSERT_TRUE(idle.back()->connected());
    if (i % 2 == 0) ASSERT_EQ(idle.back()->Request("GET", "/echo/1").first, 200) << i;
  }
  Client fresh(s.port());
  EXPECT_EQ(fresh.Request("GET", "/echo/fresh"), std::make_pair(200, std::string("fresh||")));
  // And the idle ones are still served when they speak again.
  EXPECT_EQ(idle.front()->Request("GET", "/echo/again").first, 200);
  EXPECT_EQ(idle.back()->Request("GET", "/echo/again").first, 200);
}

// Slowloris: a header that never completes is closed at its deadline, while
// other clients are served meanwhile; a connection that is merely idle (no
// byte of a request yet) is not held to the header's deadline.
TEST(HttpServerTest, AnIncompleteHeaderIsClosedAtItsDeadline) {
  HttpServerOptions o = SmallOptions();
  o.header_timeout = std::chrono::milliseconds(300);
  TestServer s(o);
  Client idle(s.port());
  ASSERT_TRUE(idle.connected());
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(std::make_unique<Client>(s.port()));
    ASSERT_TRUE(slow.back()->Send("GET /echo/1 HTTP/1.1\r\nHost: t\r\nX-Slow: "));
  }
  Client other(s.port());
  EXPECT_EQ(other.Request("GET", "/echo/2").first, 200);
  for (auto& c : slow) EXPECT_TRUE(c->ClosedByServer());
  EXPECT_EQ(s.refusals(Rejection::kReadTimeout, 20), 20);
  // The idle connection has now waited longer than the header deadline.
  EXPECT_EQ(idle.Request("GET", "/echo/3").first, 200);
}

TEST(HttpServerTest, AnIncompleteBodyIsClosedAtItsDeadline) {
  HttpServerOptions o = SmallOptions();
  o.body_timeout = std::chrono::milliseconds(300);
  TestServer s(o);
  Client slow(s.port());
  ASSERT_TRUE(slow.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly part"));
  EXPECT_TRUE(slow.ClosedByServer());
  EXPECT_EQ(s.refusals(Rejection::kReadTimeout, 1), 1);
}

// Past max_connections a new connection gets a 503 and is closed; the ones
// already open keep being served, and a slot freed is usable again.
TEST(HttpServerTest, ConnectionsBeyondTheLimitGet503) {
  HttpServerOptions o = SmallOptions();
  o.max_connections = 4;
  TestServer s(o);
  std::vector<std::unique_ptr<Client>> open;
  for (int i = 0; i < 4; ++i) {
    open.push_back(std::make_unique<Client>(s.port()));
    ASSERT_EQ(open.back()->Request("GET", "/echo/1").first, 200);  // accepted and counted
  }
  {
    Client extra(s.port());
    EXPECT_EQ(extra.Read().first, 503);
    EXPECT_TRUE(extra.ClosedByServer());
  }
  EXPECT_EQ(s.refusals(Rejection::kConnectionLimit), 1);
  EXPECT_EQ(open[0]->Request("GET", "/echo/2").first, 200);
  open.pop_back();
  // The server sees the close asynchronously: retry until the slot is free.
  int status = 503;
  for (int attempt = 0; attempt < 1000 && status == 503; ++attempt) {
    Client again(s.port());
    status = again.Request("GET", "/echo/3").first;
  }
  EXPECT_EQ(status, 200);
}

// Requests beyond max_queued (waiting for or holding a handler thread) get
// 503 at once instead of queueing without bound.
TEST(HttpServerTest, RequestsBeyondTheQueueGet503) {
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  HttpServerOptions o = SmallOptions();
  o.workers = 1;
  o.max_queued = 1;
  TestServer s(o, [&](HttpServer& server) {
    server.Route("GET", "/block", [&, released](const HttpRequest&, HttpResponse& res) {
      entered.set_value();
      released.wait();
      res.set_content("done", "text/plain");
    });
  });
  Client blocked(s.port());
  ASSERT_TRUE(blocked.Send("GET /block HTTP/1.1\r\nHost: t\r\n\r\n"));
  entered.get_future().wait();
  Client refused(s.port());
  auto reply = refused.Request("GET", "/echo/1");
  EXPECT_EQ(reply.first, 503);
  EXPECT_EQ(s.refusals(Rejection::kInFlightLimit), 1);
  release.set_value();
  EXPECT_EQ(blocked.Read(), std::make_pair(200, std::string("done")));
  Client after(s.port());
  EXPECT_EQ(after.Request("GET", "/echo/2").first, 200);
}

// Too large or malformed: an answer the client can read (not a reset), the
// connection closed, the refusal counted.
TEST(HttpServerTest, OversizedAndMalformedRequestsAreAnsweredAndClosed) {
  HttpServerOptions o = SmallOptions();
  o.max_body_bytes = 1024;
  TestServer s(o);
  {
    Client c(s.port());
    EXPECT_EQ(c.Request("POST", "/echo", std::string(100'000, 'x')).first, 413);
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    Client c(s.port());
    const std::string huge_header = "X-Big: " + std::string(64 << 10, 'h') + "\r\n";
    ASSERT_TRUE(c.Send("GET /echo/1 HTTP/1.1\r\nHost: t\r\n" + huge_header + "\r\n"));
    EXPECT_EQ(c.Read().first, 431);
  }
  {
    Client c(s.port());
    ASSERT_TRUE(c.Send("THIS IS NOT HTTP\r\n\r\n"));
    EXPECT_EQ(c.Read().first, 400);
  }
  {
    Client c(s.port());
    ASSERT_TRUE(c.Send("GET /echo/%zz HTTP/1.1\r\nHost: t\r\n\r\n"));
    EXPECT_EQ(c.Read().first, 400);
  }
  EXPECT_EQ(s.refusals(Rejection::kBodyTooLarge), 1);
  EXPECT_EQ(s.refusals(Rejection::kHeaderTooLarge), 1);
  EXPECT_EQ(s.refusals(Rejection::kMalformed), 2);
  Client ok(s.port());
  EXPECT_EQ(ok.Request("GET", "/echo/1").first, 200);
}

}  // namespace
}  // namespace tidal::server
