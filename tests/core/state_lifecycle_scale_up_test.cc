// The scale-up timer (core/state/lifecycle.h): a service's target rising
// while it runs opens a scale-up in the state; its replicas' readiness
// (ReplicaReadyEdit) resolves it; the Lifecycle ends it, kReady or, at
// requested_at + scale_up_timeout, kTimedOut. Engine-style: one
// StateMachine, a hand-moved clock, and the edits each Tick makes.
#include <gtest/gtest.h>

#include "core/state/state_machine.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using state::Edit;
using state::ScaleUpEndEdit;
using state::ScaleUpResult;
using state::State;
using state::StateMachine;
using testing::GpuRange;
using testing::Job;

constexpr Duration kTimeout = minutes(10);

NodeId N(uint32_t i) { return NodeId(i); }
Time At(Duration d) { return Time(d); }
WorkloadId W(uint64_t i) { return WorkloadId(i); }
PodPlacement Pod(uint32_t gpu) { return {N(0), GpuRange(gpu, 1)}; }

StateMachine Machine() {
  Snapshot s = testing::SimpleCluster(1, 2);  // two 8-GPU nodes
  return StateMachine(State(s.cluster, s.queues, s.projects),
                      state::LifecycleOptions{seconds(30), Duration(0), kTimeout});
}

void Ok(StateMachine& m, const Edit& e) { ASSERT_TRUE(m.Apply(e).ok()) << state::EditName(e); }

// A service of one 1-GPU replica on node 0 GPU 0, ready, at t=0; its target
// rises to 3 at t=60 s: a scale-up from 1 to 3, requested at 60 s.
StateMachine ScalingService() {
  StateMachine m = Machine();
  Workload w = Job(1, QueueId(0), 1, 1, Duration(0));
  w.kind = WorkloadKind::kInference;
  Ok(m, state::SubmitEdit{w});
  Ok(m, state::PlaceEdit{W(1), {Pod(0)}});
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(0)});
  m.AdvanceTo(At(seconds(60)));
  Ok(m, state::SetTargetEdit{W(1), 3});
  Ok(m, state::GrowEdit{W(1), {Pod(1), Pod(2)}});
  return m;
}

TEST(LifecycleScaleUpTest, ARisingTargetOfARunningServiceOpensAScaleUp) {
  StateMachine m = ScalingService();
  const state::PendingScaleUp* su = m.state().scale_up(W(1));
  ASSERT_NE(su, nullptr);
  EXPECT_EQ(su->from, 1);
  EXPECT_EQ(su->to, 3);
  EXPECT_EQ(su->requested_at, At(seconds(60)));
  EXPECT_EQ(su->ready_at, kInfiniteFuture);
  EXPECT_EQ(m.state().ready_replicas(W(1)), 1);
  // Not ready and not due (60 s + 10 min = 660 s): nothing ends.
  m.AdvanceTo(At(seconds(300)));
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleScaleUpTest, TheDeploymentIsNotAScaleUp) {
  StateMachine m = Machine();
  Workload w = Job(1, QueueId(0), 1, 1, Duration(0));
  w.kind = WorkloadKind::kInference;
  Ok(m, state::SubmitEdit{w});
  // Its target rises before it holds anything: placing it is its deployment.
  Ok(m, state::SetTargetEdit{W(1), 2});
  EXPECT_EQ(m.state().scale_up(W(1)), nullptr);
}

