#include "core/quota/quota_tracker.h"

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal::quota {
namespace {

using testing::ClusterBuilder;
using testing::GpuRange;
using testing::Job;

// Gives queue q `gpus` GPUs of running work on fresh 8-GPU nodes.
void Use(Snapshot& s, QueueId q, int gpus, uint64_t id) {
  std::vector<PodPlacement> pods;
  for (int left = gpus; left > 0; left -= 8) {
    pods.push_back({NodeId(static_cast<uint32_t>(pods.size())), GpuRange(0, std::min(8, left))});
  }
  testing::AddRunning(s, Job(id, q, 1, gpus, seconds(1)), pods, Time(), Time());
}

TEST(QuotaTrackerTest, WithinGuaranteeThenBorrowThenDenied) {
  ClusterBuilder b;
  const QueueId nlp = b.AddQueue("nlp", 32, QueueId(), 1.0, kUnlimited, /*borrowing_limit=*/8);
  Snapshot s = b.Build();
  Use(s, nlp, 28, 1);
  QuotaTracker quota(s);
  // 28 + 4 = 32 <= 32: within guarantee.
  EXPECT_EQ(quota.Check(nlp, 4, 100).admission, Admission::kWithinGuarantee);
  // 28 + 8 = 36 > 32, 4 over, limit 8: borrow.
  EXPECT_EQ(quota.Check(nlp, 8, 100).admission, Admission::kBorrow);
  // 28 + 16 = 44, 12 over the limit of 8: denied. It may take 32 + 8 - 28 = 12
  // GPUs, 4 of them its own guarantee, so it may borrow 8.
  const QuotaVerdict v = quota.Check(nlp, 16, 100);
  EXPECT_EQ(v.admission, Admission::kDenied);
  EXPECT_EQ(quota.DeniedDetail(nlp, v), "quota: needs 16 GPUs, queue nlp has 4 of 32 left and may borrow 8");
  EXPECT_EQ(quota.MaxEverGpus(nlp), 40);
}

// Check answers a repeated question from its last verdict: a change of
// usage in between must give a fresh one.
TEST(QuotaTrackerTest, ARepeatedQuestionIsAnsweredAgainOnceUsageMoves) {
  ClusterBuilder b;
  const QueueId nlp = b.AddQueue("nlp", 32, QueueId(), 1.0, kUnlimited, /*borrowing_limit=*/8);
  const QueueId other = b.AddQueue("other", 0);
  Snapshot s = b.Build();
  Use(s, nlp, 28, 1);
  QuotaTracker quota(s);
  // 28 + 8 = 36 <= 32 + 8: borrow, twice (the second from the memo).
  EXPECT_EQ(quota.Check(nlp, 8, 100).admission, Admission::kBorrow);
  EXPECT_EQ(quota.Check(nlp, 8, 100).admission, Admission::kBorrow);
  // Another queue's question in between changes nothing.
  EXPECT_EQ(quota.Check(other, 8, 100).admission, Admission::kBorrow);
  EXPECT_EQ(quota.Check(nlp, 8, 100).admission, Admission::kBorrow);
  // 36 + 8 = 44 > 40 once 8 more are placed: denied, may borrow 40 - 36 = 4.
  quota.Add(nlp, 8);
  const QuotaVerdict v = quota.Check(nlp, 8, 100);
  EXPECT_EQ(v.admission, Admission::kDenied);
  EXPECT_EQ(v.may_borrow_gpus, 4);
  // Fewer free GPUs is another question: with 4 free and nothing protected
  // the answer stays the limit's.
  EXPECT_EQ(quota.Check(nlp, 4, 4).admission, Admission::kBorrow);
  quota.AddAllocation(nlp, 4, /*terminating=*/false);
  EXPECT_EQ(quota.Check(nlp, 4, 4).admission, Admission::kDenied);  // 40 + 4 > 40
}

TEST(QuotaTrackerTest, ParentGuaranteeBoundsChildren) {
  ClusterBuilder b;
  const QueueId org = b.AddQueue("org", 16);
  const QueueId team = b.AddQueue("team", 64, org);
  const Snapshot s = b.Build();
  QuotaTracker quota(s);
  // min(64, 16) = 16.
  EXPECT_EQ(quota.guarantee(team), 16);
  EXPECT_EQ(quota.Check(team, 16, 100).admission, Admission::kWithinGuarantee);
  EXPECT_EQ(quota.Check(team, 17, 100).admission, Admission::kBorrow);
  quota.Add(team, 10);
  EXPECT_EQ(quota.usage(org), 10);
}

TEST(QuotaTrackerTest, LendingLimitProtectsIdleGuarantee) {
  ClusterBuilder b;
  const QueueId lender = b.AddQueue("lender", 32, QueueId(), 1.0, /*lending_limit=*/8);
  const QueueId borrower = b.AddQueue("borrower", 0);
  const Snapshot s = b.Build();
  QuotaTracker quota(s);
  // 40 free; the lender keeps 32 - 8 = 24 of its idle guarantee, so 16 may
  // be borrowed.
  EXPECT_EQ(quota.Check(borrower, 16, 40).admission, Admission::kBorrow);
  const QuotaVerdict v = quota.Check(borrower, 17, 40);
  EXPECT_EQ(v.admission, Admission::kDenied);
  EXPECT_EQ(v.may_borrow_gpus, 16);
  // The lender itself is never blocked by its own protection.
  EXPECT_EQ(quota.Check(lender, 32, 40).admission, Admission::kWithinGuarantee);
}

TEST(QuotaTrackerTest, ReclaimNeverTakesAQueueBelowItsGuarantee) {
  ClusterBuilder b;
  const QueueId a = b.AddQueue("a", 16);
  Snapshot s = b.Build();
  Use(s, a, 24, 1);
  QuotaTracker quota(s);
  // 24 - 8 = 16 >= 16 ok; 24 - 9 = 15 < 16 not.
  EXPECT_TRUE(quota.CanReclaimFrom(a, 8));
  EXPECT_FALSE(quota.CanReclaimFrom(a, 9));
  quota.RemoveLive(a, 8);
  EXPECT_FALSE(quota.CanReclaimFrom(a, 1));
  EXPECT_EQ(quota.usage(a), 24);  // the GPUs are still held
}

TEST(QuotaTrackerTest, BorrowShareIsWeighted) {
  ClusterBuilder b;
  const QueueId light = b.AddQueue("light", 0, QueueId(), 1.0);
  const QueueId heavy = b.AddQueue("heavy", 0, QueueId(), 3.0);
  const Snapshot s = b.Build();
  QuotaTracker quota(s);
  quota.Add(light, 6);
  quota.Add(heavy, 12);
  // 6 / 1 = 6 and 12 / 3 = 4: heavy has the smaller share.
  EXPECT_DOUBLE_EQ(quota.BorrowShare(light), 6.0);
  EXPECT_DOUBLE_EQ(quota.BorrowShare(heavy), 4.0);
}

TEST(QuotaTrackerTest, UnknownQueueIsUntracked) {
  const Snapshot empty;
  QuotaTracker quota(empty);
  EXPECT_FALSE(quota.tracked(QueueId()));
  EXPECT_EQ(quota.Check(QueueId(), 1000, 0).admission, Admission::kWithinGuarantee);
}

}  // namespace
}  // namespace tidal::quota
