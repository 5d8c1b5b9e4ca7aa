#include "core/colocation/batch_admission.h"

#include <gtest/gtest.h>

#include "tests/support/colocation_fixtures.h"

namespace tidal {
namespace {

using colocation_testing::AddRunning;
using colocation_testing::ColocationSnapshot;
using colocation_testing::Gpus;

Time At(Duration d) { return Time(d); }

Workload Batch(uint64_t id, Duration expected, Time deadline) {
  Workload w;
  w.id = WorkloadId(id);
  w.kind = WorkloadKind::kBatchInference;
  w.state = WorkloadState::kPending;
  w.expected_duration = expected;
  w.batch.deadline = deadline;
  return w;
}

TEST(BatchAdmissionTest, InfeasibleDeadlineIsRejectedWithNumbers) {
  // Now 10:00, deadline 10:30, 45 minutes of work: finishes 10:45, 15 min late.
  const Time now = At(hours(10));
  const Workload job = Batch(1, minutes(45), now + minutes(30));
  const auto reject = CheckBatchDeadline(job, now, now);
  ASSERT_TRUE(reject.has_value());
  EXPECT_EQ(reject->workload, WorkloadId(1));
  EXPECT_EQ(reject->reason, ReasonCode::kDeadline);
  EXPECT_NE(reject->detail.find("needs 45.0 min"), std::string::npos) << reject->detail;
  EXPECT_NE(reject->detail.find("deadline is in 30.0 min"), std::string::npos) << reject->detail;
  EXPECT_NE(reject->detail.find("15.0 min late"), std::string::npos) << reject->detail;
  EXPECT_NE(reject->detail.find("slack -15.0 min"), std::string::npos) << reject->detail;
}

TEST(BatchAdmissionTest, FeasibleUnlessTheEarliestStartIsTooLate) {
  const Time now = At(hours(10));
  const Workload job = Batch(1, minutes(20), now + minutes(30));  // slack 10 min
  EXPECT_FALSE(CheckBatchDeadline(job, now, now).has_value());
  // Exactly on time is still feasible: start 10:10 + 20 = 10:30.
  EXPECT_FALSE(CheckBatchDeadline(job, now, now + minutes(10)).has_value());
  const auto late = CheckBatchDeadline(job, now, now + minutes(12));
  ASSERT_TRUE(late.has_value());
  EXPECT_NE(late->detail.find("in 12.0 min"), std::string::npos) << late->detail;
  EXPECT_NE(late->detail.find("2.0 min late"), std::string::npos) << late->detail;
  // Unknown duration or no deadline: nothing to judge.
  EXPECT_FALSE(CheckBatchDeadline(Batch(2, milliseconds(0), now), now, now).has_value());
  EXPECT_FALSE(CheckBatchDeadline(Batch(3, hours(5), kInfiniteFuture), now, now).has_value());
}

TEST(BatchAdmissionTest, EdfOrderWithSlackTieBreak) {
  Snapshot s = ColocationSnapshot(0, 1, 0);
  s.now = At(hours(1));
  s.workloads.push_back(Batch(1, minutes(10), At(hours(3))));
  s.workloads.push_back(Batch(2, minutes(10), At(hours(2))));
  // Same deadline as 2 but 50 minutes of work: slack 10 min < 50 min.
  s.workloads.push_back(Batch(3, minutes(50), At(hours(2))));
  s.workloads.push_back(Batch(4, minutes(10), kInfiniteFuture));
  // Running since 0:30 with 60 min of work: 30 min remain, deadline 2:00,
  // slack 30 min; same deadline, so between 3 (10) and 2 (50).
  Workload running = Batch(5, minutes(60), At(hours(2)));
  AddRunning(s, running, {{NodeId(0), Gpus(0, 1)}}, At(minutes(30)), At(minutes(30)));
  EXPECT_EQ(BatchSlack(s.workloads.back(), &s.allocations.back(), s.now), minutes(30));
  EXPECT_EQ(BatchEdfOrder(s), (std::vector<WorkloadId>{WorkloadId(3), WorkloadId(5), WorkloadId(2),
                                                       WorkloadId(1), WorkloadId(4)}));
}

TEST(BatchAdmissionTest, RejectsOnlyPendingInfeasibleJobs) {
  Snapshot s = ColocationSnapshot(0, 1, 0);
  s.now = At(hours(1));
  s.workloads.push_back(Batch(2, minutes(90), At(hours(2))));  // 30 min late
  s.workloads.push_back(Batch(1, minutes(30), At(hours(2))));  // fine
  // Running and already late: not an admission question.
  AddRunning(s, Batch(3, hours(5), At(hours(2))), {{NodeId(0), Gpus(0, 1)}}, At(minutes(0)),
             At(minutes(0)));
  const auto rejects = RejectInfeasibleBatch(s);
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].workload, WorkloadId(2));
}

}  // namespace
}  // namespace tidal
