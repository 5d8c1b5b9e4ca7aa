// The one priority refresher (core/state/priority_refresher.h), through
// StateMachine::RefreshPriorities: what the server and the simulator both run.
#include <gtest/gtest.h>

#include "core/state/state_machine.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using state::State;
using state::StateMachine;
using testing::GpuRange;

// Tiers: critical 1000 (never, needs approval), standard 500; training +0;
// budget within guarantee +0, borrowing -200, over budget -400.
PriorityTemplate Template() {
  PriorityTemplate t;
  t.name = "default";
  t.tiers["critical"] = TierRule{1000, PreemptibilityClass::kNever, true};
  t.tiers["standard"] = TierRule{500, PreemptibilityClass::kPreemptible, false};
  t.fallback_tier = "standard";
  t.attributes.kind_bonus = {{WorkloadKind::kTraining, 0}};
  t.budget = BudgetRules{0, -200, -400};
  return t;
}

// Two 8-GPU nodes; queue "default" guarantees 8 GPUs; one project of the
// given tier and GPU-hour budget (0 = none).
StateMachine Machine(const std::string& tier = "standard", double budget_gpu_hours = 0, int requeued_bonus = 0) {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.queues[0].guaranteed_gpus = 8;
  Project p;
  p.id = ProjectId(0);
  p.name = "proj";
  p.tenant = "acme";
  p.tier = tier;
  p.default_queue = QueueId(0);
  p.budget_gpu_hours = budget_gpu_hours;
  s.projects = {p};
  PriorityTemplate t = Template();
  t.attributes.requeued_bonus = requeued_bonus;
  return StateMachine(State(s.cluster, s.queues, s.projects), state::LifecycleOptions{seconds(30), Duration(0)},
                      {t});
}

Workload Job(uint64_t id, int gpus) {
  Workload w = testing::Job(id, QueueId(0), 1, gpus, hours(1));
  w.project = ProjectId(0);
  w.tenant = "acme";
  return w;
}

int PriorityOf(const StateMachine& m, uint64_t id) { return m.state().workload(WorkloadId(id))->priority.value; }

TEST(PriorityRefresherTest, APendingJobKeepsItsPriorityAsItsQueueFills) {
  StateMachine m = Machine();
  int edits = 0;
  m.set_sink([&](Time, state::EditOrigin origin, const state::Edit&) {
    if (origin == state::EditOrigin::kPriority) ++edits;
  });
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, 4)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  // 0 used <= 8 guaranteed: within, 500 + 0; a start above the guarantee
  // would be borrowing instead, -200 - 0 = -200, settled by the engine.
  EXPECT_EQ(PriorityOf(m, 1), 500);
  EXPECT_EQ(m.state().workload(WorkloadId(1))->priority.borrowing_start_delta, -200);
  EXPECT_EQ(edits, 1);

  // Jobs 2 and 3 come, and job 2 starts and ends: 6 used + 4 asked = 10 >
  // 8 would have flipped job 1 to borrowing and back. Its stored priority
  // does not move: only the two newcomers are derived (2 edits).
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(2, 6)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(2), {{NodeId(0), GpuRange(0, 6)}}}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);
  // Job 2 runs within the guarantee (6 <= 8): 500; its start delta stays,
  // unused (deriving at each start would be an edit per placement).
  const Workload* two = m.state().workload(WorkloadId(2));
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->priority.value, 500);
  EXPECT_EQ(two->priority.borrowing_start_delta, -200);
  ASSERT_TRUE(m.Apply(state::ReleaseEdit{WorkloadId(2), WorkloadState::kSucceeded}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(3, 2)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);
  EXPECT_EQ(edits, 1 + 2);
}

TEST(PriorityRefresherTest, AQueueAboveItsGuaranteeMakesItsWorkBorrow) {
  StateMachine m = Machine();
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, 4)}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(2, 8)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(2), {{NodeId(0), GpuRange(0, 8)}}}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(3, 2)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(3), {{NodeId(1), GpuRange(0, 2)}}}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  // 10 used > 8 guaranteed: the queue borrows, and so does all its work,
  // waiting or running: 500 - 200 = 300, with no start delta left to add.
  for (uint64_t id : {1, 2, 3}) EXPECT_EQ(PriorityOf(m, id), 300) << "job " << id;
  EXPECT_EQ(m.state().workload(WorkloadId(1))->priority.borrowing_start_delta, 0);

  // Job 3 leaves: 8 <= 8, within again for all, and job 1 waits with its
  // start delta back.
  ASSERT_TRUE(m.Apply(state::ReleaseEdit{WorkloadId(3), WorkloadState::kSucceeded}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);
  EXPECT_EQ(PriorityOf(m, 2), 500);
  EXPECT_EQ(m.state().workload(WorkloadId(1))->priority.borrowing_start_delta, -200);
}

