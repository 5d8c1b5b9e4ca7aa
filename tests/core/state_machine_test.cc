// The committed state, its edits, the lifecycle's timers and the decision
// applier (core/state).
#include "core/state/state_machine.h"

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using state::Edit;
using state::JournalEntry;
using state::State;
using state::StateMachine;
using testing::GpuRange;
using testing::Job;

constexpr Duration kGrace = seconds(30);

NodeId N(uint32_t i) { return NodeId(i); }
Time At(Duration d) { return Time(d); }

// One rack of two 8-GPU nodes, one queue.
State TwoNodes() {
  Snapshot s = testing::SimpleCluster(1, 2);
  return State(s.cluster, s.queues, s.projects);
}

StateMachine Machine(State s = TwoNodes()) {
  return StateMachine(std::move(s), state::LifecycleOptions{kGrace, Duration(0)});
}

void Submit(StateMachine& m, Workload w) {
  ASSERT_TRUE(m.Apply(state::SubmitEdit{std::move(w)}).ok());
}

TEST(StateTest, PlaceBindsGpusAndKeepsTheBookkeeping) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 2, 4, hours(1)));
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 4)}, {N(1), GpuRange(0, 4)}}}).ok());
  const State& s = m.state();
  EXPECT_EQ(s.workload(WorkloadId(1))->state, WorkloadState::kRunning);
  // Each node had 8 free GPUs; 4 are taken on each: 0xF0 left.
  EXPECT_EQ(s.snapshot().free_gpus[0], GpuMask{0xF0});
  EXPECT_EQ(s.snapshot().free_gpus[1], GpuMask{0xF0});
  EXPECT_EQ(s.snapshot().allocation_gpus[0], 8);
  EXPECT_EQ(s.queue_used_gpus(QueueId(0)), 8);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(StateTest, APlaceThatDoubleBooksAGpuIsRefusedWhole) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 1, 4, hours(1)));
  Submit(m, Job(2, QueueId(0), 2, 4, hours(1)));
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 4)}}}).ok());
  // Pod 0 fits on node 1; pod 1 wants GPU 3 of node 0, which job 1 holds.
  const Status taken =
      m.Apply(state::PlaceEdit{WorkloadId(2), {{N(1), GpuRange(0, 4)}, {N(0), GpuRange(3, 4)}}});
  EXPECT_EQ(taken.code(), StatusCode::kFailedPrecondition) << taken.message();
  // Nothing of it applied: node 1 is still all free, job 2 still pending.
  EXPECT_EQ(m.state().snapshot().free_gpus[1], GpuMask{0xFF});
  EXPECT_EQ(m.state().workload(WorkloadId(2))->state, WorkloadState::kPending);
  // Two pods of one decision on one GPU: the simulator caught this, the
  // server did not; the state refuses it for both.
  const Status twice =
      m.Apply(state::PlaceEdit{WorkloadId(2), {{N(1), GpuRange(0, 2)}, {N(1), GpuRange(1, 2)}}});
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument) << twice.message();
  EXPECT_TRUE(m.state().CheckInvariants().ok());
}

TEST(StateTest, NothingLandsOnAFailedOrCordonedNodeOrAFailedGpu) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 1, 1, hours(1)));
  ASSERT_TRUE(m.Apply(state::NodeHealthEdit{N(0), Health::kFailed}).ok());
  EXPECT_FALSE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 1)}}}).ok());
  ASSERT_TRUE(m.Apply(state::GpuFaultEdit{N(1), GpuRange(2, 1)}).ok());
  // The fault drains node 1 (cordoned) and takes GPU 2 out of its free set.
  EXPECT_TRUE(m.state().snapshot().cluster.node(N(1)).cordoned);
  EXPECT_EQ(m.state().snapshot().free_gpus[1], GpuMask{0xFB});
  EXPECT_FALSE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(1), GpuRange(0, 1)}}}).ok());
  ASSERT_TRUE(m.Apply(state::CordonEdit{N(1), false}).ok());
  EXPECT_FALSE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(1), GpuRange(2, 1)}}}).ok());
  EXPECT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(1), GpuRange(0, 1)}}}).ok());
}

