// An inference replica is one of interchangeable copies: when one exits,
// the others keep running. Agents key pods by (workload, rank, attempt), so
// a replica's rank must not change when another replica leaves: were ranks
// renumbered, every replica after the one that exited would be restarted
// (a cold start each), which the simulator, where they run on, never shows.
#include <signal.h>

#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

TEST_F(E2eTest, AnInferenceReplicaThatExitsLeavesTheOthersRunning) {
  StartCluster(Nodes({"inference-reserved", "inference-reserved", "inference-reserved"}, 1));
  const uint64_t svc = Submit({{"name", "echo"}, {"kind", "inference"}, {"project", "chat-serving"},
                               {"gpus_per_replica", 1}, {"replicas", 3}, {"min_replicas", 3},
                               {"max_replicas", 3}, {"target_p99_ms", 250}, {"replica_capacity_rps", 5},
                               {"cold_start_s", 1}, {"command", {"/bin/sleep", "100000"}}});
  ASSERT_TRUE(WaitFor([&] { return PodsOf(svc, "running").size() == 3; }, 30)) << Pods().dump();
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

}  // namespace
}  // namespace tidal::e2e
