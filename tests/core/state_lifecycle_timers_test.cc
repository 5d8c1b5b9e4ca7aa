// The lifecycle's world-facing timers (core/state/lifecycle.h): node lease
// loss, idle debug reclaim and the drain after a GPU fault. Engine-style: one StateMachine, a hand-moved
// clock, and the edits each Tick makes.
#include <gtest/gtest.h>

#include "core/state/state_machine.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using state::Edit;
using state::EndCause;
using state::State;
using state::StateMachine;
using testing::GpuRange;
using testing::Job;

constexpr Duration kGrace = seconds(30);
constexpr Duration kLease = seconds(30);

NodeId N(uint32_t i) { return NodeId(i); }
Time At(Duration d) { return Time(d); }
WorkloadId W(uint64_t i) { return WorkloadId(i); }

StateMachine Machine() {
  Snapshot s = testing::SimpleCluster(1, 2);  // two 8-GPU nodes
  return StateMachine(State(s.cluster, s.queues, s.projects), state::LifecycleOptions{kGrace, Duration(0)});
}

void Ok(StateMachine& m, const Edit& e) { ASSERT_TRUE(m.Apply(e).ok()) << state::EditName(e); }

Workload Debug(uint64_t id) {
  Workload w = Job(id, QueueId(0), 1, 1, Duration(0));
  w.kind = WorkloadKind::kDebug;
  w.debug.max_runtime = Duration(0);  // unlimited: only the idle timer ends it
  return w;
}

