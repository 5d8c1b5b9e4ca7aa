// Wait diagnosis (core/diagnosis/wait_diagnosis.h): a long training wait
// is charged, interval by interval, to the engine's own wait reasons, and
// the dominant one maps to a cause; a job that can never fit is too big
// whatever the engine said.
#include <gtest/gtest.h>

#include "core/diagnosis/wait_diagnosis.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using diagnosis::WaitCause;
using diagnosis::WaitTally;

Time At(int s) { return Time(seconds(s)); }

TEST(WaitCauseOfTest, EngineReasonsMapToCauses) {
  EXPECT_EQ(diagnosis::WaitCauseOf(ReasonCode::kQuota), WaitCause::kQuota);
  EXPECT_EQ(diagnosis::WaitCauseOf(ReasonCode::kPriority), WaitCause::kPriorityImbalance);
  EXPECT_EQ(diagnosis::WaitCauseOf(ReasonCode::kReservation), WaitCause::kPriorityImbalance);
  EXPECT_EQ(diagnosis::WaitCauseOf(ReasonCode::kAwaitingVictims), WaitCause::kPriorityImbalance);
  EXPECT_EQ(diagnosis::WaitCauseOf(ReasonCode::kAwaitingApproval), WaitCause::kAwaitingApproval);
  for (ReasonCode r : {ReasonCode::kCapacity, ReasonCode::kFragmentation, ReasonCode::kGang, ReasonCode::kTopology,
                       ReasonCode::kPool, ReasonCode::kLoan, ReasonCode::kNodeHealth, ReasonCode::kConstraints}) {
    EXPECT_EQ(diagnosis::WaitCauseOf(r), WaitCause::kCapacityShort) << ReasonCodeName(r);
  }
}

// Quota from 0 to 600 s, priority from 600 s to 3000 s: 600 s against
// 2,400 s, so priority dominates.
TEST(WaitTallyTest, EachReasonHoldsUntilTheNextAndTheLongestDominates) {
  WaitTally t;
  t.Explain(At(0), ReasonCode::kQuota);
  t.Explain(At(600), ReasonCode::kPriority);
  t.ChargeTo(At(3000));
  EXPECT_DOUBLE_EQ(t.seconds(ReasonCode::kQuota), 600);
  EXPECT_DOUBLE_EQ(t.seconds(ReasonCode::kPriority), 2400);
  EXPECT_EQ(t.Dominant(), ReasonCode::kPriority);
  const Snapshot s = testing::SimpleCluster(1, 2);  // 16 GPUs, no queue limit
  const Workload w = testing::Job(1, QueueId(0), 1, 8, hours(1));
  const diagnosis::WaitDiagnosis d = diagnosis::DiagnoseWait(s, w, t, seconds(3000));
  EXPECT_EQ(d.cause, WaitCause::kPriorityImbalance);
  EXPECT_EQ(d.reason, ReasonCode::kPriority);
  EXPECT_EQ(d.most_ever_gpus, 16);
}

// Told every 0.1 s for 300 s, or only at its changes: the same charges,
// to the millisecond. Capacity 0-100 s (told 1,000 times), quota 100-300 s
// (2,000 times): 100 s and 200 s exactly, where a sum of 1,000 doubles of
// 0.1 would not be.
TEST(WaitTallyTest, TheSameReasonToldAgainChangesNothing) {
  WaitTally every, changes;
  for (int ms = 0; ms < 300'000; ms += 100) {
    every.Explain(Time(milliseconds(ms)), ms < 100'000 ? ReasonCode::kCapacity : ReasonCode::kQuota);
  }
  changes.Explain(At(0), ReasonCode::kCapacity);
  changes.Explain(At(100), ReasonCode::kQuota);
  every.ChargeTo(At(300));
  changes.ChargeTo(At(300));
  EXPECT_EQ(every.seconds(ReasonCode::kCapacity), 100.0);
  EXPECT_EQ(every.seconds(ReasonCode::kQuota), 200.0);
  for (ReasonCode r : {ReasonCode::kCapacity, ReasonCode::kQuota, ReasonCode::kPriority}) {
    EXPECT_EQ(every.seconds(r), changes.seconds(r)) << ReasonCodeName(r);
  }
  EXPECT_EQ(every.Dominant(), ReasonCode::kQuota);
  // Told again after the charge, nothing moves until the next charge.
  every.Explain(At(300), ReasonCode::kQuota);
  EXPECT_EQ(every.seconds(ReasonCode::kQuota), 200.0);
  every.ChargeTo(At(400));
  EXPECT_EQ(every.seconds(ReasonCode::kQuota), 300.0);
}

TEST(WaitTallyTest, NoExplanationIsNoReason) {
  WaitTally t;
  t.ChargeTo(At(100));
  EXPECT_FALSE(t.Dominant().has_value());
  const Snapshot s = testing::SimpleCluster(1, 1);
  const diagnosis::WaitDiagnosis d =
      diagnosis::DiagnoseWait(s, testing::Job(1, QueueId(0), 1, 1, hours(1)), t, seconds(100));
  EXPECT_EQ(d.cause, WaitCause::kCapacityShort);
}

// 3 x 8 GPUs = 24 on a 16-GPU cluster: no wait ends it, whatever the
// engine said (here quota).
TEST(WaitDiagnosisTest, AGangLargerThanTheClusterIsTooBig) {
  const Snapshot s = testing::SimpleCluster(1, 2);
  WaitTally t;
  t.Explain(At(0), ReasonCode::kQuota);
  t.ChargeTo(At(4000));
  const diagnosis::WaitDiagnosis d =
      diagnosis::DiagnoseWait(s, testing::Job(1, QueueId(0), 3, 8, hours(1)), t, seconds(4000));
  EXPECT_EQ(d.cause, WaitCause::kJobTooBig);
  EXPECT_EQ(d.asks_gpus, 24);
  EXPECT_EQ(d.most_ever_gpus, 16);
  EXPECT_NE(d.detail.find("asks 24 GPUs at once, at most 16"), std::string::npos) << d.detail;
}

// A failed GPU frees nothing: a 2 x 8 gang on two 8-GPU nodes, one GPU of
// which failed, can never start (15 working GPUs).
TEST(WaitDiagnosisTest, FailedGpusMakeAGangTooBig) {
  Snapshot s = testing::SimpleCluster(1, 2);
  const Workload w = testing::Job(1, QueueId(0), 2, 8, hours(1));
  EXPECT_EQ(diagnosis::MostGpusEverFree(s, w), 16);
  s.cluster.nodes[1].failed_gpus = testing::GpuRange(3, 1);
  EXPECT_EQ(diagnosis::MostGpusEverFree(s, w), 15);
  WaitTally t;
  t.Explain(At(0), ReasonCode::kGang);
  t.ChargeTo(At(3600));
  EXPECT_EQ(diagnosis::DiagnoseWait(s, w, t, hours(1)).cause, WaitCause::kJobTooBig);
}

// A queue guaranteed 4 GPUs that may borrow 4 more can never hold 16.
TEST(WaitDiagnosisTest, AJobAboveItsQueuesCeilingIsTooBig) {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.queues[0].guaranteed_gpus = 4;
  s.queues[0].borrowing_limit_gpus = 4;
  const Workload w = testing::Job(1, QueueId(0), 2, 8, hours(1));
  EXPECT_EQ(diagnosis::MostGpusEverFree(s, w), 8);
  WaitTally t;
  EXPECT_EQ(diagnosis::DiagnoseWait(s, w, t, hours(1)).cause, WaitCause::kJobTooBig);
}

}  // namespace
}  // namespace tidal
