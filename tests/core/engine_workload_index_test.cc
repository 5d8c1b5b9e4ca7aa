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

// From a snapshot with digests the ids are read from the digests; without
// them (or with a stale count) from the records: the same index either way.
TEST(WorkloadIndexTest, ASnapshotsDigestsGiveTheSameIndexAsItsRecords) {
  Snapshot s;
  s.workloads = WithIds({12, 10, 11, 15, 10});
  const WorkloadIndex from_records(s);
  for (const Workload& w : s.workloads) s.workload_digests.push_back(WorkloadDigest::Of(w, -1, nullptr));
  const WorkloadIndex from_digests(s);
  for (uint64_t id = 8; id <= 17; ++id) {
    EXPECT_EQ(from_digests.Find(WorkloadId(id)), from_records.Find(WorkloadId(id))) << id;
  }
  EXPECT_EQ(from_digests.Find(WorkloadId(10)), 1);  // a duplicate: the first
  // A digest whose id is not its record's shows which one was read.
  s.workload_digests[0].id = WorkloadId(13);
  EXPECT_EQ(WorkloadIndex(s).Find(WorkloadId(13)), 0);
  s.workload_digests.pop_back();  // not parallel: the records are read
  EXPECT_EQ(WorkloadIndex(s).Find(WorkloadId(12)), 0);
}

// ForEachOfKind gives the workloads of one kind in order, with digests or
// without.
TEST(SnapshotTest, ForEachOfKindGivesThatKindInOrderWithOrWithoutDigests) {
  Snapshot s;
  s.workloads = WithIds({1, 2, 3, 4});
  s.workloads[1].kind = WorkloadKind::kInference;
  s.workloads[3].kind = WorkloadKind::kInference;
  auto ids = [&] {
    std::vector<uint64_t> out;
    s.ForEachOfKind(WorkloadKind::kInference, [&](const Workload& w) { out.push_back(w.id.value()); });
    return out;
  };
  EXPECT_EQ(ids(), (std::vector<uint64_t>{2, 4}));
  for (const Workload& w : s.workloads) s.workload_digests.push_back(WorkloadDigest::Of(w, -1, nullptr));
  EXPECT_EQ(ids(), (std::vector<uint64_t>{2, 4}));
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
