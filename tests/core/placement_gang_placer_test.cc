#include "core/placement/gang_placer.h"

#include <bit>
#include <set>

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal::placement {
namespace {

using testing::ClusterBuilder;
using testing::GpuRange;
using testing::Job;
using testing::NodeSpec;

// Runs one placement against a snapshot.
struct Harness {
  Snapshot snapshot;
  engine::ClusterState state;
  EligibilityIndex index;
  GangPlacer placer;
  explicit Harness(Snapshot s) : snapshot(std::move(s)), state(snapshot), index(snapshot, state) {}
  std::optional<std::vector<PodPlacement>> Place(const Workload& w, PlacementRequest r,
                                                 const std::vector<uint8_t>* blocked = nullptr) {
    return placer.Place(state, index.For(w), r, blocked);
  }
};

std::set<uint32_t> Nodes(const std::vector<PodPlacement>& pods) {
  std::set<uint32_t> out;
  for (const PodPlacement& p : pods) out.insert(p.node.value());
  return out;
}

TEST(GangPlacerTest, SinglePodGoesToTheFullestNodeThatFits) {
  Snapshot s = testing::SimpleCluster(1, 3);
  // Node 0 has 8 free, node 1 has 3 free, node 2 has 2 free.
  testing::AddRunning(s, Job(1, QueueId(0), 1, 5, seconds(1)), {{NodeId(1), GpuRange(0, 5)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 6, seconds(1)), {{NodeId(2), GpuRange(0, 6)}}, Time(), Time());
  Harness h(s);
  auto plan = h.Place(Job(3, QueueId(0), 1, 3, seconds(1)), {1, 3, {}});
  ASSERT_TRUE(plan);
  // Best fit: the node with the fewest free GPUs that holds 3 is node 1.
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].node, NodeId(1));
  EXPECT_EQ((*plan)[0].gpus, GpuRange(5, 3));
}

TEST(GangPlacerTest, PodStaysInsideOneNvlinkDomain) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.nvlink_domains = 2;  // GPUs 0-3 and 4-7
  const NodeId n = b.AddNodes(1, pool, b.AddRack("r0"), spec);
  b.AddQueue("q", 0);
  Snapshot s = b.Build();
  // Domain 0 has GPU 3 free, domain 1 has GPUs 5-7 free.
  testing::AddRunning(s, Job(1, QueueId(0), 1, 4, seconds(1)), {{n, GpuRange(0, 3) | GpuRange(4, 1)}},
                      Time(), Time());
  Harness h(s);
  auto plan = h.Place(Job(2, QueueId(0), 1, 3, seconds(1)), {1, 3, {}});
  ASSERT_TRUE(plan);
  EXPECT_EQ((*plan)[0].gpus, GpuRange(5, 3));
  // A 2-GPU pod takes the fuller domain that holds it: domain 1 again (3 free).
  auto two = h.Place(Job(3, QueueId(0), 1, 2, seconds(1)), {1, 2, {}});
  ASSERT_TRUE(two);
  EXPECT_EQ((*two)[0].gpus, GpuRange(5, 2));
}

TEST(GangPlacerTest, GangFitsInOneRackBeforeSpanningRacks) {
  // Rack 0: 2 nodes, rack 1: 4 nodes; all free.
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  b.AddNodes(2, pool, b.AddRack("r0"));
  b.AddNodes(4, pool, b.AddRack("r1"));
  b.AddQueue("q", 0);
  Harness h(b.Build());
  // 2 x 8 GPUs: rack 0 holds exactly 2 pods, the best fit.
  auto small = h.Place(Job(1, QueueId(0), 2, 8, seconds(1)), {2, 8, {}});
  ASSERT_TRUE(small);
  EXPECT_EQ(Nodes(*small), (std::set<uint32_t>{0, 1}));
  // 3 x 8 GPUs: only rack 1 holds 3.
  auto big = h.Place(Job(2, QueueId(0), 3, 8, seconds(1)), {3, 8, {}});
  ASSERT_TRUE(big);
  for (uint32_t n : Nodes(*big)) EXPECT_GE(n, 2u);
}

TEST(GangPlacerTest, RequiredRackRefusesToSpanRacksButPreferredSpans) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  b.AddNodes(2, pool, b.AddRack("r0"));
  b.AddNodes(2, pool, b.AddRack("r1"));
  b.AddQueue("q", 0);
  Harness h(b.Build());
  const Workload w = Job(1, QueueId(0), 3, 8, seconds(1));
  EXPECT_FALSE(h.Place(w, {3, 8, {TopologyLevel::kRack, true}}));
  auto spans = h.Place(w, {3, 8, {TopologyLevel::kRack, false}});
  ASSERT_TRUE(spans);
  EXPECT_EQ(spans->size(), 3u);
}