TEST(StateTest, NothingLandsOnANodeWithoutAnAgentUntilItRegisters) {
  Snapshot s = testing::SimpleCluster(1, 1);
  StateMachine m = Machine(State(state::ClusterAwaitingAgents(s.cluster), s.queues, s.projects));
  Submit(m, Job(1, QueueId(0), 1, 1, hours(1)));
  const Status refused = m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 1)}}});
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("not ready"), std::string::npos) << refused.message();
  // Its agent registers: the node as it describes itself, ready.
  Node node = m.state().snapshot().cluster.node(N(0));
  node.health = Health::kHealthy;
  ASSERT_TRUE(m.Apply(state::RegisterNodeEdit{node, s.cluster.zones, s.cluster.racks}).ok());
  EXPECT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 1)}}}).ok());
}

TEST(StateTest, ReleaseSwapRemovesAndKeepsIndexesRight) {
  StateMachine m = Machine();
  for (uint64_t id = 1; id <= 4; ++id) Submit(m, Job(id, QueueId(0), 1, 2, hours(1)));
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(id), {{N(0), GpuRange(2 * (id - 1), 2)}}}).ok());
  }
  ASSERT_TRUE(m.Apply(state::ReleaseEdit{WorkloadId(1), WorkloadState::kSucceeded}).ok());
  ASSERT_TRUE(m.Apply(state::RequeueEdit{WorkloadId(3)}).ok());
  EXPECT_EQ(m.state().workload(WorkloadId(1)), nullptr);
  EXPECT_EQ(m.state().workload(WorkloadId(3))->state, WorkloadState::kPending);
  EXPECT_EQ(m.state().allocation(WorkloadId(4))->pods[0].gpus, GpuRange(6, 2));
  // Released: GPUs 0-1; requeued: GPUs 4-5. Held: 2-3 and 6-7.
  EXPECT_EQ(m.state().snapshot().free_gpus[0], GpuMask{0x33});
  EXPECT_TRUE(m.state().CheckInvariants().ok());
  // An edit for a workload that is gone is stale, not a crash.
  EXPECT_EQ(m.Apply(state::RequeueEdit{WorkloadId(1)}).code(), StatusCode::kFailedPrecondition);
}

TEST(LifecycleTest, AVictimPastItsGraceIsRequeuedOnce) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 1, 8, hours(1)));
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 8)}}}).ok());
  m.AdvanceTo(At(minutes(5)));
  ASSERT_TRUE(m.Apply(state::NoticeEdit{WorkloadId(1), WorkloadId(), PreemptCause::kPriority,
                                        At(minutes(5)) + kGrace})
                  .ok());
  EXPECT_EQ(m.state().workload(WorkloadId(1))->state, WorkloadState::kTerminating);
  // 29 s after the notice it still holds its GPUs; at 30 s it is gone.
  m.AdvanceTo(At(minutes(5) + seconds(29)));
  EXPECT_TRUE(m.Tick().empty());
  m.AdvanceTo(At(minutes(5) + seconds(30)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<state::RequeueEdit>(fired[0]));
  EXPECT_EQ(m.state().workload(WorkloadId(1))->state, WorkloadState::kPending);
  EXPECT_EQ(m.state().snapshot().free_gpus[0], GpuMask{0xFF});
  m.AdvanceTo(At(hours(1)));
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleTest, AVictimThatExitedEarlyLeavesAStaleTimer) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 1, 8, hours(1)));
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 8)}}}).ok());
  ASSERT_TRUE(m.Apply(state::NoticeEdit{WorkloadId(1), WorkloadId(), PreemptCause::kPriority, At(kGrace)}).ok());
  m.AdvanceTo(At(seconds(3)));
  ASSERT_TRUE(m.Apply(state::RequeueEdit{WorkloadId(1)}).ok());  // it saved and exited
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(1), GpuRange(0, 8)}}}).ok());
  // Placed again on node 1: the first notice's deadline must not stop it.
  m.AdvanceTo(At(minutes(1)));
  EXPECT_TRUE(m.Tick().empty());
  EXPECT_EQ(m.state().workload(WorkloadId(1))->state, WorkloadState::kRunning);
}

