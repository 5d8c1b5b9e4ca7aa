#include "tests/support/stub_replica.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "protocol/leader_redirect.h"

namespace tidal::testing {

StubReplica::StubReplica(Handler handler) {
  auto record = [this, handler](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard lock(mu_);
      requests_.push_back(req.method + " " + req.path);
      authorizations_.push_back(req.get_header_value("Authorization"));
    }
    handler(req, res);
  };
  server_.Get(".*", record);
  server_.Post(".*", record);
  // The socket listens once bound: a client may connect before the accept
  // loop runs, and is served when it does.
  port_ = server_.bind_to_any_port("127.0.0.1");
  EXPECT_GT(port_, 0) << "stub replica: no free port";
  thread_ = std::thread([this] { server_.listen_after_bind(); });
}

StubReplica::~StubReplica() {
  server_.stop();
  thread_.join();
}

StubReplica::Handler StubReplica::NotLeader(const std::string& leader_url) {
  return [leader_url](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    if (!leader_url.empty()) res.set_header(protocol::kLeaderHeader, leader_url);
    const protocol::NotLeaderReply reply{"this replica does not lead", leader_url};
    res.set_content(protocol::NotLeaderReplyToJson(reply).dump(), "application/json");
  };
}

std::vector<std::string> StubReplica::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::vector<std::string> StubReplica::authorizations() const {
  std::lock_guard lock(mu_);
  return authorizations_;
}

RefusingPort::RefusingPort() {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool bound = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  EXPECT_TRUE(bound) << "refusing port: cannot bind";
  port_ = ntohs(addr.sin_port);
}

RefusingPort::~RefusingPort() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace tidal::testing
