// What a `tidal server` replica that does not lead serves on its address
// (issue #13): GET /healthz answers 200 "following <leader>", and every other
// request 503 with protocol::NotLeaderReply naming the leader, so agents and
// the CLI go there (protocol/leader_redirect.h), or, while the replica cannot
// tell (etcd does not answer), saying why. It holds no state, so it never
// answers with stale data. When the replica wins an election it stops this
// server and serves the real API on the same port.
#ifndef TIDAL_SERVER_FOLLOWER_API_H_
#define TIDAL_SERVER_FOLLOWER_API_H_

#include <functional>
#include <memory>
#include <string>

#include "core/common/status.h"

namespace httplib {
class Server;
}

namespace tidal::server {

struct FollowerView {
  std::string leader_url;  // "" while no replica leads
  std::string problem;     // why the replica cannot follow ("" = it can)
};

class FollowerApi {
 public:
  // `view` is asked per request.
  explicit FollowerApi(std::function<FollowerView()> view);
  ~FollowerApi();
  // The port bound (`port` 0 = any free one).
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(); call on a thread of its own.
  void Serve();
  void Stop();

 private:
  const std::function<FollowerView()> view_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_FOLLOWER_API_H_
