#include "core/placement/cluster_state.h"

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal::engine {
namespace {

using testing::ClusterBuilder;
using testing::GpuRange;
using testing::NodeSpec;

TEST(ClusterStateTest, FreeGpusExcludeFailedGpusAndAllocations) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.failed_gpus = GpuRange(0, 1);
  const NodeId n = b.AddNodes(1, pool, b.AddRack("r0"), spec);
  Snapshot s = b.Build();
  testing::AddRunning(s, testing::Job(1, QueueId(), 1, 3, seconds(10)), {{n, GpuRange(1, 3)}}, Time(), Time());
  ClusterState state(s);
  // 8 GPUs - 1 failed - 3 allocated = 4 free, GPUs 4..7.
  EXPECT_EQ(state.free_count(n), 4);
  EXPECT_EQ(state.free_mask(n), GpuRange(4, 4));
  EXPECT_EQ(state.class_free_gpus(state.class_of(n)), 4);
  ASSERT_EQ(state.bucket(state.class_of(n), 4).size(), 1u);
}

TEST(ClusterStateTest, IdenticalNodesShareAClassAndDifferentOnesDoNot) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const RackId rack = b.AddRack("r0");
  b.AddNodes(3, pool, rack);
  NodeSpec a100;
  a100.model = "A100";
  b.AddNodes(2, pool, rack, a100);
  NodeSpec degraded;
  degraded.health = Health::kDegraded;
  b.AddNodes(1, pool, rack, degraded);
  const Snapshot s = b.Build();
  ClusterState state(s);
  ASSERT_EQ(state.class_count(), 3);
  EXPECT_EQ(state.node_class(0).node_count, 3);
  EXPECT_EQ(state.node_class(1).node_count, 2);
  EXPECT_TRUE(state.node_class(2).degraded);
}

TEST(ClusterStateTest, TakeAndReleaseMoveNodesBetweenBuckets) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const NodeId n = b.AddNodes(2, pool, b.AddRack("r0"));
  const Snapshot s = b.Build();
  ClusterState state(s);
  const int c = state.class_of(n);
  state.Take(n, GpuRange(0, 3));
  // Node 0 now has 8 - 3 = 5 free; node 1 stays at 8.
  EXPECT_EQ(state.bucket(c, 5).size(), 1u);
  EXPECT_EQ(state.bucket(c, 8).size(), 1u);
  EXPECT_EQ(state.class_free_gpus(c), 13);
  state.Release(n, GpuRange(0, 3));
  EXPECT_EQ(state.bucket(c, 8).size(), 2u);
  EXPECT_EQ(state.class_free_gpus(c), 16);
}

TEST(ClusterStateTest, ReleaseNeverRevivesAFailedGpu) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.failed_gpus = GpuRange(7, 1);
  const NodeId n = b.AddNodes(1, pool, b.AddRack("r0"), spec);
  const Snapshot s = b.Build();
  ClusterState state(s);
  state.Take(n, GpuRange(0, 2));
  state.Release(n, GpuRange(0, 2) | GpuRange(7, 1));
  // 8 - 1 failed = 7 free; GPU 7 stays out.
  EXPECT_EQ(state.free_count(n), 7);
}

TEST(ClusterStateTest, NodesWithoutNvlinkDomainsAreOneDomain) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const NodeId n = b.AddNodes(1, pool, b.AddRack("r0"));
  Snapshot s = b.Build();
  s.cluster.nodes[0].nvlink_domains.clear();
  ClusterState state(s);
  ASSERT_EQ(state.domains(n).size(), 1u);
  EXPECT_EQ(state.domains(n)[0], GpuRange(0, 8));
}

// Loan state splits a static class: shared nodes 0..3 with 1 and 3 lent give
// two classes, numbered by first member (0: unlent, 1: lent), the same with
// shared static classes as with ones built in the constructor.
TEST(ClusterStateTest, LoanStateSplitsStaticClassesTheSameOnEitherPath) {
  ClusterBuilder b;
  const PoolId shared = b.AddPool("shared", PoolKind::kShared);
  const RackId r0 = b.AddRack("r0");
  const RackId r1 = b.AddRack("r1");
  b.AddNodes(2, shared, r0);
  b.AddNodes(2, shared, r1);
  Snapshot s = b.Build();
  s.lent_nodes = {false, true, false, true};
  const auto statics = StaticNodeClasses::Build(s.cluster);
  ASSERT_EQ(statics->classes.size(), 1u);
  // 4 nodes x 8 GPUs, two per rack: 16 GPUs in each rack.
  EXPECT_EQ(statics->classes[0].node_count, 4);
  EXPECT_EQ(statics->classes[0].rack_gpus,
            (std::vector<std::pair<uint32_t, int>>{{r0.value(), 16}, {r1.value(), 16}}));
  const ClusterState cached(s, statics);
  const ClusterState fresh(s);
  ASSERT_EQ(cached.class_count(), 2);
  ASSERT_EQ(fresh.class_count(), 2);
  for (uint32_t n = 0; n < 4; ++n) {
    EXPECT_EQ(cached.class_of(NodeId(n)), fresh.class_of(NodeId(n)));
    EXPECT_EQ(cached.class_of(NodeId(n)), n % 2 == 0 ? 0 : 1);
  }
  EXPECT_FALSE(cached.node_class(0).lent);
  EXPECT_TRUE(cached.node_class(1).lent);
  EXPECT_EQ(cached.static_class_of(0), 0);
  EXPECT_EQ(cached.static_class_of(1), 0);
}

TEST(ClusterStateTest, AllocationGpusAreCountedInTheSameScan) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const NodeId n = b.AddNodes(2, pool, b.AddRack("r0"));
  Snapshot s = b.Build();
  testing::AddRunning(s, testing::Job(1, QueueId(), 1, 3, seconds(10)), {{n, GpuRange(0, 3)}}, Time(), Time());
  testing::AddRunning(s, testing::Job(2, QueueId(), 2, 2, seconds(10)),
                      {{n, GpuRange(4, 2)}, {NodeId(n.value() + 1), GpuRange(0, 2)}}, Time(), Time());
  std::vector<int> gpus;
  ClusterState state(s, nullptr, &gpus);
  EXPECT_EQ(gpus, (std::vector<int>{3, 4}));
  // Node 0: 8 - 3 - 2 = 3 free.
  EXPECT_EQ(state.free_count(n), 3);
}

}  // namespace
}  // namespace tidal::engine
