#include <signal.h>

#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

json LongGang(const std::string& examples) {
  return {{"name", "resilient"}, {"kind", "training"}, {"project", "llm"},
          {"gpus_per_replica", 4}, {"replicas", 2}, {"checkpoint_interval_s", 5},
          {"command", {examples + "/trainer", "--steps", "100000", "--step-ms", "50",
                       "--checkpoint-every", "10"}}};
}

size_t NodeIndex(const std::string& name) { return std::stoul(name.substr(5)) - 1; }

TEST_F(E2eTest, KilledAgentLosesItsNodeAndTheGangRestartsWholeElsewhere) {
  StartCluster(Nodes({"training", "training", "training"}, 4));
  const uint64_t gang = Submit(LongGang(Examples()));
  ASSERT_TRUE(WaitFor([&] { return PodsOf(gang, "running").size() == 2; }, 30)) << Pods().dump();
  json before = PodsOf(gang);
  // The server may re-place a rank on the node it ran on before the agent
  // saw it unlisted; the attempt number in the pod list tells the agent that
  // the listing is a new run.
  auto listed = cluster_->Get(fmt::format("/v1/agent/nodes/{}/pods", before[0]["node"].get<std::string>()));
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_FALSE((*listed)["pods"].empty());
  ASSERT_TRUE((*listed)["pods"][0].contains("attempt")) << listed->dump();
  const int64_t first_attempt = (*listed)["pods"][0]["attempt"];
  const std::string victim_node = before[0]["node"];
  const pid_t victim_pod = before[0]["pid"];
  std::set<std::string> old_dirs = {before[0]["pod_dir"], before[1]["pod_dir"]};
  cluster_->KillAgent(NodeIndex(victim_node), SIGKILL);
  // Its pod outlives it only for the orphan timeout (half the 3 s lease), in
  // case the agent is restarted, and is gone before the node is declared
  // lost (no duplicate rank runs on)...
  EXPECT_TRUE(WaitFor([&] { return !agent::ProcessGroupAlive(victim_pod); }, 5));
  // ...the server marks the node lost after its lease...
  EXPECT_TRUE(WaitFor([&] {
    auto nodes = cluster_->Get("/v1/nodes");
    if (!nodes.ok()) return false;
    for (const json& n : (*nodes)["nodes"]) {
      if (n["name"] == victim_node) return n.value("lost", false) || n["health"] == "failed";
    }
    return false;
  }, 20));
  // ...and the whole gang runs again on the two other nodes, both ranks new
  // (a new attempt, new processes), none left on the lost node.
  ASSERT_TRUE(WaitFor([&] {
    json now = PodsOf(gang, "running");
    if (now.size() != 2) return false;
    for (const json& p : now) {
      if (p["node"] == victim_node || old_dirs.count(p["pod_dir"])) return false;
      if (p["attempt"].get<int64_t>() <= first_attempt) return false;
    }
    return true;
  }, 40)) << Pods().dump() << Workload(gang).dump();
  EXPECT_FALSE(agent::ProcessGroupAlive(before[1]["pid"].get<pid_t>()))
      << "the surviving rank's old run must have stopped";
  // Each rank has a fresh torchrun environment (one rank per node, the
  // same world) and resumed from the checkpoint rather than from step 0.
  std::set<std::string> ranks;
  for (const json& p : PodsOf(gang, "running")) {
    std::map<std::string, std::string> env;
    ASSERT_TRUE(WaitFor([&] {
      env = TrainerStart(p["pod_dir"]);
      return !env.empty();
    }, 20));
    EXPECT_EQ(env["rank"], std::to_string(p["rank"].get<int>())) << p.dump();
    EXPECT_EQ(env["world_size"], "2") << p.dump();
    EXPECT_EQ(env["local_rank"], "0") << p.dump();
    ranks.insert(env["rank"]);
    EXPECT_GT(std::stol(env["resume_step"]), 0) << p.dump();
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
  auto audit = cluster_->Get("/v1/audit?action=node_lost");
  ASSERT_TRUE(audit.ok());
  EXPECT_FALSE((*audit)["audit"].empty());
  ExpectReplayMatches();
}

TEST_F(E2eTest, XidOnAFakeGpuDrainsTheNode) {
  StartCluster(Nodes({"training", "training", "training"}, 4));
  const uint64_t job = Submit({{"name", "single"}, {"kind", "training"}, {"project", "llm"},
                               {"gpus_per_replica", 4}, {"replicas", 1},
                               {"checkpoint_interval_s", 5},
                               {"command", {Examples() + "/trainer", "--steps", "100000",
                                            "--step-ms", "50", "--checkpoint-every", "10"}}});
  ASSERT_TRUE(WaitFor([&] { return PodsOf(job, "running").size() == 1; }, 30));
  const std::string node = PodsOf(job)[0]["node"];
  ASSERT_TRUE(cluster_->InjectXid(NodeIndex(node), 3, 79).ok());
  // The node is cordoned with GPU 3 failed...
  EXPECT_TRUE(WaitFor([&] {
    auto nodes = cluster_->Get("/v1/nodes");
    if (!nodes.ok()) return false;
    for (const json& n : (*nodes)["nodes"]) {
      if (n["name"] == node) {
        return n.value("cordoned", false) && n["failed_gpus"] == json::array({3});
      }
    }
    return false;
  }, 10));
  // ...and its work gets notice and moves to another node.
  EXPECT_TRUE(WaitFor([&] {
    json pods = PodsOf(job, "running");
    return pods.size() == 1 && pods[0]["node"] != node;
  }, 40)) << Pods().dump() << Workload(job).dump();
  // One live pod: the drained node's may still show as exited in its
  // agent's pods.json for a tick after its exit was delivered.
  int live = 0;
  for (const json& p : PodsOf(job)) live += p["phase"] != "exited" ? 1 : 0;
  EXPECT_EQ(live, 1) << Pods().dump();
  ExpectReplayMatches();
}

}  // namespace
}  // namespace tidal::e2e
