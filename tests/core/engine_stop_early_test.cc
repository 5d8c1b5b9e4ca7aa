// Passes that stop early (SchedulingPass::RestCanOnlyWait): a pass that
// explains nothing stops walking its backlog once the rest can only wait,
// and decides exactly what the whole walk decides. Test builds also run
// every stopped pass of the suite in full and compare (Scheduler::RunPass).
#include <gtest/gtest.h>

#include "core/engine/fits_someday.h"
#include "core/engine/scheduling_pass.h"
#include "core/state/state.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using engine::SchedulingPass;
using testing::GpuRange;
using testing::Job;

constexpr Time kNow = Time(hours(1));

// Two 8-GPU nodes, both full with work ending at 2 h, and a backlog of 60
// jobs of 1, 2, 4 and 8 GPUs at priority 0 (the default queue has no
// guarantee and no borrowing limit).
Snapshot FullWithABacklog() {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.now = kNow;
  testing::AddRunning(s, Job(1, QueueId(0), 1, 8, hours(1)), {{NodeId(0), GpuRange(0, 8)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 8, hours(1)), {{NodeId(1), GpuRange(0, 8)}}, Time(), Time());
  for (uint64_t id = 10; id < 70; ++id) {
    s.workloads.push_back(Job(id, QueueId(0), 1, 1 << (id % 4), hours(1), 0, Time(seconds(id))));
  }
  return s;
}

struct Ran {
  Decisions decisions;
  bool stopped = false;
};

Ran RunPass(const Snapshot& s, bool explain, bool may_stop, engine::FitsSomeday* fits = nullptr) {
  static const PolicyConfig kPolicy;
  SchedulingPass pass(kPolicy, s);
  pass.set_explain_waits(explain);
  pass.set_stop_when_only_waits_remain(may_stop);
  pass.set_fits_someday(fits);
  Ran out;
  out.decisions = pass.Run();
  out.stopped = pass.stopped_early();
  return out;
}

TEST(StopEarlyTest, AFullClusterStopsAndStillRejectsWhatCanNeverFit) {
  Snapshot s = FullWithABacklog();
  // Last in line: 4 pods x 8 GPUs, 32 of the cluster's 16.
  s.workloads.push_back(Job(99, QueueId(0), 4, 8, hours(1), 0, Time(seconds(500))));
  const Ran stopped = RunPass(s, /*explain=*/false, /*may_stop=*/true);
  const Ran whole = RunPass(s, /*explain=*/false, /*may_stop=*/false);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_FALSE(whole.stopped);
  EXPECT_EQ(stopped.decisions, whole.decisions);
  ASSERT_EQ(stopped.decisions.rejects.size(), 1u);
  EXPECT_EQ(stopped.decisions.rejects[0].workload, WorkloadId(99));
  EXPECT_TRUE(stopped.decisions.places.empty());
}

TEST(StopEarlyTest, APassThatExplainsWalksEverything) {
  const Snapshot s = FullWithABacklog();
  const Ran explained = RunPass(s, /*explain=*/true, /*may_stop=*/true);
  EXPECT_FALSE(explained.stopped);
  // 60 waits: every job of the backlog gets its explanation.
  EXPECT_EQ(explained.decisions.waits.size(), 60u);
}

TEST(StopEarlyTest, WorkThatCanStillPreemptIsWalkedFirst) {
  Snapshot s = FullWithABacklog();
  // Priority 10 against victims at 0 (gap 1), running for an hour (min
  // runtime 5 min), within a guarantee of 24 (16 used + 8): it preempts job
  // 1 and waits for its GPUs; then the rest, at 0, can only wait. (With no
  // guarantee it would need borrowing and preempt in the borrow phase, so
  // the main phase could not stop before it.)
  s.queues[0].guaranteed_gpus = 24;
  s.workloads.push_back(Job(80, QueueId(0), 1, 8, hours(1), 10, Time(seconds(900))));
  const Ran stopped = RunPass(s, /*explain=*/false, /*may_stop=*/true);
  const Ran whole = RunPass(s, /*explain=*/false, /*may_stop=*/false);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.decisions, whole.decisions);
  ASSERT_EQ(stopped.decisions.preempts.size(), 1u);
  EXPECT_EQ(stopped.decisions.preempts[0].preemptor, WorkloadId(80));
}

TEST(StopEarlyTest, FreeGpusTooFewForAnyPodStillStop) {
  Snapshot s = FullWithABacklog();
  // Job 2 holds only 7 GPUs: one is free on node 1, and the backlog's 1-GPU
  // jobs take it before the pass can stop. Without them (every pod asks 2
  // or more) it stops at once.
  s.allocations[1].pods[0].gpus = GpuRange(0, 7);
  s.workloads.erase(std::remove_if(s.workloads.begin(), s.workloads.end(),
                                   [](const Workload& w) { return w.gpus_per_pod == 1; }),
                    s.workloads.end());
  const Ran stopped = RunPass(s, /*explain=*/false, /*may_stop=*/true);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.decisions, RunPass(s, false, false).decisions);
  EXPECT_TRUE(stopped.decisions.places.empty());

  s.workloads.push_back(Job(90, QueueId(0), 1, 1, hours(1), 0, Time(seconds(950))));
  const Ran placed = RunPass(s, /*explain=*/false, /*may_stop=*/true);
  ASSERT_EQ(placed.decisions.places.size(), 1u);
  EXPECT_EQ(placed.decisions.places[0].workload, WorkloadId(90));
  EXPECT_EQ(placed.decisions, RunPass(s, false, false).decisions);
}

