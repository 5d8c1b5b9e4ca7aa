// Quiet passes (core/engine/scheduler.h): a pass over a snapshot version that
// already decided no action is skipped until an edit or a time bound, and
// the skip returns exactly what running the pass would. Builds with
// expensive checks (the test build) also run every skipped pass and abort if
// it decides an action, so every test in the suite checks the bounds too.
#include <gtest/gtest.h>

#include <utility>

#include "core/engine/scheduler.h"
#include "core/state/state.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using state::State;
using testing::GpuRange;
using testing::Job;

constexpr ScheduleOptions kQuiet{.explain_waits = false};

NodeId N(uint32_t i) { return NodeId(i); }

bool NoAction(const Decisions& d) {
  return d.places.empty() && d.preempts.empty() && d.resizes.empty() && d.rejects.empty();
}

// One rack of two 8-GPU nodes, one queue with no guarantee.
State TwoNodes() {
  Snapshot s = testing::SimpleCluster(1, 2);
  return State(s.cluster, s.queues, s.projects);
}

void Running(State& s, Workload w, std::vector<PodPlacement> pods) {
  const WorkloadId id = w.id;
  ASSERT_TRUE(s.Apply(state::SubmitEdit{std::move(w)}).ok());
  ASSERT_TRUE(s.Apply(state::PlaceEdit{id, std::move(pods)}).ok());
}

// Both nodes full until t = 2 h; job 3 (8 GPUs) waits.
State FullWithABacklog() {
  State s = TwoNodes();
  Running(s, Job(1, QueueId(0), 1, 8, hours(2)), {{N(0), GpuRange(0, 8)}});
  Running(s, Job(2, QueueId(0), 1, 8, hours(2)), {{N(1), GpuRange(0, 8)}});
  EXPECT_TRUE(s.Apply(state::SubmitEdit{Job(3, QueueId(0), 1, 8, hours(1))}).ok());
  return s;
}

