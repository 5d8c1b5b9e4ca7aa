#include "core/model/workload_index.h"

#include <gtest/gtest.h>

#include "core/engine/scheduler.h"
#include "tests/support/cluster_builder.h"

namespace tidal::engine {
namespace {

std::vector<Workload> WithIds(const std::vector<uint64_t>& ids) {
  std::vector<Workload> out;
  for (uint64_t id : ids) {
    Workload w;
    w.id = WorkloadId(id);
    out.push_back(w);
  }
  return out;
}

TEST(WorkloadIndexTest, DenseIdsFindTheirIndex) {
  const std::vector<Workload> ws = WithIds({12, 10, 11, 15});
  const WorkloadIndex index(ws);
  EXPECT_EQ(index.Find(WorkloadId(12)), 0);
  EXPECT_EQ(index.Find(WorkloadId(10)), 1);
  EXPECT_EQ(index.Find(WorkloadId(15)), 3);
  EXPECT_EQ(index.Find(WorkloadId(13)), -1);  // inside the span, absent
  EXPECT_EQ(index.Find(WorkloadId(9)), -1);   // below it
  EXPECT_EQ(index.Find(WorkloadId(16)), -1);  // above it
  EXPECT_EQ(index.Find(WorkloadId()), -1);    // invalid
}

TEST(WorkloadIndexTest, SparseIdsFallBackToAHashMap) {
  // Span 10^12 for 3 ids: far over 16 x 3 + 4096, so not a flat vector.
  const std::vector<Workload> ws = WithIds({7, 1'000'000'000'000, 5});
  const WorkloadIndex index(ws);
  EXPECT_EQ(index.Find(WorkloadId(1'000'000'000'000)), 1);
  EXPECT_EQ(index.Find(WorkloadId(5)), 2);
  EXPECT_EQ(index.Find(WorkloadId(6)), -1);
}

TEST(WorkloadIndexTest, ADuplicateIdFindsTheFirst) {
  const WorkloadIndex dense(WithIds({3, 4, 3}));
  EXPECT_EQ(dense.Find(WorkloadId(3)), 0);
  const WorkloadIndex sparse(WithIds({3, 1'000'000'000'000, 3}));
  EXPECT_EQ(sparse.Find(WorkloadId(3)), 0);
}

// The node-class cache must follow cluster_version: a cordoned node with a new
// version takes no work; the same decisions come out with caching off (0).
TEST(SchedulerClassCacheTest, FollowsClusterVersion) {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.workloads.push_back(testing::Job(1, QueueId(0), 1, 8, minutes(10)));
  s.workloads.push_back(testing::Job(2, QueueId(0), 1, 8, minutes(10)));
  const Scheduler scheduler{PolicyConfig{}};
  s.cluster_version = 1;
  EXPECT_EQ(scheduler.Schedule(s).places.size(), 2u);
  s.cluster.nodes[1].cordoned = true;
  s.cluster_version = 2;
  const Decisions cordoned = scheduler.Schedule(s);
  ASSERT_EQ(cordoned.places.size(), 1u);
  EXPECT_EQ(cordoned.places[0].pods[0].node, NodeId(0));
  s.cluster_version = 0;
  const Decisions uncached = scheduler.Schedule(s);
  ASSERT_EQ(uncached.places.size(), 1u);
  EXPECT_EQ(uncached.places[0].pods[0].node, NodeId(0));
}

}  // namespace
}  // namespace tidal::engine