TEST(LifecycleLeaseTest, ANodePastItsLeaseIsLostAndItsWorkRequeued) {
  StateMachine m = Machine();
  Ok(m, state::SubmitEdit{Job(1, QueueId(0), 2, 4, hours(1))});  // a gang on both nodes
  Ok(m, state::SubmitEdit{Job(2, QueueId(0), 1, 4, hours(1))});  // on node 1 only
  Ok(m, state::PlaceEdit{W(1), {{N(0), GpuRange(0, 4)}, {N(1), GpuRange(0, 4)}}});
  Ok(m, state::PlaceEdit{W(2), {{N(1), GpuRange(4, 4)}}});
  // Node 0's last heartbeat at t=0: its lease holds through 0 + 30 s.
  Ok(m, state::LeaseEdit{N(0), At(kLease)});
  // At exactly 30 s the lease still holds ("more than a lease since the
  // last heartbeat" is lost, as the server always counted).
  m.AdvanceTo(At(kLease));
  EXPECT_TRUE(m.Tick().empty());
  // 1 ms later it ran out: node 0 not ready, then the gang with a pod there
  // requeued whole, typed cause node_lost. Job 2 (node 1 only) keeps running.
  m.AdvanceTo(At(kLease + Duration(1)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 2u);
  const auto& health = std::get<state::NodeHealthEdit>(fired[0]);
  EXPECT_EQ(health.node, N(0));
  EXPECT_EQ(health.health, Health::kNotReady);
  const auto& requeue = std::get<state::RequeueEdit>(fired[1]);
  EXPECT_EQ(requeue.workload, W(1));
  EXPECT_EQ(requeue.cause, EndCause::kNodeLost);
  EXPECT_EQ(m.state().workload(W(1))->state, WorkloadState::kPending);
  EXPECT_EQ(m.state().workload(W(2))->state, WorkloadState::kRunning);
  // Node 1's 4 GPUs of the gang are free again: 0x0F free, 0xF0 job 2's.
  EXPECT_EQ(m.state().snapshot().free_gpus[1], GpuMask{0x0F});
  EXPECT_FALSE(m.state().snapshot().cluster.node(N(0)).takes_work());
  EXPECT_TRUE(m.state().CheckInvariants().ok());
  // Once lost, it is not lost again.
  m.AdvanceTo(At(hours(1)));
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleLeaseTest, ARenewedLeaseLeavesTheOldExpiryStale) {
  StateMachine m = Machine();
  Ok(m, state::LeaseEdit{N(0), At(kLease)});
  // Renewed at t=20 s (a heartbeat at 20 s): holds through 50 s.
  m.AdvanceTo(At(seconds(20)));
  Ok(m, state::LeaseEdit{N(0), At(seconds(20) + kLease)});
  m.AdvanceTo(At(seconds(50)));
  EXPECT_TRUE(m.Tick().empty());  // the 30 s expiry is stale, 50 s still holds
  m.AdvanceTo(At(seconds(50) + Duration(1)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<state::NodeHealthEdit>(fired[0]).health, Health::kNotReady);
}

TEST(LifecycleLeaseTest, OnALostNodeLeavingPodsExitAndAStopForGoodEnds) {
  StateMachine m = Machine();
  Workload elastic = Job(1, QueueId(0), 3, 2, hours(1));
  elastic.min_pods = 1;
  elastic.max_pods = 3;
  Ok(m, state::SubmitEdit{elastic});
  Ok(m, state::SubmitEdit{Debug(2)});
  Ok(m, state::PlaceEdit{W(1), {{N(1), GpuRange(0, 2)}, {N(0), GpuRange(0, 2)}, {N(0), GpuRange(2, 2)}}});
  Ok(m, state::PlaceEdit{W(2), {{N(0), GpuRange(7, 1)}}});
  // Both of job 1's pods on node 0 are leaving (a shrink, deadline 5 min);
  // job 2 was told to stop for good (a max-runtime notice, deadline 5 min).
  Ok(m, state::ShrinkEdit{W(1), {{N(0), GpuRange(0, 2)}, {N(0), GpuRange(2, 2)}}, WorkloadId(), At(minutes(5))});
  Ok(m, state::NoticeEdit{W(2), WorkloadId(), PreemptCause::kMaxRuntime, At(minutes(5)), 0, false});
  Ok(m, state::LeaseEdit{N(0), At(kLease)});
  m.AdvanceTo(At(kLease + Duration(1)));
  const std::vector<Edit> fired = m.Tick();
  // Node 0 not ready; job 1's two leaving pods there exit (it keeps its pod
  // on node 1); job 2 ends as cancelled, not back in the queue.
  ASSERT_EQ(fired.size(), 4u);
  EXPECT_TRUE(std::holds_alternative<state::NodeHealthEdit>(fired[0]));
  EXPECT_TRUE(std::holds_alternative<state::PodExitEdit>(fired[1]));
  EXPECT_TRUE(std::holds_alternative<state::PodExitEdit>(fired[2]));
  const auto& release = std::get<state::ReleaseEdit>(fired[3]);
  EXPECT_EQ(release.workload, W(2));
  EXPECT_EQ(release.final_state, WorkloadState::kCancelled);
  EXPECT_EQ(release.cause, EndCause::kNodeLost);
  ASSERT_NE(m.state().allocation(W(1)), nullptr);
  EXPECT_EQ(m.state().allocation(W(1))->pods.size(), 1u);
  EXPECT_EQ(m.state().workload(W(2)), nullptr);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
}

TEST(LifecycleDrainTest, AGpuFaultDrainsEveryWorkloadStayingOnItsNodeAtTheNextTick) {
  StateMachine m = Machine();
  Workload elastic = Job(1, QueueId(0), 3, 2, hours(1));
  elastic.min_pods = 1;
  elastic.max_pods = 3;
  Workload service = Job(5, QueueId(0), 2, 1, Duration(0));
  service.kind = WorkloadKind::kInference;
  service.min_pods = 1;
  Ok(m, state::SubmitEdit{elastic});
  Ok(m, state::SubmitEdit{Job(2, QueueId(0), 2, 2, hours(1))});  // a gang across both nodes
  Ok(m, state::SubmitEdit{Job(3, QueueId(0), 1, 2, hours(1))});  // node 1 only
  Ok(m, state::SubmitEdit{Job(4, QueueId(0), 1, 1, hours(1))});  // on node 0, already told to stop
  Ok(m, state::SubmitEdit{service});                             // a replica on each node
  Ok(m, state::PlaceEdit{W(1), {{N(1), GpuRange(0, 2)}, {N(0), GpuRange(0, 2)}, {N(0), GpuRange(2, 2)}}});
  Ok(m, state::PlaceEdit{W(2), {{N(0), GpuRange(4, 2)}, {N(1), GpuRange(2, 2)}}});
  Ok(m, state::PlaceEdit{W(3), {{N(1), GpuRange(4, 2)}}});
  Ok(m, state::PlaceEdit{W(4), {{N(0), GpuRange(7, 1)}}});
  Ok(m, state::PlaceEdit{W(5), {{N(0), GpuRange(6, 1)}, {N(1), GpuRange(6, 1)}}});
  // Job 1's pods on node 0 are leaving (a shrink); job 4 has notice already.
  Ok(m, state::ShrinkEdit{W(1), {{N(0), GpuRange(0, 2)}, {N(0), GpuRange(2, 2)}}, WorkloadId(), At(minutes(5))});
  Ok(m, state::NoticeEdit{W(4), WorkloadId(), PreemptCause::kPriority, At(minutes(5)), 0, true});
  // GPU 6 of node 0 (the service's replica there) fails at 100 s.
  m.AdvanceTo(At(seconds(100)));
  Ok(m, state::GpuFaultEdit{N(0), GpuRange(6, 1)});
  EXPECT_EQ(m.lifecycle().next_deadline(), At(seconds(100)));
  // The tick at 110 s, grace 110 + 30 = 140 s:
  //  - the gang (job 2) cannot run without its pod there: notice, cause
  //    drain, requeued; lost work 4 GPUs x 110 s since its start (no
  //    checkpoint) = 440 GPU-s;
  //  - the service (job 5) runs on with its other replica: only the one on
  //    node 0 leaves (a shrink), to grow back elsewhere.
  m.AdvanceTo(At(seconds(110)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 2u);
  const auto& drain = std::get<state::NoticeEdit>(fired[0]);
  EXPECT_EQ(drain.workload, W(2));
  EXPECT_EQ(drain.cause, PreemptCause::kDrain);
  EXPECT_EQ(drain.grace_deadline, At(seconds(140)));
  EXPECT_DOUBLE_EQ(drain.lost_gpu_seconds, 440);
  EXPECT_TRUE(drain.requeue);
  const auto& shrink = std::get<state::ShrinkEdit>(fired[1]);
  EXPECT_EQ(shrink.workload, W(5));
  ASSERT_EQ(shrink.pods.size(), 1u);
  EXPECT_EQ(shrink.pods[0].node, N(0));
  EXPECT_EQ(shrink.grace_deadline, At(seconds(140)));
  EXPECT_TRUE(m.state().snapshot().cluster.node(N(0)).cordoned);
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleDrainTest, ANodeUncordonedBeforeTheTickIsNotDrained) {
  StateMachine m = Machine();
  Ok(m, state::SubmitEdit{Job(1, QueueId(0), 1, 2, hours(1))});
  Ok(m, state::PlaceEdit{W(1), {{N(0), GpuRange(0, 2)}}});
  Ok(m, state::GpuFaultEdit{N(0), GpuRange(6, 1)});
  Ok(m, state::CordonEdit{N(0), false});  // an operator judged the fault harmless
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleLeaseTest, ANodeWithoutALeaseIsNeverLost) {
  StateMachine m = Machine();
  m.AdvanceTo(At(hours(1000)));
  EXPECT_TRUE(m.Tick().empty());
  Ok(m, state::LeaseEdit{N(1), kInfiniteFuture});
  m.AdvanceTo(At(hours(2000)));
  EXPECT_TRUE(m.Tick().empty());
  EXPECT_EQ(m.state().lease_until(N(1)), kInfiniteFuture);
}

TEST(LifecycleIdleTest, ADebugSessionIdleUntilItsReclaimTimeGetsNotice) {
  StateMachine m = Machine();
  Ok(m, state::SubmitEdit{Debug(1)});
  Ok(m, state::PlaceEdit{W(1), {{N(0), GpuRange(0, 1)}}});
  // Idle from t=10 min; the server's idle limit of 30 min gives reclaim at 40.
  m.AdvanceTo(At(minutes(10)));
  Ok(m, state::IdleEdit{W(1), At(minutes(40))});
  m.AdvanceTo(At(minutes(40) - Duration(1)));
  EXPECT_TRUE(m.Tick().empty());
  m.AdvanceTo(At(minutes(40)));
  std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& notice = std::get<state::NoticeEdit>(fired[0]);
  EXPECT_EQ(notice.cause, PreemptCause::kIdle);
  EXPECT_FALSE(notice.requeue);
  // Grace from the reclaim: 40:00 + 30 s.
  EXPECT_EQ(notice.grace_deadline, At(minutes(40) + kGrace));
  // 1 GPU x 40 min since its start (its last checkpoint): 2400 GPU-seconds.
  EXPECT_DOUBLE_EQ(notice.lost_gpu_seconds, 2400.0);
  // It does not exit: at the grace deadline it ends for good (cancelled).
  m.AdvanceTo(At(minutes(40) + kGrace));
  fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& release = std::get<state::ReleaseEdit>(fired[0]);
  EXPECT_EQ(release.final_state, WorkloadState::kCancelled);
  EXPECT_EQ(release.cause, EndCause::kGraceExpired);
  EXPECT_EQ(m.state().workload(W(1)), nullptr);
}

TEST(LifecycleIdleTest, BusyAgainCancelsTheReclaim) {
  StateMachine m = Machine();
  Ok(m, state::SubmitEdit{Debug(1)});
  Ok(m, state::PlaceEdit{W(1), {{N(0), GpuRange(0, 1)}}});
  Ok(m, state::IdleEdit{W(1), At(minutes(30))});
  // Busy at 20 min, idle again at 25: reclaim at 25 + 30 = 55, not at 30.
  m.AdvanceTo(At(minutes(20)));
  Ok(m, state::IdleEdit{W(1), kInfiniteFuture});
  m.AdvanceTo(At(minutes(25)));
  Ok(m, state::IdleEdit{W(1), At(minutes(55))});
  m.AdvanceTo(At(minutes(54)));
  EXPECT_TRUE(m.Tick().empty());
  m.AdvanceTo(At(minutes(55)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<state::NoticeEdit>(fired[0]).cause, PreemptCause::kIdle);
}

TEST(LifecycleIdleTest, OnlyDebugSessionsAreReclaimedAndANewRunStartsBusy) {
  StateMachine m = Machine();
  Ok(m, state::SubmitEdit{Job(1, QueueId(0), 1, 1, hours(10))});  // training
  Ok(m, state::SubmitEdit{Debug(2)});
  Ok(m, state::PlaceEdit{W(1), {{N(0), GpuRange(0, 1)}}});
  Ok(m, state::PlaceEdit{W(2), {{N(1), GpuRange(0, 1)}}});
  Ok(m, state::IdleEdit{W(1), At(minutes(30))});
  Ok(m, state::IdleEdit{W(2), At(minutes(30))});
  // The debug session is requeued at 10 min (its node was drained, say) and
  // placed again: the new run is not idle, so the old reclaim is stale.
  m.AdvanceTo(At(minutes(10)));
  Ok(m, state::RequeueEdit{W(2)});
  Ok(m, state::PlaceEdit{W(2), {{N(1), GpuRange(0, 1)}}});
  EXPECT_EQ(m.state().idle_reclaim_at(W(2)), kInfiniteFuture);
  m.AdvanceTo(At(hours(5)));
  EXPECT_TRUE(m.Tick().empty());
  EXPECT_EQ(m.state().workload(W(1))->state, WorkloadState::kRunning);
  EXPECT_EQ(m.state().workload(W(2))->state, WorkloadState::kRunning);
}

TEST(LifecycleTimersTest, AStateBuiltMidStoryArmsItsLeasesAndIdleTimers) {
  // A machine built on a state that already holds a lease and an idle
  // session (a dry run's copy) fires them as the original would.
  StateMachine m = Machine();
  Ok(m, state::SubmitEdit{Debug(1)});
  Ok(m, state::PlaceEdit{W(1), {{N(1), GpuRange(0, 1)}}});
  Ok(m, state::IdleEdit{W(1), At(minutes(30))});
  Ok(m, state::LeaseEdit{N(0), At(kLease)});
  StateMachine copy(m.state(), state::LifecycleOptions{kGrace, Duration(0)});
  copy.AdvanceTo(At(minutes(30)));
  const std::vector<Edit> fired = copy.Tick();
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(std::get<state::NodeHealthEdit>(fired[0]).node, N(0));
  EXPECT_EQ(std::get<state::NoticeEdit>(fired[1]).cause, PreemptCause::kIdle);
}

}  // namespace
}  // namespace tidal
