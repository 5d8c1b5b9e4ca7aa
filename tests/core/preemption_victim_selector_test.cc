#include "core/preemption/victim_selector.h"

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal::preemption {
namespace {

using testing::GpuRange;

Candidate Make(uint64_t id, double lost, int priority, int64_t start_s, bool shrink = false) {
  Candidate c;
  c.workload = WorkloadId(id);
  c.lost_gpu_seconds = lost;
  c.priority = priority;
  c.start = TimeFromMillis(start_s * 1000);
  c.kind = shrink ? CandidateKind::kShrink : CandidateKind::kEvict;
  return c;
}

TEST(VictimSelectorTest, LostWorkThenPriorityThenYounger) {
  std::vector<Candidate> c = {Make(1, 100, 0, 0), Make(2, 50, 5, 0), Make(3, 50, 1, 0),
                              Make(4, 50, 1, 10), Make(5, 999, 9, 0, /*shrink=*/true)};
  SortCandidates(c);
  // The shrink comes first whatever its cost; then 50s by priority 1 before 5,
  // and among equal priority the younger (start 10) first; 100 last.
  std::vector<uint64_t> order;
  for (const Candidate& x : c) order.push_back(x.workload.value());
  EXPECT_EQ(order, (std::vector<uint64_t>{5, 4, 3, 2, 1}));
}

TEST(VictimSelectorTest, PicksTheCheapestSufficientSetAndDropsTheRest) {
  Snapshot s = testing::SimpleCluster(1, 2);
  // Node 0: jobs 1 (GPUs 0-3) and 2 (4-7); node 1: job 3 (all 8).
  std::vector<Candidate> c;
  auto add = [&](uint64_t id, NodeId n, GpuMask m, double lost) {
    testing::AddRunning(s, testing::Job(id, QueueId(0), 1, std::popcount(m), seconds(1)), {{n, m}}, Time(), Time());
    Candidate x = Make(id, lost, 0, 0);
    x.allocation = static_cast<uint32_t>(s.allocations.size() - 1);
    x.pod_count = 1;
    x.gpus = std::popcount(m);
    c.push_back(x);
  };
  add(1, NodeId(0), GpuRange(0, 4), 10);
  add(2, NodeId(0), GpuRange(4, 4), 30);
  add(3, NodeId(1), GpuRange(0, 8), 20);
  // The allocations no longer move: point the candidates at their pods.
  for (Candidate& x : c) x.pods = s.allocations[x.allocation].pods.data();
  engine::ClusterState state(s);
  placement::EligibilityIndex index(s, state);
  quota::QuotaTracker quota(s);
  placement::GangPlacer placer;
  SortCandidates(c);  // 1 (10), 3 (20), 2 (30)
  const Workload w = testing::Job(9, QueueId(0), 1, 8, seconds(1));
  auto sel = SelectVictims(state, index.For(w), {1, 8, {}}, nullptr, c, quota, placer);
  ASSERT_TRUE(sel);
  // Releasing 1 then 3 makes node 1 whole; job 1 is then not needed.
  ASSERT_EQ(sel->chosen.size(), 1u);
  EXPECT_EQ(c[sel->chosen[0]].workload, WorkloadId(3));
  EXPECT_EQ(sel->plan[0].node, NodeId(1));
}

TEST(VictimSelectorTest, GuardedQueueStaysAtItsGuarantee) {
  testing::ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  b.AddNodes(2, pool, b.AddRack("r0"));
  const QueueId owner = b.AddQueue("owner", 8);
  Snapshot s = b.Build();
  std::vector<Candidate> c;
  for (uint64_t id : {1, 2}) {
    const NodeId n(static_cast<uint32_t>(id - 1));
    testing::AddRunning(s, testing::Job(id, owner, 1, 8, seconds(1)), {{n, GpuRange(0, 8)}}, Time(), Time());
    Candidate x = Make(id, 0, 0, 0);
    x.allocation = static_cast<uint32_t>(s.allocations.size() - 1);
    x.queue = owner;
    x.pod_count = 1;
    x.gpus = 8;
    x.guard_queue = true;
    c.push_back(x);
  }
  for (Candidate& x : c) x.pods = s.allocations[x.allocation].pods.data();
  engine::ClusterState state(s);
  placement::EligibilityIndex index(s, state);
  quota::QuotaTracker quota(s);
  placement::GangPlacer placer;
  const Workload w = testing::Job(9, QueueId(), 2, 8, seconds(1));
  // Owner holds 16 with a guarantee of 8: only one of its jobs may go, and
  // the 2-node request needs both.
  EXPECT_FALSE(SelectVictims(state, index.For(w), {2, 8, {}}, nullptr, c, quota, placer));
  auto one = SelectVictims(state, index.For(w), {1, 8, {}}, nullptr, c, quota, placer);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->chosen.size(), 1u);
}

}  // namespace
}  // namespace tidal::preemption

namespace tidal::preemption {
namespace {

TEST(VictimSelectorOneNodeTest, PicksTheNodeWithTheLeastLostWork) {
  Snapshot s = testing::SimpleCluster(1, 2);
  // Node 0: jobs 1 (GPUs 0-3, 10 GPU-s lost) and 2 (4-7, 30); node 1: job 3
  // (all 8, 20). Node 0 costs 10 + 30 = 40, node 1 costs 20: node 1 wins.
  std::vector<std::tuple<uint64_t, NodeId, GpuMask, double>> jobs = {
      {1, NodeId(0), testing::GpuRange(0, 4), 10}, {2, NodeId(0), testing::GpuRange(4, 4), 30},
      {3, NodeId(1), testing::GpuRange(0, 8), 20}};
  std::vector<Candidate> c;
  for (const auto& [id, n, m, lost] : jobs) {
    testing::AddRunning(s, testing::Job(id, QueueId(0), 1, std::popcount(m), seconds(1)), {{n, m}}, Time(), Time());
    Candidate x = Make(id, lost, 0, 0);
    x.allocation = static_cast<uint32_t>(s.allocations.size() - 1);
    x.pod_count = 1;
    x.gpus = std::popcount(m);
    c.push_back(x);
  }
  for (Candidate& x : c) x.pods = s.allocations[x.allocation].pods.data();
  engine::ClusterState state(s);
  placement::EligibilityIndex index(s, state);
  quota::QuotaTracker quota(s);
  const Workload w = testing::Job(9, QueueId(0), 1, 8, seconds(1));
  auto sel = SelectVictimsOnOneNode(state, index.For(w), {1, 8, {}}, nullptr, c, quota);
  ASSERT_TRUE(sel);
  ASSERT_EQ(sel->chosen.size(), 1u);
  EXPECT_EQ(c[sel->chosen[0]].workload, WorkloadId(3));
  // A 4-GPU request needs only job 1 (10 GPU-s) on node 0.
  auto small = SelectVictimsOnOneNode(state, index.For(w), {1, 4, {}}, nullptr, c, quota);
  ASSERT_TRUE(small);
  ASSERT_EQ(small->chosen.size(), 1u);
  EXPECT_EQ(c[small->chosen[0]].workload, WorkloadId(1));
  EXPECT_EQ(small->plan[0].gpus, testing::GpuRange(0, 4));
}

}  // namespace
}  // namespace tidal::preemption
