// Test fixture: a real etcd cluster (Debian's etcd-server) of N members on
// free loopback ports, with data in a temp dir, stopped by PID when the
// fixture goes. Members can be killed and started again, to test what a
// member's loss or quorum's loss does.
//
// Where etcd is not installed, available() is false and the tests skip
// with the reason; TIDAL_REQUIRE_ETCD=1 (scripts/test.sh sets it, and
// installs etcd) turns that into a failure, so CI cannot skip them.
#ifndef TIDAL_TESTS_SUPPORT_ETCD_CLUSTER_H_
#define TIDAL_TESTS_SUPPORT_ETCD_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tidal::testing {

class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 3);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // The cluster is up (every member healthy). False with why_not() set
  // when etcd is not installed or did not start.
  bool available() const { return available_; }
  const std::string& why_not() const { return why_not_; }

  // "etcd://127.0.0.1:P1,127.0.0.1:P2,...?prefix=PREFIX".
  std::string StoreUrl(const std::string& prefix = "/tidal") const;
  std::vector<std::string> endpoints() const;  // http://127.0.0.1:P

  void Kill(int member);   // SIGKILL, and wait for it
  bool Start(int member);  // again, on its data dir; true once healthy
  // The cluster answers a linearizable request through any live member.
  bool WaitForQuorum(std::chrono::milliseconds timeout) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  bool Spawn(Member& m, bool fresh);
  bool WaitHealthy(const Member& m, std::chrono::milliseconds timeout) const;

  std::string binary_;
  std::string dir_;
  std::string initial_cluster_;
  std::vector<Member> members_;
  bool available_ = false;
  std::string why_not_;
};

// GTEST_SKIP()s, or fails under TIDAL_REQUIRE_ETCD=1, when `cluster` is
// not available.
#define TIDAL_REQUIRE_ETCD_CLUSTER(cluster)                                           \
  do {                                                                               \
    if (!(cluster).available()) {                                                     \
      if (::tidal::testing::EtcdRequired()) FAIL() << (cluster).why_not();           \
      GTEST_SKIP() << (cluster).why_not();                                           \
    }                                                                                \
  } while (0)

bool EtcdRequired();

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_ETCD_CLUSTER_H_
