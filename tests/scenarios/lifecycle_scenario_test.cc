// The lifecycle's world-facing timers through the simulator: an idle debug
// session reclaimed, a lost node's work requeued and a faulty GPU's node
// drained, by the same
// core/state Lifecycle the server runs (the simulator only reports the
// inputs: an agent's last lease, a session going idle, a GPU's fault).
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "sim/simulator.h"

namespace tidal::sim {
namespace {

using nlohmann::json;

// Three 8-GPU training nodes, one queue and project.
SimInput Input() {
  const std::string y =
      "zones: [z]\nracks:\n  - {name: r1, zone: z}\npools:\n  - training\nnodes:\n"
      "  - name: trn-{i}\n    count: 3\n    racks: [r1]\n    pool: training\n    gpus: 8\n"
      "    gpu_model: H100\n    gpu_memory_gib: 80\n    nvlink: all\n"
      "queues:\n  - name: research\n    guaranteed_gpus: 24\n    pools: [training]\n"
      "projects:\n  - {name: research, tenant: t, tier: standard, queue: research}\n";
  SimInput in;
  auto cluster = config::ParseClusterYaml(y);
  EXPECT_TRUE(cluster.ok()) << cluster.status().ToString();
  if (cluster.ok()) in.cluster = *cluster;
  in.policy = config::DefaultPolicy();
  return in;
}

SimWorkload Work(const SimInput& in, const std::string& name, WorkloadKind kind, int gpus,
                      double duration_s) {
  SimWorkload s;
  Workload& w = s.workload;
  w.name = name;
  w.kind = kind;
  const Project* p = in.cluster.FindProject("research");
  EXPECT_NE(p, nullptr);
  if (p != nullptr) {
    w.project = p->id;
    w.tenant = p->tenant;
    w.queue = p->default_queue;
  }
  w.pods = w.min_pods = w.max_pods = 1;
  w.gpus_per_pod = gpus;
  w.expected_duration = SecondsF(duration_s);
  if (kind == WorkloadKind::kDebug) w.debug.max_runtime = hours(8);  // only idleness ends it
  return s;
}

SimInput Mix() {
  SimInput in = Input();
  in.workloads.push_back(Work(in, "trainer", WorkloadKind::kTraining, 8, 7200));
  SimWorkload dbg = Work(in, "notebook", WorkloadKind::kDebug, 1, 0);
  dbg.idle_after_s = 60;  // the user walks away a minute in
  in.workloads.push_back(dbg);
  return in;
}

std::vector<json> Events(const std::string& log) {
  std::vector<json> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

std::vector<json> Simulate(const SimInput& in) {
  SimOptions o;
  o.wall_times = false;
  o.end_s = 3 * 3600;
  std::ostringstream log;
  auto r = RunSimulation(in, o, &log);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return Events(log.str());
}

std::vector<json> Of(const std::vector<json>& events, const std::string& event, const std::string& workload = "") {
  std::vector<json> out;
  for (const json& e : events) {
    if (e["event"] == event && (workload.empty() || e.value("workload", "") == workload)) out.push_back(e);
  }
  return out;
}

TEST(LifecycleScenarioTest, AnIdleDebugSessionIsReclaimedOneIdleLimitAfterItWentIdle) {
  const std::vector<json> events = Simulate(Mix());
  const std::vector<json> placed = Of(events, "place", "notebook");
  ASSERT_EQ(placed.size(), 1u);
  const double start = placed[0]["t"];
  // Idle 60 s after its start; the idle limit (30 min) later the lifecycle
  // gives notice, at the first pass (every <= 10 s) from start + 1860 s.
  const std::vector<json> preempted = Of(events, "preempt", "notebook");
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0]["cause"], "idle");
  const double noticed = preempted[0]["t"];
  EXPECT_GE(noticed, start + 60 + 1800);
  EXPECT_LE(noticed, start + 60 + 1800 + 10);
  // It ends for good at its grace deadline (the policy's default grace),
  // never requeued.
  const std::vector<json> finished = Of(events, "finish", "notebook");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]["completed"], false);
  EXPECT_GT(preempted[0]["exit_at"].get<double>(), noticed);
  EXPECT_NEAR(finished[0]["t"].get<double>(), preempted[0]["exit_at"].get<double>(), 1e-6);
  EXPECT_EQ(Of(events, "place", "notebook").size(), 1u);
  // No agent was lost in this run.
  EXPECT_TRUE(Of(events, "node_lost").empty());
}