TEST(LifecycleTest, DebugSessionEndsExactlyAtItsMaxRuntime) {
  StateMachine m = Machine();
  Workload dbg = Job(1, QueueId(0), 1, 1, Duration(0));
  dbg.kind = WorkloadKind::kDebug;
  dbg.debug.max_runtime = minutes(60);
  Submit(m, dbg);
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 1)}}}).ok());
  // Notice one grace (30 s) ahead: at 59:30, with the deadline at 60:00.
  m.AdvanceTo(At(minutes(59) + seconds(29)));
  EXPECT_TRUE(m.Tick().empty());
  m.AdvanceTo(At(minutes(59) + seconds(30)));
  std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& notice = std::get<state::NoticeEdit>(fired[0]);
  EXPECT_EQ(notice.cause, PreemptCause::kMaxRuntime);
  EXPECT_EQ(notice.grace_deadline, At(minutes(60)));
  EXPECT_FALSE(notice.requeue);
  // It ends for good, not back in the queue.
  m.AdvanceTo(At(minutes(60)));
  fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<state::ReleaseEdit>(fired[0]).final_state, WorkloadState::kCancelled);
  EXPECT_EQ(m.state().workload(WorkloadId(1)), nullptr);
}

TEST(LifecycleTest, MaxRuntimeZeroMeansUnlimited) {
  StateMachine m = Machine();
  Workload dbg = Job(1, QueueId(0), 1, 1, Duration(0));
  dbg.kind = WorkloadKind::kDebug;
  dbg.debug.max_runtime = Duration(0);
  Submit(m, dbg);
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 1)}}}).ok());
  m.AdvanceTo(At(hours(100)));
  EXPECT_TRUE(m.Tick().empty());
  EXPECT_EQ(m.state().workload(WorkloadId(1))->state, WorkloadState::kRunning);
}

TEST(LifecycleTest, ShrunkPodsLeaveAtTheirDeadline) {
  StateMachine m = Machine();
  Workload elastic = Job(1, QueueId(0), 4, 2, hours(1));
  elastic.min_pods = 2;
  elastic.max_pods = 4;
  Submit(m, elastic);
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 2)}, {N(0), GpuRange(2, 2)},
                                                       {N(1), GpuRange(0, 2)}, {N(1), GpuRange(2, 2)}}})
                  .ok());
  ASSERT_TRUE(m.Apply(state::ShrinkEdit{WorkloadId(1), {{N(1), GpuRange(0, 2)}, {N(1), GpuRange(2, 2)}},
                                        WorkloadId(), At(kGrace)})
                  .ok());
  // Leaving pods hold their GPUs until they go.
  EXPECT_EQ(m.state().allocation(WorkloadId(1))->leaving.size(), 2u);
  EXPECT_EQ(m.state().snapshot().free_gpus[1], GpuMask{0xF0});
  m.AdvanceTo(At(kGrace));
  EXPECT_EQ(m.Tick().size(), 2u);
  EXPECT_EQ(m.state().allocation(WorkloadId(1))->pods.size(), 2u);
  EXPECT_TRUE(m.state().allocation(WorkloadId(1))->leaving.empty());
  EXPECT_EQ(m.state().snapshot().free_gpus[1], GpuMask{0xFF});
  EXPECT_TRUE(m.state().CheckInvariants().ok());
}

TEST(ApplierTest, OneDecisionPerWorkloadPerPass) {
  StateMachine m = Machine();
  Workload elastic = Job(1, QueueId(0), 4, 2, hours(1));
  elastic.min_pods = 2;
  elastic.max_pods = 4;
  Submit(m, elastic);
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 2)}, {N(0), GpuRange(2, 2)},
                                                       {N(0), GpuRange(4, 2)}, {N(0), GpuRange(6, 2)}}})
                  .ok());
  // The double decision of issue #9 item 4: evict and shrink the same job.
  Decisions d;
  d.preempts.push_back({WorkloadId(1), WorkloadId(2), PreemptCause::kPriority, Time(), At(kGrace), 0, ""});
  ResizeDecision shrink;
  shrink.workload = WorkloadId(1);
  shrink.from_pods = 4;
  shrink.to_pods = 2;
  shrink.removed = {{N(0), GpuRange(4, 2)}, {N(0), GpuRange(6, 2)}};
  d.resizes.push_back(shrink);
  const state::ApplyOutcome out = m.ApplyDecisions(d);
  ASSERT_EQ(out.applied.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<state::NoticeEdit>(out.applied[0]));
  ASSERT_EQ(out.refused.size(), 1u);
  EXPECT_EQ(out.refused[0].kind, "resize");
  EXPECT_TRUE(m.state().allocation(WorkloadId(1))->leaving.empty());
}

TEST(ApplierTest, AGraceInThePastBecomesTheDefault) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 1, 1, hours(1)));
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 1)}}}).ok());
  m.AdvanceTo(At(minutes(10)));
  Decisions d;
  d.preempts.push_back({WorkloadId(1), WorkloadId(), PreemptCause::kPriority, Time(), At(minutes(1)), 0, ""});
  ASSERT_EQ(m.ApplyDecisions(d).applied.size(), 1u);
  // 10:00 + 30 s of default grace.
  EXPECT_EQ(m.state().allocation(WorkloadId(1))->grace_deadline, At(minutes(10) + kGrace));
}

