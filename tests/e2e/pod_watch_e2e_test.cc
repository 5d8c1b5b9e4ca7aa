// Pod assignments reach agents through their pod watch (a long-poll on
// GET /v1/agent/nodes/{node}/pods), not at their next heartbeat: with
// heartbeats a minute apart, a job's pods start, and stop on a cancel,
// within seconds.
#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

TEST_F(E2eTest, PlacementsAndStopsReachTheAgentBetweenHeartbeats) {
  StartCluster(Nodes({"training"}, 4), [](agent::LocalClusterOptions& o) {
    o.heartbeat_interval_s = 60;
    o.agent_sync_ms = 60'000;
    o.node_lease_s = 180;
  });
  const uint64_t job = Submit({{"name", "prompt"}, {"kind", "training"}, {"project", "llm"},
                               {"gpus_per_replica", 2}, {"replicas", 1},
                               {"command", {Examples() + "/trainer", "--steps", "100000", "--step-ms", "50"}}});
  // Without the watch the pod would start at the next heartbeat, 60 s on.
  ASSERT_TRUE(WaitFor([&] { return PodsOf(job, "running").size() == 1; }, 20)) << Pods().dump();
  const pid_t pid = PodsOf(job)[0]["pid"];
  auto cancelled = cluster_->Post(fmt::format("/v1/workloads/{}/cancel", job), json::object());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  // The stop notice, too, comes through the watch; the exit event goes at
  // once (not with a heartbeat), so the server sees the workload end.
  EXPECT_TRUE(WaitFor([&] { return !agent::ProcessGroupAlive(pid); }, 20));
  EXPECT_TRUE(WaitFor([&] { return State(job) == "cancelled"; }, 20)) << Workload(job).dump();
}

// A pod its agent cannot start (here: nothing to run) fails on its own; the
// list that names it still reaches the agent, so the node's other pods are
// not held back by a tenant's bad workload.
TEST_F(E2eTest, APodThatCannotStartHoldsBackNoOtherPodOfItsNode) {
  StartCluster(Nodes({"training"}, 2));
  const uint64_t empty = Submit({{"name", "nothing"}, {"kind", "training"}, {"project", "llm"},
                                 {"gpus_per_replica", 1}, {"replicas", 1}});
  const uint64_t job = Submit({{"name", "real"}, {"kind", "training"}, {"project", "llm"},
                               {"gpus_per_replica", 1}, {"replicas", 1},
                               {"command", {Examples() + "/trainer", "--steps", "100000", "--step-ms", "50"}}});
  EXPECT_TRUE(WaitFor([&] { return State(empty) == "failed"; }, 20)) << Workload(empty).dump();
  EXPECT_TRUE(WaitFor([&] { return PodsOf(job, "running").size() == 1; }, 20)) << Pods().dump();
  EXPECT_NE(Workload(empty).dump().find("command"), std::string::npos) << Workload(empty).dump();
}

}  // namespace
}  // namespace tidal::e2e