TEST(LifecycleScenarioTest, ALostNodesWorkIsRequeuedOneLeaseAfterItsAgentStopped) {
  // Where the trainer runs without a loss (the run is deterministic).
  const std::vector<json> baseline = Simulate(Mix());
  const std::vector<json> first = Of(baseline, "place", "trainer");
  ASSERT_EQ(first.size(), 1u);
  const std::string node = first[0]["placement"][0]["node"];

  SimInput in = Mix();
  in.node_losses.push_back({node, 600});
  const std::vector<json> events = Simulate(in);
  const std::vector<json> lost = Of(events, "node_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["node"], node);
  // Its agent's last lease ran from 600 s for 30 s: lost at the first pass
  // past 630 s (passes every <= 10 s while the debug session runs).
  const double lost_at = lost[0]["t"];
  EXPECT_GT(lost_at, 630);
  EXPECT_LE(lost_at, 640);
  // The trainer left its GPUs then (requeued, not failed) and started again
  // elsewhere; it still completes.
  const std::vector<json> exits = Of(events, "exit", "trainer");
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_DOUBLE_EQ(exits[0]["t"].get<double>(), lost_at);
  const std::vector<json> placed = Of(events, "place", "trainer");
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_GE(placed[1]["t"].get<double>(), lost_at);
  EXPECT_NE(placed[1]["placement"][0]["node"], node);
  const std::vector<json> finished = Of(events, "finish", "trainer");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]["completed"], true);
}

TEST(LifecycleScenarioTest, AGpuFaultDrainsItsNodeAndTheWorkRestartsElsewhere) {
  const std::vector<json> baseline = Simulate(Mix());
  const std::vector<json> first = Of(baseline, "place", "trainer");
  ASSERT_EQ(first.size(), 1u);
  const std::string node = first[0]["placement"][0]["node"];

  // GPU 3 of the trainer's node fails at 600 s.
  SimInput in = Mix();
  in.gpu_faults.push_back({node, 3, 600});
  const std::vector<json> events = Simulate(in);
  ASSERT_EQ(Of(events, "gpu_fault").size(), 1u);
  // The fault kicks a pass (within the pass interval, 10 s): the lifecycle
  // gives the trainer notice, cause drain, with the default grace (60 s);
  // it does not checkpoint, so it exits at the deadline.
  const std::vector<json> noticed = Of(events, "preempt", "trainer");
  ASSERT_EQ(noticed.size(), 1u);
  EXPECT_EQ(noticed[0]["cause"], "drain");
  const double at = noticed[0]["t"];
  EXPECT_GE(at, 600);
  EXPECT_LE(at, 610);
  EXPECT_DOUBLE_EQ(noticed[0]["exit_at"].get<double>(), at + 60);
  // It restarts on another node and completes; nothing is placed on the
  // drained node after the fault.
  const std::vector<json> placed = Of(events, "place", "trainer");
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_NE(placed[1]["placement"][0]["node"], node);
  for (const json& p : Of(events, "place")) {
    if (p["t"].get<double>() < 600) continue;
    for (const json& pod : p["placement"]) EXPECT_NE(pod["node"], node) << p.dump();
  }
  const std::vector<json> finished = Of(events, "finish", "trainer");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]["completed"], true);
}

TEST(LifecycleScenarioTest, AFaultOfAGpuANodeDoesNotHaveIsAnInputError) {
  SimInput in = Mix();
  in.gpu_faults.push_back({"trn-1", 8, 10});
  auto r = RunSimulation(in, SimOptions{}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gpu must be in [0, 8)"), std::string::npos) << r.status().ToString();
}

TEST(LifecycleScenarioTest, ALossOfAnUnknownNodeIsAnInputError) {
  SimInput in = Mix();
  in.node_losses.push_back({"nope", 10});
  SimOptions o;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace tidal::sim
