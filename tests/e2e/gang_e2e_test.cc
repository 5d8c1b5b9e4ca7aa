#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

// Three 4-GPU training nodes; a gang of 2 pods x 4 GPUs.
TEST_F(E2eTest, GangStartsWholeWithTorchrunEnvironmentOrNotAtAll) {
  StartCluster(Nodes({"training", "training", "training"}, 4));
  const uint64_t gang = Submit({{"name", "gang"}, {"kind", "training"}, {"project", "llm"},
                                {"gpus_per_replica", 4}, {"replicas", 2},
                                {"command", {Examples() + "/trainer", "--steps", "40", "--step-ms",
                                             "50", "--checkpoint-every", "10"}}});
  ASSERT_GT(gang, 0u);
  ASSERT_TRUE(WaitFor([&] { return PodsOf(gang).size() == 2; }, 30)) << Pods().dump();
  json pods = PodsOf(gang);
  ASSERT_NE(pods[0]["node"], pods[1]["node"]);  // 4 GPUs each: one per node
  // Every rank sees the torchrun variables for a world of 2, one per node,
  // exactly its 4 GPUs and the same rendezvous.
  std::set<std::string> ranks, masters;
  for (const json& pod : pods) {
    std::map<std::string, std::string> env;
    ASSERT_TRUE(WaitFor([&] {
      env = TrainerStart(pod["pod_dir"]);
      return !env.empty();
    }, 20)) << pod.dump();
    ranks.insert(env["rank"]);
    masters.insert(env["master"]);
    EXPECT_EQ(env["world_size"], "2");
    EXPECT_EQ(env["local_rank"], "0");
    EXPECT_EQ(env["local_world_size"], "1");
    EXPECT_EQ(env["cuda_visible_devices"], "0,1,2,3");
    EXPECT_EQ(env["job"], std::to_string(gang));
  }
  EXPECT_EQ(ranks, std::set<std::string>({"0", "1"}));
  ASSERT_EQ(masters.size(), 1u);
  EXPECT_TRUE(masters.begin()->starts_with("127.0.0.1:"));

  // A second gang of 2 x 4 finds one free node: it must not start half.
  const uint64_t second = Submit({{"name", "second"}, {"kind", "training"}, {"project", "llm"},
                                  {"gpus_per_replica", 4}, {"replicas", 2},
                                  {"command", {Examples() + "/trainer", "--steps", "10",
                                               "--step-ms", "50"}}});
  for (int i = 0; i < 10; ++i) {
    if (State(gang) != "running") break;
    EXPECT_TRUE(PodsOf(second).empty()) << Pods().dump();
    EXPECT_EQ(State(second), "pending");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // When the first finishes, the second starts whole and both succeed.
  EXPECT_TRUE(WaitFor([&] { return State(gang) == "succeeded"; }, 60)) << Workload(gang).dump();
  EXPECT_TRUE(WaitFor([&] { return State(second) == "succeeded"; }, 60)) << Workload(second).dump();
  ExpectReplayMatches();
}

}  // namespace
}  // namespace tidal::e2e
