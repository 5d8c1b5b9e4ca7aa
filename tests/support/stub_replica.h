// In-process stand-ins for the replicas of a replicated control plane
// (issue #13), for the tests of the clients that follow its leader (the
// agent, the CLI): an httplib::Server on a free loopback port that answers
// every request with a handler of the test's, and a port that refuses
// connections, as a killed leader's does.
#ifndef TIDAL_TESTS_SUPPORT_STUB_REPLICA_H_
#define TIDAL_TESTS_SUPPORT_STUB_REPLICA_H_

#include <httplib.h>

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidal::testing {

class StubReplica {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // Answers every GET and POST with `handler`.
  explicit StubReplica(Handler handler);
  ~StubReplica();
  StubReplica(const StubReplica&) = delete;
  StubReplica& operator=(const StubReplica&) = delete;

  // A replica that does not lead: 503 with protocol::NotLeaderReplyToJson,
  // naming `leader_url` ("" during an election) in the body and in the
  // Tidal-Leader header.
  static Handler NotLeader(const std::string& leader_url);

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // "METHOD PATH" of each request it got, in order.
  std::vector<std::string> requests() const;
  // The Authorization header of each request it got, in order.
  std::vector<std::string> authorizations() const;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::vector<std::string> authorizations_;
};

// A loopback port bound but not listening: connecting to it is refused.
// Held until destroyed, so no other test takes the port meanwhile.
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_STUB_REPLICA_H_
