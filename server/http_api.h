// HTTP/JSON front of the control plane (on server/http_server.h): authentication, role
// checks, body limits, JSON parsing and Status -> HTTP status mapping. Every
// route is timed into tidal_api_request_seconds.
#ifndef TIDAL_SERVER_HTTP_API_H_
#define TIDAL_SERVER_HTTP_API_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "server/control_plane.h"
#include "server/follower_reads.h"
#include "server/http_server.h"
#include "server/overload_guard.h"

namespace tidal::server {

// One API route: the method and its path as docs/api.md writes it ("{id}",
// "{node}" for path parameters), which is both the pattern it is served at
// and its metrics label. The handlers are registered from this table, and the auth matrix
// test (tests/server/server_auth_test.cc) checks every row, so a route
// cannot be added without its authorization being tested.
struct ApiRoute {
  const char* method;  // "GET" or "POST"
  const char* name;
  // A read of committed state, which a follower answers from its copy for
  // a client that accepts a stale read (server/follower_reads.h).
  bool follower_reads = false;
};
const std::vector<ApiRoute>& ApiRoutes();

// HTTP status for a Status code.
int HttpStatusFor(StatusCode code);
// {"error": {"code", "message", "field"}}; field = the message's leading
// path; code = the status code's name unless `code_name` is given.
std::string ErrorBody(const Status& status, std::string_view code_name = {});

class HttpApi {
 public:
  // The leader's API (or a lone server's) over `control_plane`.
  HttpApi(ControlPlane& control_plane, const Authenticator& auth, const ServerConfig& config);
  // A follower's: the routes marked follower_reads from its current view,
  // for a client that accepts stale reads; 503 not_leader for the rest.
  HttpApi(FollowerReads& follower, const Authenticator& auth, const ServerConfig& config);
  ~HttpApi();

  // Binds to host:port (port 0 = any free port) and returns the port.
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop().
  void Serve();
  void Stop();

 private:
  HttpApi(ControlPlane* leader, FollowerReads* follower, Metrics& metrics, OverloadGuard& overload,
          const Authenticator& auth, const ServerConfig& config);
  void Routes();
  // The control plane that answers a request: the leader's, or the
  // follower's current view (nullptr before its first).
  std::shared_ptr<ControlPlane> Plane() const;
  // On a follower: true when it answers `req` (a follower_reads route, a
  // client that accepts stale reads, a view built), with the headers that
  // say how stale; else false with the 503 not_leader in `res`.
  bool FollowerAnswers(const HttpRequest& req, const std::string& route_name, const ControlPlane* view,
                       HttpResponse& res) const;
  // A configured token, else a node credential; 401 when neither.
  StatusOr<Principal> Authenticate(const std::string& authorization_header, const ControlPlane& cp) const;

  // What one request holds while it is served: a user's seat (given back
  // when the reply is written) and, for a 429, its Retry-After.
  struct Admission {
    OverloadGuard* guard = nullptr;
    std::string tenant;
    int retry_after_s = 0;
    Admission() = default;
    Admission(const Admission&) = delete;
    void LeaveSeat();  // once; the destructor does it otherwise
    Admission& operator=(const Admission&) = delete;
    ~Admission();
  };
  // Authentication, then the overload guard: the caller, or the 401/429 to
  // answer. `submit`: a submit or dry-run, which also draws on the tenant's
  // submit rate.
  StatusOr<Principal> Admit(const HttpRequest& req, const ControlPlane& cp, bool submit, Admission* admission);
  // A batch's submit tokens, one per workload (Admit takes none for a
  // batch, whose size it does not know yet).
  Status TakeBatchSubmits(const Principal& who, size_t count, Admission* admission);
  // The 429 for `why`: counts it in tidal_http_rejected_total, sets its
  // Retry-After (admission->retry_after_s) and appends the same figure to
  // `message` (which says only why) as "; retry after N s".
  Status Rejected(Rejection why, Admission* admission, std::string_view message);
  // Retry-After and the route's metrics, once the reply is written.
  void Finish(const std::string& route_name, const std::string& method,
              std::chrono::steady_clock::time_point start, const Admission& admission,
              HttpResponse& res);
  // GET of a dashboard file (config_.web_dir) or its how-to-build page.
  void ServeStatic(const std::string& path, HttpResponse& res) const;

  ControlPlane* const leader_;     // on the leader, else nullptr
  FollowerReads* const follower_;  // on a follower, else nullptr
  // The leader's, or the follower's own (they outlive its views).
  Metrics& metrics_;
  OverloadGuard& overload_;
  const Authenticator& auth_;
  const ServerConfig& config_;
  std::unique_ptr<HttpServer> svr_;
  // Asynchronous requests not yet answered (the destructor waits for them).
  std::mutex async_mu_;
  std::condition_variable async_done_;
  int async_in_flight_ = 0;
};

// "host:port" -> parts; the port may be 0.
StatusOr<std::pair<std::string, int>> ParseListen(const std::string& listen);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_HTTP_API_H_
