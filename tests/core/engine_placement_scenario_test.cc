// Issue #2 point 3: topology, constraints, health and pools through a pass.
#include <set>

#include <gtest/gtest.h>

#include "core/engine/scheduler.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/engine_driver.h"

namespace tidal {
namespace {

using testing::ClusterBuilder;
using testing::GpuRange;
using testing::Job;
using testing::NodeSpec;

const WaitDecision* FindWait(const Decisions& d, WorkloadId id) {
  for (const WaitDecision& w : d.waits) {
    if (w.workload == id) return &w;
  }
  return nullptr;
}

TEST(PlacementScenarioTest, RequiredRackKeepsTheGangInOneRack) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  b.AddNodes(2, pool, b.AddRack("r0"));
  b.AddNodes(2, pool, b.AddRack("r1"));
  const QueueId q = b.AddQueue("q", 0);
  Snapshot s = b.Build();
  // One GPU busy on node 0 and on node 2: no rack has two whole nodes.
  testing::AddRunning(s, Job(1, q, 1, 1, hours(1)), {{NodeId(0), GpuRange(0, 1)}}, Time(), Time());
  testing::AddRunning(s, Job(2, q, 1, 1, hours(1)), {{NodeId(2), GpuRange(0, 1)}}, Time(), Time());
  Workload gang = Job(3, q, 2, 8, hours(1));
  gang.constraints.topology = {TopologyLevel::kRack, true};
  s.workloads.push_back(gang);
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  const WaitDecision* w = FindWait(d, WorkloadId(3));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, ReasonCode::kTopology);
  // 7 + 8 + 7 + 8 = 30 free; per rack 8 placeable (one whole node).
  EXPECT_EQ(w->detail, "topology: needs 16 GPUs in one rack; 30 GPUs are free but the best rack has 8");
  EXPECT_EQ(w->estimated_start, TimeFromMillis(0) + hours(1));
}

TEST(PlacementScenarioTest, FragmentationIsNamedWhenGpusAreScattered) {
  Snapshot s = testing::SimpleCluster(1, 2);
  testing::AddRunning(s, Job(1, QueueId(0), 1, 4, hours(1)), {{NodeId(0), GpuRange(0, 4)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 4, hours(1)), {{NodeId(1), GpuRange(0, 4)}}, Time(), Time());
  s.workloads.push_back(Job(3, QueueId(0), 1, 8, hours(1)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  const WaitDecision* w = FindWait(d, WorkloadId(3));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, ReasonCode::kFragmentation);
  EXPECT_EQ(w->detail, "fragmentation: needs 1 x 8 GPUs; 8 GPUs are free on eligible nodes but only 0 in whole pods");
}

TEST(PlacementScenarioTest, ConstraintsHealthAndPoolsRouteWork) {
  ClusterBuilder b;
  const QueueId q = b.AddQueue("q", 0);
  const QueueId nlp = b.AddQueue("nlp", 0);
  const PoolId reserved = b.AddPool("inference-reserved", PoolKind::kInferenceReserved);
  const PoolId training = b.AddPool("training", PoolKind::kTraining);
  const PoolId dedicated = b.AddPool("dedicated:nlp", PoolKind::kDedicated, nlp);
  const RackId r = b.AddRack("r0");
  b.AddNodes(1, reserved, r);                 // node 0
  b.AddNodes(1, training, r);                 // node 1, H100
  NodeSpec a100;
  a100.model = "A100";
  a100.cordoned = true;
  b.AddNodes(1, training, r, a100);           // node 2, cordoned A100
  b.AddNodes(1, dedicated, r);                // node 3
  Snapshot s = b.Build();

  Workload serve = Job(1, q, 1, 1, hours(1));
  serve.kind = WorkloadKind::kInference;
  Workload needs_a100 = Job(2, q, 1, 1, hours(1));
  needs_a100.constraints.required_gpu_models = {"A100"};
  Workload needs_b200 = Job(3, q, 1, 1, hours(1));
  needs_b200.constraints.required_gpu_models = {"B200"};
  Workload owner = Job(4, nlp, 1, 8, hours(1), 0, TimeFromMillis(1));
  Workload plain = Job(5, q, 1, 8, hours(1), 0, TimeFromMillis(2));
  for (const Workload& w : {serve, needs_a100, needs_b200, owner, plain}) s.workloads.push_back(w);

  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  std::map<WorkloadId, NodeId> placed;
  for (const PlaceDecision& p : d.places) placed[p.workload] = p.pods[0].node;
  EXPECT_EQ(placed[WorkloadId(1)], NodeId(0));  // inference only on the reserved pool
  EXPECT_EQ(placed[WorkloadId(5)], NodeId(1));  // training pool
  EXPECT_EQ(placed[WorkloadId(4)], NodeId(3));  // nlp's own pool before the common one
  const WaitDecision* health = FindWait(d, WorkloadId(2));
  ASSERT_NE(health, nullptr);
  EXPECT_EQ(health->reason, ReasonCode::kNodeHealth);
  EXPECT_EQ(health->detail, "node health: all 1 matching nodes are failed, not ready or cordoned");
  ASSERT_EQ(d.rejects.size(), 1u);
  EXPECT_EQ(d.rejects[0].workload, WorkloadId(3));
  EXPECT_EQ(d.rejects[0].reason, ReasonCode::kConstraints);
}

TEST(PlacementScenarioTest, DedicatedPoolTakesOnlyItsOwner) {
  ClusterBuilder b;
  const QueueId q = b.AddQueue("q", 0);
  const QueueId nlp = b.AddQueue("nlp", 0);
  const PoolId dedicated = b.AddPool("dedicated:nlp", PoolKind::kDedicated, nlp);
  b.AddNodes(1, dedicated, b.AddRack("r0"));
  Snapshot s = b.Build();
  s.workloads.push_back(Job(1, q, 1, 8, hours(1)));
  s.workloads.push_back(Job(2, nlp, 1, 8, hours(1)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(2));
  ASSERT_EQ(d.rejects.size(), 1u);
  EXPECT_EQ(d.rejects[0].reason, ReasonCode::kPool);
  EXPECT_EQ(d.rejects[0].detail, "pool: no pool that queue q may use takes training work");
}

TEST(PlacementScenarioTest, TrainingBorrowsLentSharedNodesOnly) {
  ClusterBuilder b;
  const QueueId q = b.AddQueue("q", 64);
  const PoolId shared = b.AddPool("shared", PoolKind::kShared);
  b.AddNodes(2, shared, b.AddRack("r0"));
  Snapshot s = b.Build();
  s.workloads.push_back(Job(1, q, 1, 8, hours(1), 0, TimeFromMillis(0)));
  s.workloads.push_back(Job(2, q, 1, 8, hours(1), 0, TimeFromMillis(1)));
  s.lent_nodes = {false, false};
  Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.waits.size(), 2u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kLoan);
  s.lent_nodes = {false, true};
  d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].pods[0].node, NodeId(1));
  EXPECT_TRUE(d.places[0].borrowed);  // a loan, though within q's guarantee
}

