// Snapshot::free_gpus / allocation_gpus: a caller's bookkeeping in place of
// the scan over nodes and allocations.
#include <gtest/gtest.h>

#include <vector>

#include "core/placement/cluster_state.h"
#include "tests/support/cluster_builder.h"

namespace tidal::engine {
namespace {

using testing::ClusterBuilder;
using testing::GpuRange;
using testing::NodeSpec;

struct Fixture {
  Snapshot snapshot;
  NodeId a, b;
};

// Two nodes; node a has GPU 0 failed and a 3-GPU job on GPUs 1..3; node b a
// 2-GPU job on GPUs 6..7.
Fixture Build() {
  ClusterBuilder builder;
  const PoolId pool = builder.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.failed_gpus = GpuRange(0, 1);
  Fixture f;
  f.a = builder.AddNodes(1, pool, builder.AddRack("r0"), spec);
  f.b = builder.AddNodes(1, pool, builder.AddRack("r1"));
  f.snapshot = builder.Build();
  testing::AddRunning(f.snapshot, testing::Job(1, QueueId(), 1, 3, seconds(10)),
                      {{f.a, GpuRange(1, 3)}}, Time(), Time());
  testing::AddRunning(f.snapshot, testing::Job(2, QueueId(), 1, 2, seconds(10)),
                      {{f.b, GpuRange(6, 2)}}, Time(), Time());
  return f;
}

TEST(ClusterStateGivenTest, GivenBookkeepingGivesTheSameStateAsTheScan) {
  Fixture f = Build();
  std::vector<int> scanned_gpus;
  ClusterState scanned(f.snapshot, nullptr, &scanned_gpus);
  // Node a: 8 - failed GPU 0 - GPUs 1..3 = GPUs 4..7; node b: GPUs 0..5.
  f.snapshot.free_gpus = {GpuRange(4, 4), GpuRange(0, 6)};
  f.snapshot.allocation_gpus = {3, 2};
  std::vector<int> given_gpus;
  ClusterState given(f.snapshot, nullptr, &given_gpus);
  EXPECT_EQ(scanned_gpus, (std::vector<int>{3, 2}));
  EXPECT_EQ(given_gpus, scanned_gpus);
  for (NodeId n : {f.a, f.b}) {
    EXPECT_EQ(given.free_mask(n), scanned.free_mask(n));
    EXPECT_EQ(given.free_count(n), scanned.free_count(n));
  }
  const int c = given.class_of(f.a);
  EXPECT_EQ(given.class_free_gpus(c), 4 + 6);
  EXPECT_EQ(given.bucket(c, 4), scanned.bucket(c, 4));
  EXPECT_EQ(given.bucket(c, 6), scanned.bucket(c, 6));
  ASSERT_EQ(given.bucket(c, 4).size(), 1u);
  EXPECT_EQ(given.bucket(c, 4)[0], f.a.value());
}

TEST(ClusterStateGivenTest, WrongSizesAreABug) {
  Fixture f = Build();
  f.snapshot.free_gpus = {GpuRange(4, 4), GpuRange(0, 6)};
  f.snapshot.allocation_gpus = {3};  // two allocations
  EXPECT_DEATH(ClusterState(f.snapshot), "allocation_gpus");
}

#ifndef NDEBUG
TEST(ClusterStateGivenTest, DebugBuildsCatchBookkeepingThatDisagrees) {
  Fixture f = Build();
  f.snapshot.free_gpus = {GpuRange(4, 4), GpuRange(0, 8)};  // node b's job left out
  f.snapshot.allocation_gpus = {3, 2};
  EXPECT_DEATH(ClusterState(f.snapshot), "free_gpus of node 1");
  f.snapshot.free_gpus = {GpuRange(4, 4), GpuRange(0, 6)};
  f.snapshot.allocation_gpus = {3, 1};
  EXPECT_DEATH(ClusterState(f.snapshot), "allocation_gpus\\[1\\]");
}
#endif

}  // namespace
}  // namespace tidal::engine
