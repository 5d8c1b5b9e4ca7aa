// HTTP/JSON front of the control plane (cpp-httplib): authentication, role
// checks, body limits, JSON parsing and Status -> HTTP status mapping. Every
// route is timed into tidal_api_request_seconds.
#ifndef TIDAL_SERVER_HTTP_API_H_
#define TIDAL_SERVER_HTTP_API_H_

#include <memory>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "server/control_plane.h"

namespace httplib {
class Server;
struct Response;
}

namespace tidal::server {

// One API route: the method, its name as docs/api.md writes it ("{id}",
// "{node}" for path parameters; also the metrics label) and the httplib
// pattern. The handlers are registered from this table, and the auth matrix
// test (tests/server/server_auth_test.cc) checks every row, so a route
// cannot be added without its authorization being tested.
struct ApiRoute {
  const char* method;  // "GET" or "POST"
  const char* name;
  const char* pattern;
};
const std::vector<ApiRoute>& ApiRoutes();

// HTTP status for a Status code.
int HttpStatusFor(StatusCode code);
// {"error": {"code", "message", "field"}}; field = the message's leading path.
std::string ErrorBody(const Status& status);

class HttpApi {
 public:
  HttpApi(ControlPlane& control_plane, const Authenticator& auth, const ServerConfig& config);
  ~HttpApi();

  // Binds to host:port (port 0 = any free port) and returns the port.
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop().
  void Serve();
  void Stop();

 private:
  void Routes();
  // A configured token, else a node credential; 401 when neither.
  StatusOr<Principal> Authenticate(const std::string& authorization_header) const;
  // GET of a dashboard file (config_.web_dir) or its how-to-build page.
  void ServeStatic(const std::string& path, httplib::Response& res) const;

  ControlPlane& cp_;
  const Authenticator& auth_;
  const ServerConfig& config_;
  std::unique_ptr<httplib::Server> svr_;
};

// "host:port" -> parts; the port may be 0.
StatusOr<std::pair<std::string, int>> ParseListen(const std::string& listen);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_HTTP_API_H_