TEST(QuietPassTest, AnUnchangedBacklogIsSkippedUntilAnEdit) {
  State s = FullWithABacklog();
  Scheduler scheduler{PolicyConfig{}};
  s.AdvanceTo(Time(seconds(10)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  EXPECT_EQ(scheduler.skipped_passes(), 0u);
  // Nothing edited, 10 s later: the pass is skipped.
  s.AdvanceTo(Time(seconds(20)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  EXPECT_EQ(scheduler.skipped_passes(), 1u);
  // A checkpoint only prices victims: still the same version.
  ASSERT_TRUE(s.Apply(state::CheckpointEdit{WorkloadId(1), Time(seconds(20))}).ok());
  s.AdvanceTo(Time(seconds(25)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  EXPECT_EQ(scheduler.skipped_passes(), 2u);
  // A caller that wants the explanations gets them: never skipped.
  s.AdvanceTo(Time(seconds(30)));
  const Decisions explained = scheduler.Schedule(s.snapshot());
  ASSERT_EQ(explained.waits.size(), 1u);
  EXPECT_EQ(explained.waits[0].workload, WorkloadId(3));
  EXPECT_EQ(scheduler.skipped_passes(), 2u);
  // Job 1 ends: an edit, so the next pass runs and places job 3 on node 0.
  ASSERT_TRUE(s.Apply(state::ReleaseEdit{WorkloadId(1)}).ok());
  s.AdvanceTo(Time(seconds(40)));
  const Decisions after = scheduler.Schedule(s.snapshot(), kQuiet);
  ASSERT_EQ(after.places.size(), 1u);
  EXPECT_EQ(after.places[0].workload, WorkloadId(3));
  EXPECT_EQ(scheduler.skipped_passes(), 2u);
}

TEST(QuietPassTest, ACopyOfTheSnapshotIsNeverSkipped) {
  State s = FullWithABacklog();
  Scheduler scheduler{PolicyConfig{}};
  s.AdvanceTo(Time(seconds(10)));
  Snapshot copy = s.snapshot();
  EXPECT_FALSE(copy.stamp.tracked());
  EXPECT_TRUE(NoAction(scheduler.Schedule(copy, kQuiet)));
  // Edited by hand: job 2's node is freed. A stamp carried over from the
  // state would skip this pass and miss the placement.
  copy.allocations.erase(copy.allocations.begin() + 1);
  copy.workloads.erase(copy.workloads.begin() + 1);
  copy.ClearDerived();
  const Decisions d = scheduler.Schedule(copy, kQuiet);
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(scheduler.skipped_passes(), 0u);
}

TEST(QuietPassTest, ADebugSessionsMaxRuntimeEndsTheSkip) {
  // Node 0: a debug session from t = 0 with max_runtime 10 min (expected
  // 2 h, so its expected end is no earlier bound); node 1 full. Job 3 waits
  // and cannot preempt it (equal priority).
  State s = TwoNodes();
  Workload debug = Job(1, QueueId(0), 1, 8, hours(2));
  debug.kind = WorkloadKind::kDebug;
  debug.debug.max_runtime = minutes(10);
  Running(s, debug, {{N(0), GpuRange(0, 8)}});
  Running(s, Job(2, QueueId(0), 1, 8, hours(2)), {{N(1), GpuRange(0, 8)}});
  ASSERT_TRUE(s.Apply(state::SubmitEdit{Job(3, QueueId(0), 1, 8, hours(1))}).ok());
  Scheduler scheduler{PolicyConfig{}};
  s.AdvanceTo(Time(minutes(1)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  s.AdvanceTo(Time(minutes(9)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  EXPECT_EQ(scheduler.skipped_passes(), 1u);
  // 0 + 10 min = the bound: the pass runs and stops the session.
  s.AdvanceTo(Time(minutes(10)));
  const Decisions d = scheduler.Schedule(s.snapshot(), kQuiet);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].victim, WorkloadId(1));
  EXPECT_EQ(d.preempts[0].cause, PreemptCause::kMaxRuntime);
  EXPECT_EQ(scheduler.skipped_passes(), 1u);
}

TEST(QuietPassTest, AVictimsMinRuntimeEndsTheSkip) {
  // Both nodes run priority-0 jobs started at t = 0; job 3 (priority 10)
  // arrives. PreemptionConfig::min_runtime is 5 min: until 0 + 5 min no
  // victim may be taken by priority, so passes before that decide nothing,
  // and the one at 5 min preempts.
  State s = TwoNodes();
  Running(s, Job(1, QueueId(0), 1, 8, hours(2)), {{N(0), GpuRange(0, 8)}});
  Running(s, Job(2, QueueId(0), 1, 8, hours(2)), {{N(1), GpuRange(0, 8)}});
  ASSERT_TRUE(s.Apply(state::SubmitEdit{Job(3, QueueId(0), 1, 8, hours(1), /*priority=*/10)}).ok());
  Scheduler scheduler{PolicyConfig{}};
  s.AdvanceTo(Time(minutes(1)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  s.AdvanceTo(Time(minutes(4)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  EXPECT_EQ(scheduler.skipped_passes(), 1u);
  s.AdvanceTo(Time(minutes(5)));
  const Decisions d = scheduler.Schedule(s.snapshot(), kQuiet);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].preemptor, WorkloadId(3));
}

TEST(QuietPassTest, ABatchJobsLatestStartEndsTheSkip) {
  // Full until 2 h. Batch job 3 needs 1 h and must finish by 1 h 30 min, so
  // its latest start is 30 min: passes before then leave it waiting (it
  // might still start), and the first pass after 30 min rejects it.
  State s = TwoNodes();
  Running(s, Job(1, QueueId(0), 1, 8, hours(2)), {{N(0), GpuRange(0, 8)}});
  Running(s, Job(2, QueueId(0), 1, 8, hours(2)), {{N(1), GpuRange(0, 8)}});
  Workload batch = Job(3, QueueId(0), 1, 8, hours(1));
  batch.kind = WorkloadKind::kBatchInference;
  batch.batch.deadline = Time(minutes(90));
  ASSERT_TRUE(s.Apply(state::SubmitEdit{batch}).ok());
  Scheduler scheduler{PolicyConfig{}};
  s.AdvanceTo(Time(minutes(10)));
  ASSERT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  s.AdvanceTo(Time(minutes(29)));
  EXPECT_TRUE(NoAction(scheduler.Schedule(s.snapshot(), kQuiet)));
  EXPECT_EQ(scheduler.skipped_passes(), 1u);
  s.AdvanceTo(Time(minutes(31)));
  const Decisions d = scheduler.Schedule(s.snapshot(), kQuiet);
  ASSERT_EQ(d.rejects.size(), 1u);
  EXPECT_EQ(d.rejects[0].reason, ReasonCode::kDeadline);
}

}  // namespace
}  // namespace tidal