TEST(ApplierTest, RejectReleasesOnlyAPendingWorkload) {
  StateMachine m = Machine();
  Submit(m, Job(1, QueueId(0), 1, 1, hours(1)));
  Submit(m, Job(2, QueueId(0), 1, 1, hours(1)));
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(2), {{N(0), GpuRange(0, 1)}}}).ok());
  Decisions d;
  d.rejects.push_back({WorkloadId(1), ReasonCode::kDeadline, "late"});
  d.rejects.push_back({WorkloadId(2), ReasonCode::kDeadline, "late"});
  const state::ApplyOutcome out = m.ApplyDecisions(d);
  ASSERT_EQ(out.applied.size(), 1u);
  EXPECT_EQ(m.state().workload(WorkloadId(1)), nullptr);
  EXPECT_EQ(m.state().workload(WorkloadId(2))->state, WorkloadState::kRunning);
}

// What the journal holds rebuilds the same state: every edit the machine
// applied, replayed in order at its time on a fresh state.
TEST(JournalTest, ReplayRebuildsTheLiveState) {
  std::vector<JournalEntry> journal;
  StateMachine m = Machine();
  m.set_sink([&](Time at, state::EditOrigin origin, const Edit& e) { journal.push_back({at, origin, e}); });
  Workload elastic = Job(3, QueueId(0), 4, 2, hours(1));
  elastic.min_pods = 2;
  elastic.max_pods = 4;
  Submit(m, Job(1, QueueId(0), 1, 8, hours(1)));
  Submit(m, Job(2, QueueId(0), 1, 4, hours(1)));
  Submit(m, elastic);
  Decisions d;
  d.places.push_back({WorkloadId(1), {{N(0), GpuRange(0, 8)}}, false});
  d.places.push_back({WorkloadId(3), {{N(1), GpuRange(0, 2)}, {N(1), GpuRange(2, 2)}}, true});
  (void)m.ApplyDecisions(d);
  m.AdvanceTo(At(minutes(2)));
  ASSERT_TRUE(m.Apply(state::CheckpointEdit{WorkloadId(3), At(minutes(1))}).ok());
  Decisions e;
  e.preempts.push_back({WorkloadId(1), WorkloadId(2), PreemptCause::kPriority, At(minutes(2)),
                        At(minutes(2) + kGrace), 120, ""});
  (void)m.ApplyDecisions(e);
  m.AdvanceTo(At(minutes(3)));
  (void)m.Tick();  // job 1 requeued
  ASSERT_TRUE(m.Apply(state::LendEdit{N(1)}).ok());

  State replayed = TwoNodes();
  for (const JournalEntry& entry : journal) {
    replayed.AdvanceTo(entry.at);
    ASSERT_TRUE(replayed.Apply(entry.edit).ok()) << state::EditName(entry.edit);
  }
  const Snapshot& a = m.state().snapshot();
  const Snapshot& b = replayed.snapshot();
  ASSERT_EQ(a.workloads.size(), b.workloads.size());
  for (size_t i = 0; i < a.workloads.size(); ++i) {
    EXPECT_EQ(a.workloads[i].id, b.workloads[i].id);
    EXPECT_EQ(a.workloads[i].state, b.workloads[i].state);
  }
  ASSERT_EQ(a.allocations.size(), b.allocations.size());
  for (size_t i = 0; i < a.allocations.size(); ++i) {
    EXPECT_EQ(a.allocations[i].workload, b.allocations[i].workload);
    EXPECT_EQ(a.allocations[i].pods, b.allocations[i].pods);
    EXPECT_EQ(a.allocations[i].last_checkpoint, b.allocations[i].last_checkpoint);
    EXPECT_EQ(a.allocations[i].terminating, b.allocations[i].terminating);
  }
  EXPECT_EQ(a.free_gpus, b.free_gpus);
  EXPECT_EQ(a.lent_nodes, b.lent_nodes);
  EXPECT_EQ(m.state().workload(WorkloadId(1))->state, WorkloadState::kPending);
  EXPECT_EQ(replayed.allocation(WorkloadId(3))->last_checkpoint, At(minutes(1)));
}

}  // namespace
}  // namespace tidal