TEST(GangPlacerTest, AllOrNothing) {
  Snapshot s = testing::SimpleCluster(1, 2);
  Harness h(s);
  // 3 pods of 8 on two 8-GPU nodes: nothing is placed.
  EXPECT_FALSE(h.Place(Job(1, QueueId(0), 3, 8, seconds(1)), {3, 8, {}}));
}

TEST(GangPlacerTest, GangPrefersOneNodeWhileSmallPodsUseFragments) {
  Snapshot s = testing::SimpleCluster(1, 3);
  // Nodes 1 and 2 have 4 free each; node 0 is whole.
  testing::AddRunning(s, Job(1, QueueId(0), 1, 4, seconds(1)), {{NodeId(1), GpuRange(0, 4)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 4, seconds(1)), {{NodeId(2), GpuRange(0, 4)}}, Time(), Time());
  Harness h(s);
  auto plan = h.Place(Job(3, QueueId(0), 2, 4, seconds(1)), {2, 4, {}});
  ASSERT_TRUE(plan);
  // 2 x 4 = 8 GPUs fit on node 0 alone, and one node beats two.
  EXPECT_EQ(Nodes(*plan), (std::set<uint32_t>{0}));
  // A single 4-GPU pod takes a fragment (node 1, 4 free) and keeps node 0
  // whole; the plan above was not committed, so the state is unchanged.
  auto frag = h.Place(Job(4, QueueId(0), 1, 4, seconds(1)), {1, 4, {}});
  ASSERT_TRUE(frag);
  EXPECT_EQ((*frag)[0].node, NodeId(1));
}

TEST(GangPlacerTest, DegradedNodesAreUsedLast) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const RackId r = b.AddRack("r0");
  NodeSpec degraded;
  degraded.health = Health::kDegraded;
  b.AddNodes(1, pool, r, degraded);
  b.AddNodes(1, pool, r);
  b.AddQueue("q", 0);
  Harness h(b.Build());
  auto plan = h.Place(Job(1, QueueId(0), 1, 8, seconds(1)), {1, 8, {}});
  ASSERT_TRUE(plan);
  EXPECT_EQ((*plan)[0].node, NodeId(1));
  // Two nodes' worth needs the degraded one too.
  auto both = h.Place(Job(2, QueueId(0), 2, 8, seconds(1)), {2, 8, {}});
  ASSERT_TRUE(both);
  EXPECT_EQ(Nodes(*both), (std::set<uint32_t>{0, 1}));
}

TEST(GangPlacerTest, BlockedNodesAreSkipped) {
  Snapshot s = testing::SimpleCluster(1, 2);
  Harness h(s);
  std::vector<uint8_t> blocked = {1, 0};
  auto plan = h.Place(Job(1, QueueId(0), 1, 8, seconds(1)), {1, 8, {}}, &blocked);
  ASSERT_TRUE(plan);
  EXPECT_EQ((*plan)[0].node, NodeId(1));
  blocked = {1, 1};
  EXPECT_FALSE(h.Place(Job(1, QueueId(0), 1, 8, seconds(1)), {1, 8, {}}, &blocked));
}

TEST(GangPlacerTest, DiagnoseCountsWholePods) {
  Snapshot s = testing::SimpleCluster(1, 2);
  testing::AddRunning(s, Job(1, QueueId(0), 1, 5, seconds(1)), {{NodeId(0), GpuRange(0, 5)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 5, seconds(1)), {{NodeId(1), GpuRange(0, 5)}}, Time(), Time());
  Harness h(s);
  const Workload w = Job(3, QueueId(0), 1, 4, seconds(1));
  const FitDiagnosis d = h.placer.Diagnose(h.state, h.index.For(w), {1, 4, {}}, nullptr);
  // 3 + 3 = 6 free, but no node holds a 4-GPU pod.
  EXPECT_EQ(d.free_gpus, 6);
  EXPECT_EQ(d.placeable_gpus, 0);
}

TEST(AssignPodsOnNodeTest, SpillsAcrossDomainsOnlyWhenNoDomainHoldsThePod) {
  std::vector<PodPlacement> out;
  const std::vector<GpuMask> domains = {GpuRange(0, 4), GpuRange(4, 4)};
  // 2 free in each domain; a 4-GPU pod must take GPUs from both.
  ASSERT_TRUE(AssignPodsOnNode(NodeId(0), GpuRange(2, 4), domains, 1, 4, out));
  EXPECT_EQ(out[0].gpus, GpuRange(2, 4));
  out.clear();
  EXPECT_FALSE(AssignPodsOnNode(NodeId(0), GpuRange(2, 4), domains, 2, 4, out));
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace tidal::placement
