#include "core/engine/cluster_state.h"

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

}  // namespace
}  // namespace tidal::engine