TEST(PriorityRefresherTest, SpendAccruesWithTheClockUntilTheBudgetRunsOut) {
  StateMachine m = Machine("standard", /*budget_gpu_hours=*/2);
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, 4)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 4)}}}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);

  // 4 GPUs x 20 min = 1.33 GPU-hours of 2: still within.
  m.AdvanceTo(Time(minutes(20)));
  EXPECT_NEAR(m.state().snapshot().projects[0].used_gpu_hours, 4.0 / 3.0, 1e-9);
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);

  // 4 GPUs x 30 min = 2 GPU-hours: over budget, 500 - 400 = 100.
  m.AdvanceTo(Time(minutes(30)));
  EXPECT_NEAR(m.state().snapshot().projects[0].used_gpu_hours, 2.0, 1e-9);
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 100);

  // Released: nothing held, the spend stops at 2 GPU-hours.
  ASSERT_TRUE(m.Apply(state::ReleaseEdit{WorkloadId(1), WorkloadState::kSucceeded}).ok());
  m.AdvanceTo(Time(hours(5)));
  EXPECT_NEAR(m.state().snapshot().projects[0].used_gpu_hours, 2.0, 1e-9);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
}

TEST(PriorityRefresherTest, AnApprovedTopTierIsDerivedAtOnceAndKept) {
  StateMachine m = Machine("critical");
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, 4)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  // Critical awaits approval: the fallback tier, standard 500.
  const Workload* w = m.state().workload(WorkloadId(1));
  EXPECT_EQ(w->state, WorkloadState::kAwaitingApproval);
  EXPECT_EQ(w->priority.value, 500);

  // While it waits for approval its queue goes above its guarantee (10 >
  // 8 is borrowing): it is not re-derived, since it cannot run anyway.
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(3, 8)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(3), {{NodeId(0), GpuRange(0, 8)}}}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(4, 2)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(4), {{NodeId(1), GpuRange(0, 2)}}}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);

  ASSERT_TRUE(m.Apply(state::ApproveEdit{WorkloadId(1)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  w = m.state().workload(WorkloadId(1));
  // Approved: critical 1000, and its queue borrows: 1000 - 200 = 800.
  EXPECT_EQ(w->state, WorkloadState::kPending);
  EXPECT_EQ(w->priority.value, 800);
  EXPECT_EQ(w->priority.preemptibility, PreemptibilityClass::kNever);

  // A later budget move re-derives with the approval kept: job 4 leaves,
  // 8 <= 8 is within the guarantee again, 1000.
  ASSERT_TRUE(m.Apply(state::ReleaseEdit{WorkloadId(4), WorkloadState::kSucceeded}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 1000);
}

TEST(PriorityRefresherTest, OnlyAChangedPriorityIsAnEdit) {
  StateMachine m = Machine();
  int edits = 0;
  m.set_sink([&](Time, state::EditOrigin origin, const state::Edit&) {
    if (origin == state::EditOrigin::kPriority) ++edits;
  });
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, 4)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(edits, 1);  // 0 -> 500
  ASSERT_TRUE(m.RefreshPriorities().ok());
  m.AdvanceTo(Time(hours(1)));
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(edits, 1);
}

TEST(PriorityRefresherTest, WithoutTemplatesNothingIsRefreshed) {
  Snapshot s = testing::SimpleCluster(1, 1);
  StateMachine m(State(s.cluster, s.queues, s.projects), state::LifecycleOptions{seconds(30), Duration(0)});
  ASSERT_TRUE(m.Apply(state::SubmitEdit{testing::Job(1, QueueId(0), 1, 1, hours(1), /*priority=*/7)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 7);
}

TEST(PriorityRefresherTest, ARequeuedVictimHasItsBonusUntilItRunsAgain) {
  StateMachine m = Machine("standard", 0, /*requeued_bonus=*/100);
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, 4)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 4)}}}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  EXPECT_EQ(PriorityOf(m, 1), 500);

  // Preempted: a notice, then its exit requeues it. Waiting again: 500 +
  // 100 = 600, with the 100 as its resume bonus.
  state::NoticeEdit notice;
  notice.workload = WorkloadId(1);
  notice.grace_deadline = Time() + seconds(30);
  ASSERT_TRUE(m.Apply(notice).ok());
  ASSERT_TRUE(m.Apply(state::RequeueEdit{WorkloadId(1)}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  const Workload* w = m.state().workload(WorkloadId(1));
  EXPECT_EQ(w->requeues, 1);
  EXPECT_EQ(w->priority.value, 600);
  EXPECT_EQ(w->priority.resume_bonus, 100);

  // Placed again: back to 500 at the next refresh.
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{NodeId(1), GpuRange(0, 4)}}}).ok());
  ASSERT_TRUE(m.RefreshPriorities().ok());
  w = m.state().workload(WorkloadId(1));
  EXPECT_EQ(w->priority.value, 500);
  EXPECT_EQ(w->priority.resume_bonus, 0);
  EXPECT_EQ(w->requeues, 1);
}

}  // namespace
}  // namespace tidal
