#include "server/follower_api.h"

#include <httplib.h>

#include <fmt/format.h>

#include "protocol/leader_redirect.h"

namespace tidal::server {

FollowerApi::FollowerApi(std::function<FollowerView()> view)
    : view_(std::move(view)), server_(std::make_unique<httplib::Server>()) {
  // A few threads: every answer is a constant-size reply computed at once.
  server_->new_task_queue = [] { return new httplib::ThreadPool(4); };
  server_->set_read_timeout(5, 0);
  // SO_REUSEADDR, not httplib's default SO_REUSEPORT: the API server that
  // takes the port over when this replica is elected binds with
  // SO_REUSEADDR, which the kernel lets through the TIME_WAIT connections
  // left here only when they were SO_REUSEADDR too.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->set_payload_max_length(1 << 20);
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const FollowerView view = view_();
    const std::string& leader = view.leader_url;
    if (req.path == "/healthz") {
      res.set_content(fmt::format("following {}\n", leader.empty() ? "(no leader yet)" : leader), "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    protocol::NotLeaderReply reply;
    reply.leader_url = leader;
    if (!view.problem.empty()) {
      reply.message = fmt::format(
          "no replica can lead: {}; the API and scheduling resume by themselves when etcd answers", view.problem);
    } else if (leader.empty()) {
      reply.message = "this replica does not lead, and no replica leads yet (an election is on); retry";
    } else {
      reply.message = fmt::format("this replica does not lead; the leader is {}", leader);
    }
    res.status = 503;
    if (!reply.leader_url.empty()) res.set_header(protocol::kLeaderHeader, reply.leader_url);
    res.set_header("Retry-After", "1");
    res.set_content(protocol::NotLeaderReplyToJson(reply).dump(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
}

FollowerApi::~FollowerApi() { Stop(); }

StatusOr<int> FollowerApi::Bind(const std::string& host, int port) {
  if (port == 0) {
    const int bound = server_->bind_to_any_port(host);
    if (bound <= 0) return Unavailable(fmt::format("cannot listen on {}:0", host));
    return bound;
  }
  if (!server_->bind_to_port(host, port)) return Unavailable(fmt::format("cannot listen on {}:{}", host, port));
  return port;
}

void FollowerApi::Serve() { server_->listen_after_bind(); }

void FollowerApi::Stop() { server_->stop(); }

}  // namespace tidal::server
