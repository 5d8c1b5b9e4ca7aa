// HA failover (issue #13): three etcd members, three `tidal server` replicas
// and real agents running real pods. The leader is SIGKILLed during a submit
// burst, several times (each killed replica comes back as a follower):
// - another replica leads and decides within seconds (the figure printed
//   is what docs/PERFORMANCE.md records);
// - every acknowledged submit is there;
// - no GPU is bound twice, and no pod is started twice for one attempt;
// - agents follow the new leader by themselves, and a pod that was running
//   keeps running, with the same pid, through every failover.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include <httplib.h>

#include "protocol/leader_redirect.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/etcd_cluster.h"

namespace tidal::e2e {
namespace {

class HaE2eTest : public E2eTest {
 protected:
  // Three etcd members, three replicas, two agents with 4 GPUs each.
  void StartHaCluster() {
    if (access("/usr/bin/etcd", X_OK) != 0) {
      if (testing::EtcdRequired()) FAIL() << "etcd is not installed (TIDAL_REQUIRE_ETCD=1)";
      GTEST_SKIP() << "etcd is not installed (scripts/install-deps.sh --test installs Debian's etcd-server)";
    }
    StartCluster(Nodes({"training", "training"}, 4), [](agent::LocalClusterOptions& o) {
      o.ha_replicas = 3;
      // Failover must not cost the nodes their lease.
      o.node_lease_s = 10;
      // The measured run (docs/PERFORMANCE.md) is at the server's and the
      // agents' defaults: a 30 s node lease, 5 s heartbeats, the agents
      // syncing at the heartbeat and sampling every 5 s.
      if (std::getenv("TIDAL_HA_FAILOVER_ROUNDS") != nullptr) {
        o.node_lease_s = 30;
        o.heartbeat_interval_s = 5;
        o.agent_sync_ms = 0;
        o.agent_sample_ms = 5000;
      }
    });
  }
};

TEST_F(HaE2eTest, FailoverLosesNothingAndKeepsPodsRunning) {
  StartHaCluster();
  if (!cluster_) return;
  const std::string trainer = Examples() + "/trainer";
  // A job that runs through every failover.
  const uint64_t steady = Submit({{"name", "steady"}, {"kind", "training"}, {"project", "llm"},
                                  {"gpus_per_replica", 2}, {"replicas", 1},
                                  {"command", {trainer, "--steps", "100000", "--step-ms", "50"}}});
  ASSERT_TRUE(WaitFor([&] { return PodsOf(steady, "running").size() == 1; }, 30)) << Pods().dump();
  const int steady_pid = PodsOf(steady, "running")[0]["pid"].get<int>();

  // Short jobs submitted throughout; a submit that got no answer is not
  // counted (it may or may not exist), one that did must exist.
  std::mutex mu;
  std::vector<std::pair<std::string, uint64_t>> acked;
  std::atomic<bool> stop{false};
  std::thread submitter([&] {
    for (int i = 0; !stop; ++i) {
      const std::string name = fmt::format("burst-{}", i);
      auto reply = cluster_->Post("/v1/workloads", {{"name", name}, {"kind", "training"}, {"project", "llm"},
                                                    {"gpus_per_replica", 1}, {"replicas", 1},
                                                    {"command", {trainer, "--steps", "2", "--step-ms", "10"}}});
      if (reply.ok()) {
        std::lock_guard lock(mu);
        acked.emplace_back(name, (*reply)["id"].get<uint64_t>());
      }
      // Pacing, not synchronization: ~20 submits/s.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop, submitter};

  std::vector<std::string> twice;
  // Every pid each (workload, rank, attempt) ever ran as.
  std::map<std::string, std::set<int>> pids;
  auto observe = [&] {
    const json pods = Pods();
    for (auto& s : DoublyBound(pods)) twice.push_back(s);
    for (const json& p : pods) {
      if (p.value("pid", -1) <= 0) continue;
      pids[fmt::format("{}/{}/{}", p["workload"].dump(), p["rank"].dump(), p["attempt"].dump())].insert(
          p["pid"].get<int>());
    }
  };
  std::vector<double> failover_s;
  // Three in the suite; docs/PERFORMANCE.md's p99 is over ten
  // (TIDAL_HA_FAILOVER_ROUNDS=10).
  const char* rounds_env = std::getenv("TIDAL_HA_FAILOVER_ROUNDS");
  const int rounds = std::clamp(rounds_env ? std::atoi(rounds_env) : 3, 1, 100);
  for (int round = 0; round < rounds; ++round) {
    // Let the burst run under the current leader (the moment is the test).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
    while (std::chrono::steady_clock::now() < until) {
      observe();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int old_leader = cluster_->leader();
    ASSERT_GE(old_leader, 0);
    const auto killed = std::chrono::steady_clock::now();
    const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count();
    cluster_->KillReplica(old_leader, SIGKILL);
    // The new leader takes submits and places them: a job submitted to it
    // runs (behind the burst's backlog, so this is not the failover time).
    uint64_t probe = 0;
    double acked_s = 0;
    ASSERT_TRUE(WaitFor([&] {
      observe();
      if (probe == 0) {
        auto reply = cluster_->Post("/v1/workloads", {{"name", fmt::format("probe-{}", round)}, {"kind", "training"},
                                                      {"project", "llm"}, {"gpus_per_replica", 1}, {"replicas", 1},
                                                      {"command", {trainer, "--steps", "2", "--step-ms", "10"}}});
        if (reply.ok()) {
          probe = (*reply)["id"].get<uint64_t>();
          acked_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
        }
        return false;
      }
      const std::string state = State(probe);
      return state == "running" || state == "succeeded";
    }, 60)) << "round " << round << ": no decision after the leader was killed";
    // Failover ends with the new leader's first decision: its first
    // placement, as the audit dates it (the old leader wrote none after the
    // kill; every replica runs on this host's clock).
    auto first = cluster_->Get(fmt::format("/v1/audit?action=place&from_ms={}&limit=1", killed_ms));
    ASSERT_TRUE(first.ok()) << first.status().message();
    ASSERT_EQ((*first)["audit"].size(), 1u) << first->dump();
    failover_s.push_back(((*first)["audit"][0]["time_ms"].get<int64_t>() - killed_ms) / 1000.0);
    std::printf("round %d: the new leader took a submit %.2f s after the kill, and placed its first job after %.2f s\n",
                round, acked_s, failover_s.back());
    EXPECT_NE(cluster_->leader(), old_leader);
    // The killed replica comes back, as a follower.
    ASSERT_TRUE(cluster_->StartReplica(old_leader).ok());
  }
  stop = true;
  submitter.join();

  std::vector<std::pair<std::string, uint64_t>> done;
  {
    std::lock_guard lock(mu);
    done = acked;
  }
  ASSERT_GT(done.size(), 10u) << "too little load to mean anything";
  for (const auto& [name, id] : done) EXPECT_EQ(Workload(id).value("name", ""), name) << "acknowledged " << id;
  EXPECT_TRUE(twice.empty()) << twice.size() << " double bindings, first: " << twice.front();
  for (const auto& [attempt, seen] : pids) EXPECT_EQ(seen.size(), 1u) << attempt << " started " << seen.size() << " times";
  // The steady job never stopped: same pod, same pid, still running.
  const json running = PodsOf(steady, "running");
  ASSERT_EQ(running.size(), 1u) << Pods().dump();
  EXPECT_EQ(running[0]["pid"].get<int>(), steady_pid);
  std::sort(failover_s.begin(), failover_s.end());
  // Nearest rank: with ten rounds or fewer, the p99 is the slowest.
  const double p99 = failover_s[static_cast<size_t>(std::ceil(0.99 * failover_s.size())) - 1];
  std::printf("ha failover: %d kills of the leader, %zu acknowledged submits, all present; kill to first "
              "decision: min %.2f s, median %.2f s, p99 %.2f s\n",
              rounds, done.size(), failover_s.front(), failover_s[failover_s.size() / 2], p99);
  // The measured run holds issue #13's bound; the suite, on a loaded CI
  // machine under sanitizers, a looser one that still catches a failover
  // that waits for anything longer than the 2 s election lease.
  EXPECT_LE(p99, rounds_env ? 5.0 : 15.0) << "kill to first decision";
}

// etcd faults (issue #13): losing 1 of 3 members (the Raft leader, the
// worst one: etcd elects another meanwhile) changes nothing visible: the
// same replica leads, submits are acknowledged and placed. Losing quorum
// makes the API answer 503 saying etcd does not answer, and scheduling
// pauses (the leader steps down: without etcd it can neither write nor
// know it still leads), while the followers still answer stale reads from
// their copies; once quorum returns, a replica leads again by
// itself, submits land and are placed, and the pod that ran throughout
// still runs. Members are paused with SIGSTOP, as a partition would cut
// them off, and resumed with SIGCONT.
TEST_F(HaE2eTest, LosingAnEtcdMemberChangesNothingAndLosingQuorumPausesUntilItReturns) {
  StartHaCluster();
  if (!cluster_) return;
  const std::string trainer = Examples() + "/trainer";
  auto job = [&](const std::string& name, int steps) {
    return json{{"name", name}, {"kind", "training"}, {"project", "llm"}, {"gpus_per_replica", 1}, {"replicas", 1},
                {"command", {trainer, "--steps", std::to_string(steps), "--step-ms", "50"}}};
  };
  const uint64_t steady = Submit(job("steady", 100000));
  ASSERT_TRUE(WaitFor([&] { return PodsOf(steady, "running").size() == 1; }, 30)) << Pods().dump();
  const int steady_pid = PodsOf(steady, "running")[0]["pid"].get<int>();
  auto placed = [&](uint64_t id) {
    const std::string state = State(id);
    return state == "running" || state == "succeeded";
  };

  // One member lost: the Raft leader.
  const int leader = cluster_->leader();
  int lost = -1;
  ASSERT_TRUE(WaitFor([&] { return (lost = cluster_->etcd_leader()) >= 0; }, 10));
  cluster_->SignalEtcdMember(lost, SIGSTOP);
  // Until the two members left elect a new Raft leader (an election timeout,
  // seconds on a loaded machine), etcd answers nothing and the API says so
  // (503, "resume by themselves"): a client retries, and the submit lands.
  uint64_t during = 0;
  ASSERT_TRUE(WaitFor([&] {
    auto reply = cluster_->Post("/v1/workloads", job("one-member-lost", 2));
    if (reply.ok()) during = (*reply)["id"].get<uint64_t>();
    return reply.ok();
  }, 30));
  ASSERT_GT(during, 0u);
  EXPECT_TRUE(WaitFor([&] { return placed(during); }, 30)) << State(during);
  EXPECT_EQ(cluster_->leader(), leader) << "losing one etcd member moved the leadership";

  // Quorum lost: a second member, not the one paused.
  const int second = (lost + 1) % 3;
  cluster_->SignalEtcdMember(second, SIGSTOP);
  std::string refused;
  ASSERT_TRUE(WaitFor([&] {
    auto reply = cluster_->Post("/v1/workloads", job("no-quorum", 2));
    if (!reply.ok()) refused = reply.status().message();
    return !reply.ok() && refused.find("etcd") != std::string::npos;
  }, 30)) << "last refusal: " << refused;
  // Scheduling pauses: no replica leads.
  EXPECT_TRUE(WaitFor([&] { return cluster_->leader() < 0; }, 30));
  // Reads go on: each follower answers a stale read from its copy, which
  // still holds the steady job (server/follower_reads.h). The replica that
  // led dropped its copy with its term; it opens a new one when etcd answers.
  for (size_t i = 0; i < cluster_->replica_urls().size(); ++i) {
    if (static_cast<int>(i) == leader) continue;
    const std::string& url = cluster_->replica_urls()[i];
    httplib::Client client(url);
    client.set_read_timeout(10, 0);
    auto read = client.Get(fmt::format("/v1/workloads/{}", steady),
                           {{"Authorization", "Bearer " + cluster_->admin_token()},
                            {protocol::kConsistencyHeader, protocol::kConsistencyStale}});
    ASSERT_TRUE(read) << url;
    EXPECT_EQ(read->status, 200) << url << ": " << read->body;
    EXPECT_EQ(json::parse(read->body, nullptr, false).value("name", ""), "steady") << url;
    EXPECT_EQ(read->get_header_value(protocol::kReplicaHeader), "follower") << url;
  }

  // Quorum back: a replica leads again, submits land and are placed.
  cluster_->SignalEtcdMember(second, SIGCONT);
  cluster_->SignalEtcdMember(lost, SIGCONT);
  uint64_t after = 0;
  ASSERT_TRUE(WaitFor([&] {
    auto reply = cluster_->Post("/v1/workloads", job("quorum-back", 2));
    if (reply.ok()) after = (*reply)["id"].get<uint64_t>();
    return reply.ok();
  }, 60)) << "the API did not resume";
  EXPECT_TRUE(WaitFor([&] { return placed(after); }, 30)) << State(after);
  // Its exit, refused during the outage, is delivered once a leader answers.
  EXPECT_TRUE(WaitFor([&] { return State(during) == "succeeded"; }, 30)) << State(during);
  const json running = PodsOf(steady, "running");
  ASSERT_EQ(running.size(), 1u) << Pods().dump();
  EXPECT_EQ(running[0]["pid"].get<int>(), steady_pid) << "the steady job was restarted";
  EXPECT_TRUE(DoublyBound(Pods()).empty());
}

}  // namespace
}  // namespace tidal::e2e