TEST(StopEarlyTest, WhatFitsSomedayHoldsOnlyForItsClusterAndQueues) {
  Snapshot s = FullWithABacklog();
  s.cluster_version = 1;
  engine::FitsSomeday fits;
  const Ran first = RunPass(s, /*explain=*/false, /*may_stop=*/true, &fits);
  EXPECT_TRUE(first.stopped);
  // The backlog the pass did not walk was checked once and kept.
  EXPECT_TRUE(fits.Has(WorkloadId(10)));
  EXPECT_TRUE(fits.Has(WorkloadId(69)));
  // Another queue set: forgotten.
  s.queues[0].guaranteed_gpus = 4;
  fits.Validate(s);
  EXPECT_FALSE(fits.Has(WorkloadId(10)));
  // Batch work with a deadline is never kept (its test moves with the
  // clock), nor is anything without a cluster version.
  Workload batch = Job(70, QueueId(0), 1, 1, hours(1));
  batch.kind = WorkloadKind::kBatchInference;
  batch.batch.deadline = kNow + hours(3);
  fits.Add(batch);
  EXPECT_FALSE(fits.Has(WorkloadId(70)));
  s.cluster_version = 0;
  fits.Validate(s);
  fits.Add(s.workloads.back());
  EXPECT_FALSE(fits.Has(s.workloads.back().id));
}

// Over the State's kept waiting order, a stopped pass asks "can this ever
// fit?" only of work inserted since the fits-someday set last settled the
// order, and of what it left unsettled; it still rejects all that the
// whole walk rejects.
TEST(StopEarlyTest, AStoppedPassAsksWhatCameOrStayedUnsettledSinceItLastSettled) {
  const Snapshot full = FullWithABacklog();
  state::State st(full.cluster, full.queues, full.projects);
  st.AdvanceTo(kNow);
  for (Workload w : full.workloads) {
    w.state = WorkloadState::kPending;
    ASSERT_TRUE(st.Apply(state::SubmitEdit{w}).ok()) << w.id.value();
  }
  for (const Allocation& a : full.allocations) ASSERT_TRUE(st.Apply(state::PlaceEdit{a.workload, a.pods}).ok());
  // Last in line and awaiting approval: 32 GPUs of the cluster's 16, so
  // never; asked only once it is approved.
  Workload waits_for_an_admin = Job(98, QueueId(0), 4, 8, hours(1), 0, Time(seconds(600)));
  waits_for_an_admin.state = WorkloadState::kAwaitingApproval;
  waits_for_an_admin.priority.awaiting_approval = true;
  ASSERT_TRUE(st.Apply(state::SubmitEdit{waits_for_an_admin}).ok());
  engine::FitsSomeday fits;
  const auto stopped_pass = [&] {
    const Ran stopped = RunPass(st.snapshot(), /*explain=*/false, /*may_stop=*/true, &fits);
    EXPECT_TRUE(stopped.stopped);
    EXPECT_EQ(stopped.decisions, RunPass(st.snapshot(), false, false).decisions);
    return stopped.decisions;
  };
  // The first pass asks about everything, and settles it.
  EXPECT_TRUE(stopped_pass().rejects.empty());
  EXPECT_TRUE(fits.Has(WorkloadId(69)));
  EXPECT_FALSE(fits.Has(WorkloadId(98)));
  // Inserted since: a job of 24 GPUs, rejected (a job that was asked about
  // only when the whole backlog was would be let wait).
  ASSERT_TRUE(st.Apply(state::SubmitEdit{Job(99, QueueId(0), 3, 8, hours(1), 0, Time(seconds(700)))}).ok());
  Decisions d = stopped_pass();
  ASSERT_EQ(d.rejects.size(), 1u);
  EXPECT_EQ(d.rejects[0].workload, WorkloadId(99));
  ASSERT_TRUE(st.Apply(state::ReleaseEdit{WorkloadId(99), WorkloadState::kFailed}).ok());
  // Unsettled, and approved without being inserted again: still asked.
  ASSERT_TRUE(st.Apply(state::ApproveEdit{WorkloadId(98)}).ok());
  d = stopped_pass();
  ASSERT_EQ(d.rejects.size(), 1u);
  EXPECT_EQ(d.rejects[0].workload, WorkloadId(98));
}

}  // namespace
}  // namespace tidal
