#include <signal.h>

#include <regex>

#include "agent/pod_process.h"
#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

// node-1 inference-reserved (2 GPUs), node-2 shared (4), node-3 training (4).
// A blocker holds node-3, so a checkpointing training job borrows the shared
// node. A load surge scales the service past node-1: the shared node goes
// back to inference, the borrowed job gets notice, checkpoints, is requeued,
// and once node-3 frees up it resumes from the step it checkpointed.
TEST_F(E2eTest, InferenceSurgeTakesBackTheSharedNodeAndTheJobResumesFromItsCheckpoint) {
  std::vector<agent::LocalNodeOptions> nodes =
      Nodes({"inference-reserved", "shared", "training"}, 4);
  nodes[0].gpus = 2;
  nodes[0].nvlink = "none";
  StartCluster(nodes);
  const uint64_t blocker = Submit({{"name", "blocker"}, {"kind", "training"}, {"project", "llm"},
                                   {"gpus_per_replica", 4}, {"replicas", 1},
                                   {"command", {Examples() + "/trainer", "--idle", "--steps",
                                                "1000000"}}});
  ASSERT_TRUE(WaitFor([&] { return PodsOf(blocker, "running").size() == 1; }, 30));
  ASSERT_EQ(PodsOf(blocker)[0]["node"], "node-3");
  const uint64_t chat = Submit(
      {{"name", "chat"}, {"kind", "inference"}, {"project", "chat-serving"},
       {"gpus_per_replica", 1}, {"replicas", 1}, {"min_replicas", 1}, {"max_replicas", 6},
       {"target_p99_ms", 250}, {"replica_capacity_rps", 5}, {"cold_start_s", 1},
       {"command", {Examples() + "/server", "--load-ms", "500", "--capacity-rps", "5"}},
       {"readiness", {{"port", 18080}, {"path", "/ready"}}},
       {"load_endpoint", {{"port", 18080}, {"path", "/load"}}}});
  ASSERT_TRUE(WaitFor([&] { return PodsOf(chat, "ready").size() >= 1; }, 30)) << Pods().dump();
  const uint64_t train = Submit({{"name", "borrower"}, {"kind", "training"}, {"project", "llm"},
                                 {"gpus_per_replica", 4}, {"replicas", 1},
                                 {"checkpoint_interval_s", 2},
                                 {"command", {Examples() + "/trainer", "--steps", "1000000",
                                              "--step-ms", "50", "--checkpoint-every", "5"}}});
  ASSERT_TRUE(WaitFor([&] { return PodsOf(train, "running").size() == 1; }, 30))
      << Workload(train).dump();
  const json borrowed = PodsOf(train)[0];
  EXPECT_EQ(borrowed["node"], "node-2");
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // a few checkpoints

  // The surge: 30 req/s against replicas of 5 req/s.
  agent::ProcessSpec spec;
  spec.argv = {Examples() + "/loadgen", "--service", "chat", "--discover",
               cluster_->node_dir(0) + "," + cluster_->node_dir(1), "--rps", "30"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.stdout_path = spec.stderr_path = (work_dir_ / "loadgen.log").string();
  auto loadgen = agent::PodProcess::Start(spec);
  ASSERT_TRUE(loadgen.ok()) << loadgen.status().message();
  started_pids_.insert((*loadgen)->pid());

  // The borrowed job gets notice, checkpoints and exits...
  std::string notice_line;
  ASSERT_TRUE(WaitFor([&] {
    std::smatch m;
    const std::string out = ReadText(fs::path(borrowed["pod_dir"].get<std::string>()) / "stdout.log");
    static const std::regex re("trainer: notice at step ([0-9]+): checkpointed");
    if (!std::regex_search(out, m, re)) return false;
    notice_line = m[1];
    return true;
  }, 60)) << Workload(train).dump() << Workload(chat).dump();
  EXPECT_TRUE(fs::exists(fs::path(borrowed["pod_dir"].get<std::string>()) / "preempt-notice.json"));
  // ...and the service scales up onto the returned node.
  EXPECT_TRUE(WaitFor([&] {
    json w = Workload(chat);
    return w.contains("allocation") && w["allocation"].is_object() &&
           w["allocation"]["pods"].size() > 2;
  }, 30)) << Workload(chat).dump();
  EXPECT_TRUE(WaitFor([&] { return State(train) == "pending"; }, 20)) << Workload(train).dump();
  // The audit names the cause (a loan return: action preempt or reclaim).
  auto audit = cluster_->Get(fmt::format("/v1/audit?workload={}", train));
  ASSERT_TRUE(audit.ok());
  EXPECT_NE((*audit)["audit"].dump().find("inference_return"), std::string::npos)
      << (*audit)["audit"].dump();

  // The surge ends and the blocker goes: the job resumes at its checkpoint.
  (*loadgen)->SignalGroup(SIGTERM);
  (*loadgen)->Wait();
  ASSERT_TRUE(cluster_->Post(fmt::format("/v1/workloads/{}/cancel", blocker), json::object()).ok());
  ASSERT_TRUE(WaitFor([&] {
    json pods = PodsOf(train, "running");
    return pods.size() == 1 && pods[0]["pod_dir"] != borrowed["pod_dir"];
  }, 60)) << Workload(train).dump();
  const json resumed = PodsOf(train, "running")[0];
  std::map<std::string, std::string> env;
  ASSERT_TRUE(WaitFor([&] {
    env = TrainerStart(resumed["pod_dir"]);
    return !env.empty();
  }, 20));
  EXPECT_EQ(env["resume_step"], notice_line);
  ExpectReplayMatches();
}

}  // namespace
}  // namespace tidal::e2e