TEST(LifecycleScaleUpTest, ReadyInTimeEndsReadyWithItsTimeToCapacity) {
  StateMachine m = ScalingService();
  // Replica 2 ready at 100 s, replica 3 at 150 s: 3 ready = the target,
  // 90 s after the request (150 - 60), within 600 s.
  m.AdvanceTo(At(seconds(100)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  EXPECT_EQ(m.state().scale_up(W(1))->ready_at, kInfiniteFuture);
  m.AdvanceTo(At(seconds(150)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(2)});
  EXPECT_EQ(m.state().scale_up(W(1))->ready_at, At(seconds(150)));
  // The next tick (at 155 s) ends it, with the instant it was ready.
  m.AdvanceTo(At(seconds(155)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& end = std::get<ScaleUpEndEdit>(fired[0]);
  EXPECT_EQ(end.workload, W(1));
  EXPECT_EQ(end.result, ScaleUpResult::kReady);
  EXPECT_EQ(end.from, 1);
  EXPECT_EQ(end.to, 3);
  EXPECT_EQ(end.requested_at, At(seconds(60)));
  EXPECT_EQ(end.ready_at - end.requested_at, seconds(90));
  EXPECT_EQ(m.state().scale_up(W(1)), nullptr);
  // Its timeout timer (660 s) is stale now: nothing fails later.
  m.AdvanceTo(At(seconds(700)));
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleScaleUpTest, NotReadyFailsExactlyAtItsTimeoutAndNotOneMsBefore) {
  StateMachine m = ScalingService();
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});  // 2 of 3 ready
  // Requested at 60 s, timeout 600 s: due at 660 s. At 659.999 s: nothing.
  m.AdvanceTo(At(seconds(660) - Duration(1)));
  EXPECT_TRUE(m.Tick().empty());
  ASSERT_NE(m.state().scale_up(W(1)), nullptr);
  m.AdvanceTo(At(seconds(660)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& end = std::get<ScaleUpEndEdit>(fired[0]);
  EXPECT_EQ(end.result, ScaleUpResult::kTimedOut);
  EXPECT_EQ(end.ready_at, kInfiniteFuture);
  EXPECT_EQ(m.state().scale_up(W(1)), nullptr);
  // The third replica ready later resolves nothing: it was judged.
  m.AdvanceTo(At(seconds(700)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(2)});
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleScaleUpTest, ReadyPastTheTimeoutWithNoTickBetweenStillTimesOut) {
  StateMachine m = ScalingService();
  // All ready at 661 s, 601 s after the request, and no tick since: the
  // judgment is by the instant, not by when the tick came.
  m.AdvanceTo(At(seconds(661)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(2)});
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& end = std::get<ScaleUpEndEdit>(fired[0]);
  EXPECT_EQ(end.result, ScaleUpResult::kTimedOut);
  EXPECT_EQ(end.ready_at, At(seconds(661)));
}

TEST(LifecycleScaleUpTest, TheReadyInstantIsDueSoAPassIsNotSkipped) {
  StateMachine m = ScalingService();
  EXPECT_EQ(m.lifecycle().next_deadline(), At(seconds(660)));
  m.AdvanceTo(At(seconds(100)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(2)});
  // A caller that skips a pass while no timer is due must not skip this one.
  EXPECT_EQ(m.lifecycle().next_deadline(), At(seconds(100)));
}

TEST(LifecycleScaleUpTest, ARiseWhileOpenRaisesItsGoalAndKeepsItsStart) {
  StateMachine m = ScalingService();
  m.AdvanceTo(At(seconds(120)));
  Ok(m, state::SetTargetEdit{W(1), 4});
  const state::PendingScaleUp* su = m.state().scale_up(W(1));
  ASSERT_NE(su, nullptr);
  EXPECT_EQ(su->to, 4);
  EXPECT_EQ(su->requested_at, At(seconds(60)));
  // A target lowered to 2 while 2 are ready: that is capacity now.
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  EXPECT_EQ(m.state().scale_up(W(1))->ready_at, kInfiniteFuture);
  m.AdvanceTo(At(seconds(130)));
  Ok(m, state::SetTargetEdit{W(1), 2});
  EXPECT_EQ(m.state().scale_up(W(1))->ready_at, At(seconds(130)));
  const std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).result, ScaleUpResult::kReady);
}

TEST(LifecycleScaleUpTest, AnExitedReplicaIsNoLongerReadyAndNotReadyCounts) {
  StateMachine m = ScalingService();
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  EXPECT_EQ(m.state().ready_replicas(W(1)), 2);
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1), /*ready=*/false});
  EXPECT_EQ(m.state().ready_replicas(W(1)), 1);
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  Ok(m, state::PodExitEdit{W(1), Pod(0)});
  EXPECT_EQ(m.state().ready_replicas(W(1)), 1);
  EXPECT_TRUE(m.state().CheckInvariants().ok());
  // A pod it does not hold cannot be ready.
  EXPECT_FALSE(m.Apply(state::ReplicaReadyEdit{W(1), Pod(5)}).ok());
}

TEST(LifecycleScaleUpTest, AReleasedServiceLeavesNoScaleUpToJudge) {
  StateMachine m = ScalingService();
  Ok(m, state::ReleaseEdit{W(1), WorkloadState::kCancelled});
  EXPECT_EQ(m.state().scale_up(W(1)), nullptr);
  m.AdvanceTo(At(seconds(700)));
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleScaleUpTest, ARestoredStateKeepsItsScaleUpAndItsTimer) {
  StateMachine m = ScalingService();
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  auto restored = State::Restore(m.state().snapshot(), m.state().extras());
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  StateMachine r(*std::move(restored), state::LifecycleOptions{seconds(30), Duration(0), kTimeout});
  EXPECT_EQ(r.state().ready_replicas(W(1)), 2);
  ASSERT_NE(r.state().scale_up(W(1)), nullptr);
  EXPECT_EQ(r.state().scale_up(W(1))->requested_at, At(seconds(60)));
  r.AdvanceTo(At(seconds(660)));
  const std::vector<Edit> fired = r.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).result, ScaleUpResult::kTimedOut);
}

}  // namespace
}  // namespace tidal
