// ClusterState::CatchUp: a state kept across passes and moved to a later
// snapshot must be exactly the state built from that snapshot (placement
// walks the buckets in order, so their order is part of the decisions).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/placement/cluster_state.h"
#include "tests/support/cluster_builder.h"

namespace tidal::engine {
namespace {

using testing::GpuRange;

// Fills the snapshot's free_gpus / allocation_gpus as the State keeps them.
void Bookkeep(Snapshot& s) {
  s.ClearDerived();
  std::vector<int> gpus;
  ClusterState scanned(s, nullptr, &gpus);
  for (size_t n = 0; n < s.cluster.nodes.size(); ++n) {
    s.free_gpus.push_back(scanned.free_mask(NodeId(static_cast<uint32_t>(n))));
  }
  s.allocation_gpus = gpus;
}

// `jobs` one-node jobs: job k on node (7 * k) % nodes with (k % 8) + 1 GPUs.
Snapshot WithJobs(const Snapshot& base, int jobs) {
  Snapshot s = base;
  const int nodes = static_cast<int>(s.cluster.nodes.size());
  for (int k = 0; k < jobs; ++k) {
    const int n = (7 * k) % nodes;
    bool taken = false;
    for (const Allocation& a : s.allocations) taken = taken || a.pods[0].node.value() == static_cast<uint32_t>(n);
    if (taken) continue;
    const int g = (k % 8) + 1;
    testing::AddRunning(s, testing::Job(static_cast<uint64_t>(k + 1), QueueId(0), 1, g, seconds(10)),
                        {{NodeId(static_cast<uint32_t>(n)), GpuRange(0, g)}}, Time(), Time());
  }
  Bookkeep(s);
  return s;
}

void ExpectSortedBuckets(const ClusterState& st) {
  for (int c = 0; c < st.class_count(); ++c) {
    for (int k = 0; k <= st.node_class(c).gpu_count; ++k) {
      EXPECT_TRUE(std::is_sorted(st.bucket(c, k).begin(), st.bucket(c, k).end())) << c << "/" << k;
    }
  }
}

TEST(ClusterStateCatchUpTest, AFewChangedNodesGiveTheBuiltState) {
  const Snapshot base = testing::SimpleCluster(4, 20);  // 80 nodes, one class
  const auto statics = StaticNodeClasses::Build(base.cluster);
  Snapshot s0 = WithJobs(base, 30);
  ClusterState kept(s0, statics);
  // Jobs start (31, 32, then 33..40), nothing changes, then jobs 1..5 end.
  for (int jobs : {31, 32, 40, 40}) {
    Snapshot s = WithJobs(base, jobs);
    ASSERT_TRUE(kept.CatchUp(s, statics));
    EXPECT_TRUE(kept.SameAs(ClusterState(s, statics)));
    ExpectSortedBuckets(kept);
  }
  Snapshot fewer = WithJobs(base, 40);
  fewer.allocations.erase(fewer.allocations.begin(), fewer.allocations.begin() + 5);
  fewer.workloads.erase(fewer.workloads.begin(), fewer.workloads.begin() + 5);
  Bookkeep(fewer);
  ASSERT_TRUE(kept.CatchUp(fewer, statics));
  EXPECT_TRUE(kept.SameAs(ClusterState(fewer, statics)));
  ExpectSortedBuckets(kept);
}

TEST(ClusterStateCatchUpTest, ManyChangedNodesGiveTheBuiltState) {
  const Snapshot base = testing::SimpleCluster(4, 20);
  const auto statics = StaticNodeClasses::Build(base.cluster);
  Snapshot empty = base;
  Bookkeep(empty);
  ClusterState kept(empty, statics);
  Snapshot full = WithJobs(base, 80);  // every node changes
  ASSERT_TRUE(kept.CatchUp(full, statics));
  EXPECT_TRUE(kept.SameAs(ClusterState(full, statics)));
  ASSERT_TRUE(kept.CatchUp(empty, statics));
  EXPECT_TRUE(kept.SameAs(ClusterState(empty, statics)));
}

// With the snapshot's free-GPU log (one lineage, as a State keeps it), a
// kept state looks only at the logged nodes and still gives the built
// state: jobs end on two nodes, one of them logged twice; then a log trimmed
// past what the kept state read sends it back to comparing every node.
TEST(ClusterStateCatchUpTest, TheFreeGpusLogGivesTheBuiltState) {
  Snapshot s = WithJobs(testing::SimpleCluster(4, 20), 30);
  const auto statics = StaticNodeClasses::Build(s.cluster);
  ClusterState kept(s, statics);
  // The jobs on nodes 0 and 7 (k = 0 and 1 in WithJobs) end.
  s.allocations.erase(s.allocations.begin(), s.allocations.begin() + 2);
  s.workloads.erase(s.workloads.begin(), s.workloads.begin() + 2);
  s.allocation_gpus.erase(s.allocation_gpus.begin(), s.allocation_gpus.begin() + 2);
  for (uint32_t n : {0u, 7u, 0u}) {
    s.free_gpus[n] = s.cluster.nodes[n].all_gpus();
    s.free_gpus_log.Record(n, s.free_gpus.size());
  }
  ASSERT_TRUE(kept.CatchUp(s, statics));
  EXPECT_TRUE(kept.SameAs(ClusterState(s, statics)));
  ExpectSortedBuckets(kept);

  // The job on node 14 ends; 1100 more changes (of node 14, in the log)
  // trim away the ones the kept state has not read.
  s.allocations.erase(s.allocations.begin());
  s.workloads.erase(s.workloads.begin());
  s.allocation_gpus.erase(s.allocation_gpus.begin());
  s.free_gpus[14] = s.cluster.nodes[14].all_gpus();
  for (int i = 0; i < 1100; ++i) s.free_gpus_log.Record(14, s.free_gpus.size());
  ASSERT_TRUE(kept.CatchUp(s, statics));
  EXPECT_TRUE(kept.SameAs(ClusterState(s, statics)));
}

TEST(ClusterStateCatchUpTest, OtherClassesLoansOrNoBookkeepingAreRefused) {
  Snapshot s = testing::SimpleCluster(1, 4);
  Bookkeep(s);
  const auto statics = StaticNodeClasses::Build(s.cluster);
  ClusterState kept(s, statics);
  EXPECT_FALSE(kept.CatchUp(s, StaticNodeClasses::Build(s.cluster)));  // other classes
  Snapshot lent = s;
  lent.lent_nodes = {true, false, false, false};
  EXPECT_FALSE(kept.CatchUp(lent, statics));
  Snapshot bare = s;
  bare.ClearDerived();
  EXPECT_FALSE(kept.CatchUp(bare, statics));
  EXPECT_TRUE(kept.CatchUp(s, statics));
}

}  // namespace
}  // namespace tidal::engine