TEST(PlacementScenarioTest, SemiDedicatedOwnerReclaimsFromGuests) {
  ClusterBuilder b;
  const QueueId owner = b.AddQueue("owner", 0);
  const QueueId guest = b.AddQueue("guest", 0);
  const PoolId semi = b.AddPool("semi:owner", PoolKind::kSemiDedicated, owner);
  b.AddNodes(1, semi, b.AddRack("r0"));
  Snapshot s = b.Build();
  s.workloads.push_back(Job(1, guest, 1, 8, hours(1)));
  Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_TRUE(d.places[0].borrowed);

  Snapshot later = b.Build();
  later.now = TimeFromMillis(0) + minutes(1);
  testing::AddRunning(later, Job(1, guest, 1, 8, hours(1)), {{NodeId(0), GpuRange(0, 8)}}, Time(), Time());
  later.workloads.push_back(Job(2, owner, 1, 8, hours(1), 0, later.now));
  d = Scheduler(PolicyConfig{}).Schedule(later);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].cause, PreemptCause::kReclaim);
}

TEST(PlacementScenarioTest, InferenceServicesScaleWithResizes) {
  ClusterBuilder b;
  const QueueId q = b.AddQueue("q", 0);
  const PoolId reserved = b.AddPool("inference-reserved", PoolKind::kInferenceReserved);
  b.AddNodes(1, reserved, b.AddRack("r0"));
  Snapshot s = b.Build();
  Workload svc = Job(1, q, 4, 1, Duration::zero());
  svc.kind = WorkloadKind::kInference;
  svc.min_pods = 1;
  svc.pods = 3;  // the autoscaler wants 3 replicas
  testing::AddRunning(s, svc, {{NodeId(0), GpuRange(0, 1)}}, Time(), Time());
  Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].from_pods, 1);
  EXPECT_EQ(d.resizes[0].to_pods, 3);
  EXPECT_EQ(d.resizes[0].added.size(), 2u);

  s.workloads[0].pods = 1;
  s.allocations[0].pods = {{NodeId(0), GpuRange(0, 1)}, {NodeId(0), GpuRange(1, 1)}, {NodeId(0), GpuRange(2, 1)}};
  d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].to_pods, 1);
  EXPECT_EQ(d.resizes[0].removed.size(), 2u);
}

}  // namespace
}  // namespace tidal
