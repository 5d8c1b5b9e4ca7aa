// An inference replica is one of interchangeable copies: when one exits,
// the others keep running. Agents key pods by (workload, rank, attempt), so
// a replica's rank must not change when another replica leaves: were ranks
// renumbered, every replica after the one that exited would be restarted
// (a cold start each), which the simulator never shows.
#include <signal.h>

#include "agent/pod_process.h"
#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

class ReplicaTest : public E2eTest {
 protected:
  // A service of 3 replicas (at least `min_replicas`) running, one on each
  // of 3 one-GPU nodes; its id, or 0 if they did not all start.
  uint64_t StartThreeReplicas(int min_replicas) {
    StartCluster(Nodes({"inference-reserved", "inference-reserved", "inference-reserved"}, 1));
    const uint64_t svc = Submit({{"name", "echo"}, {"kind", "inference"}, {"project", "chat-serving"},
                                 {"gpus_per_replica", 1}, {"replicas", 3}, {"min_replicas", min_replicas},
                                 {"max_replicas", 3}, {"target_p99_ms", 250}, {"replica_capacity_rps", 5},
                                 {"cold_start_s", 1}, {"command", {"/bin/sleep", "100000"}}});
    const bool running = WaitFor([&] { return PodsOf(svc, "running").size() == 3; }, 30);
    EXPECT_TRUE(running) << Pods().dump();
    return running ? svc : 0;
  }
};

TEST_F(ReplicaTest, AnInferenceReplicaThatExitsLeavesTheOthersRunning) {
  const uint64_t svc = StartThreeReplicas(3);
  ASSERT_NE(svc, 0u);
  std::map<std::string, pid_t> before;  // node -> pid
  std::string first;                    // the node of rank 0
  pid_t crashing = 0;
  for (const json& p : PodsOf(svc, "running")) {
    before[p["node"]] = p["pid"];
    if (p["rank"] == 0) {
      first = p["node"];
      crashing = p["workload_pid"];
    }
  }
  ASSERT_GT(crashing, 0) << Pods().dump();
  // Rank 0's process dies: the rest of the list would shift down.
  ASSERT_EQ(kill(crashing, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] {
    json running = PodsOf(svc, "running");
    if (running.size() != 3) return false;
    for (const json& p : running) {
      if (p["node"] == first && p["pid"] == before[first]) return false;  // not replaced yet
    }
    return true;
  }, 30)) << Pods().dump() << ReadText(work_dir_ / first / "agent.log");
  for (const json& p : PodsOf(svc, "running")) {
    if (p["node"] == first) continue;
    EXPECT_EQ(p["pid"].get<pid_t>(), before[p["node"]]) << "the replica on " << p["node"] << " was restarted: "
                                                         << Pods().dump();
  }
}

// A scale-down removes the last replicas: they keep their ranks, which are
// then past the world size, and their agents must still take the list that
// gives them notice (it was refused whole once, and the leaving replicas ran
// on), while the replica that stays runs on untouched.
TEST_F(ReplicaTest, AScaleDownStopsTheLeavingReplicasAndKeepsTheRest) {
  const uint64_t svc = StartThreeReplicas(1);
  ASSERT_NE(svc, 0u);
  std::map<int, pid_t> group;  // rank -> process group
  for (const json& p : PodsOf(svc, "running")) group[p["rank"]] = p["pid"];
  auto resized = cluster_->Post(fmt::format("/v1/workloads/{}/resize", svc),
                                {{"replicas", 1}, {"min_replicas", 1}, {"max_replicas", 1}});
  ASSERT_TRUE(resized.ok()) << resized.status().message();
  EXPECT_TRUE(WaitFor([&] { return !agent::ProcessGroupAlive(group[1]) && !agent::ProcessGroupAlive(group[2]); },
                      30))
      << Pods().dump() << Workload(svc).dump();
  // They exited on their notice, before the grace deadline: the server saw
  // each exit as a shrink's (not the deadline passing with no word from the
  // agent).
  auto shrink_exits = [&] {
    auto audit = cluster_->Get(fmt::format("/v1/audit?workload={}", svc));
    int n = 0;
    if (!audit.ok()) return n;
    for (const json& row : (*audit)["audit"]) {
      n += row["action"] == "pod_exit" && row["detail"].value("cause", "") == "shrink";
    }
    return n;
  };
  EXPECT_TRUE(WaitFor([&] { return shrink_exits() == 2; }, 30))
      << cluster_->Get(fmt::format("/v1/audit?workload={}", svc)).value().dump();
  EXPECT_TRUE(WaitFor([&] { return Workload(svc)["allocation"]["pods"].size() == 1; }, 30)) << Workload(svc).dump();
  const json left = PodsOf(svc, "running");
  ASSERT_EQ(left.size(), 1u) << Pods().dump();
  EXPECT_EQ(left[0]["rank"], 0);
  EXPECT_EQ(left[0]["pid"].get<pid_t>(), group[0]);
}

}  // namespace
}  // namespace tidal::e2e
