// The scale-up timer (core/state/lifecycle.h): a service's target rising
// while it runs opens a scale-up in the state (each rise its own); its replicas' readiness
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

// A service of one 1-GPU replica on node 0 GPU 0, ready, at t=0; the clock
// at t=60 s.
StateMachine RunningService() {
  StateMachine m = Machine();
  Workload w = Job(1, QueueId(0), 1, 1, Duration(0));
  w.kind = WorkloadKind::kInference;
  Ok(m, state::SubmitEdit{w});
  Ok(m, state::PlaceEdit{W(1), {Pod(0)}});
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(0)});
  m.AdvanceTo(At(seconds(60)));
  return m;
}

// RunningService, whose target rises to 3 at t=60 s: a scale-up from 1 to
// 3, requested at 60 s.
StateMachine ScalingService() {
  StateMachine m = RunningService();
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

// Spares (Workload::spare_pods) are not asked for: RunningService's target
// 1 -> 3 with 2 spares is no scale-up. Demand 1 -> 2 later (target 3 with 1
// spare) is one, to a demand of 2, and a spare being ready (2 ready
// replicas >= 2) makes it ready at once: time to capacity 0.
TEST(LifecycleScaleUpTest, SparesOpenNoScaleUpAndReadyOnesAnswerADemandAtOnce) {
  StateMachine m = RunningService();
  Ok(m, state::SetTargetEdit{W(1), 3, 0, 0, 2});
  EXPECT_EQ(m.state().scale_up(W(1)), nullptr);
  Ok(m, state::GrowEdit{W(1), {Pod(1), Pod(2)}});
  m.AdvanceTo(At(seconds(300)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  Ok(m, state::SetTargetEdit{W(1), 3, 0, 0, 1});
  const state::PendingScaleUp* su = m.state().scale_up(W(1));
  ASSERT_NE(su, nullptr);
  EXPECT_EQ(su->to, 2);
  EXPECT_EQ(su->ready_at, At(seconds(300)));
  // Spares beyond the target are refused.
  EXPECT_FALSE(m.Apply(state::SetTargetEdit{W(1), 3, 0, 0, 4}).ok());
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

TEST(LifecycleScaleUpTest, ARiseWhileOneIsOpenIsAScaleUpOfItsOwn) {
  StateMachine m = ScalingService();
  // At 120 s the target rises to 4 while 1 -> 3 (requested at 60 s) waits:
  // a second scale-up, 3 -> 4 (it holds 3 pods), timed from 120 s.
  m.AdvanceTo(At(seconds(120)));
  Ok(m, state::SetTargetEdit{W(1), 4});
  Ok(m, state::GrowEdit{W(1), {Pod(3)}});
  const std::vector<state::PendingScaleUp> open = m.state().open_scale_ups(W(1));
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open[0].requested_at, At(seconds(60)));
  EXPECT_EQ(open[0].to, 3);
  EXPECT_EQ(open[1].requested_at, At(seconds(120)));
  EXPECT_EQ(open[1].from, 3);
  EXPECT_EQ(open[1].to, 4);
  EXPECT_EQ(m.state().scale_up(W(1))->requested_at, At(seconds(120)));  // the newest
  // 3 ready at 150 s: the first is ready (90 s after its request); the
  // second still waits for its fourth replica.
  m.AdvanceTo(At(seconds(150)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(2)});
  std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& first = std::get<ScaleUpEndEdit>(fired[0]);
  EXPECT_EQ(first.result, ScaleUpResult::kReady);
  EXPECT_EQ(first.requested_at, At(seconds(60)));
  EXPECT_EQ(first.ready_at - first.requested_at, seconds(90));
  // The target lowered to 3 at 170 s: 3 ready is the second's capacity
  // now, 50 s after its request.
  m.AdvanceTo(At(seconds(170)));
  Ok(m, state::SetTargetEdit{W(1), 3});
  fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& second = std::get<ScaleUpEndEdit>(fired[0]);
  EXPECT_EQ(second.result, ScaleUpResult::kReady);
  EXPECT_EQ(second.requested_at, At(seconds(120)));
  EXPECT_EQ(second.ready_at - second.requested_at, seconds(50));
  EXPECT_EQ(m.state().scale_up(W(1)), nullptr);
  // Both timeouts (660 s, 720 s) are stale now.
  m.AdvanceTo(At(seconds(800)));
  EXPECT_TRUE(m.Tick().empty());
}

TEST(LifecycleScaleUpTest, TwoRisesInOneInstantAreOneScaleUp) {
  StateMachine m = ScalingService();
  Ok(m, state::SetTargetEdit{W(1), 4});  // still at 60 s
  const std::vector<state::PendingScaleUp> open = m.state().open_scale_ups(W(1));
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].to, 4);
  // Armed twice for 660 s, it ends once.
  m.AdvanceTo(At(seconds(660)));
  EXPECT_EQ(m.Tick().size(), 1u);
}

TEST(LifecycleScaleUpTest, EachOpenScaleUpTimesOutAtItsOwnDeadline) {
  StateMachine m = ScalingService();
  m.AdvanceTo(At(seconds(120)));
  Ok(m, state::SetTargetEdit{W(1), 4});
  // Due at 60 + 600 = 660 s and 120 + 600 = 720 s.
  m.AdvanceTo(At(seconds(660)));
  std::vector<Edit> fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).requested_at, At(seconds(60)));
  m.AdvanceTo(At(seconds(720) - Duration(1)));
  EXPECT_TRUE(m.Tick().empty());
  m.AdvanceTo(At(seconds(720)));
  fired = m.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).result, ScaleUpResult::kTimedOut);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).requested_at, At(seconds(120)));
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

// A server restarting mid scale-up (RestartedState, as the server and a
// replay of its journal restart): the scale-up stays open with its request
// time, but not ready, since a restarted state holds no ready replicas.
StateMachine Restarted(const StateMachine& before, Time at) {
  Snapshot kept = before.state().snapshot();
  kept.now = at;
  auto restarted = state::RestartedState(kept, {true, true}, before.state().extras().scale_ups);
  EXPECT_TRUE(restarted.ok()) << restarted.status().message();
  return StateMachine(*std::move(restarted), state::LifecycleOptions{seconds(30), Duration(0), kTimeout});
}

TEST(LifecycleScaleUpTest, AScaleUpOpenAtARestartIsJudgedAfterIt) {
  StateMachine m = ScalingService();
  m.AdvanceTo(At(seconds(100)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  // Restart at 120 s; the server re-reports the ready replicas (0 and 1),
  // and replica 2 is ready at 200 s: capacity 140 s after the request.
  StateMachine r = Restarted(m, At(seconds(120)));
  ASSERT_NE(r.state().scale_up(W(1)), nullptr);
  EXPECT_EQ(r.state().scale_up(W(1))->requested_at, At(seconds(60)));
  EXPECT_EQ(r.state().ready_replicas(W(1)), 0);
  Ok(r, state::ReplicaReadyEdit{W(1), Pod(0)});
  Ok(r, state::ReplicaReadyEdit{W(1), Pod(1)});
  EXPECT_TRUE(r.Tick().empty());
  r.AdvanceTo(At(seconds(200)));
  Ok(r, state::ReplicaReadyEdit{W(1), Pod(2)});
  const std::vector<Edit> fired = r.Tick();
  ASSERT_EQ(fired.size(), 1u);
  const auto& end = std::get<ScaleUpEndEdit>(fired[0]);
  EXPECT_EQ(end.result, ScaleUpResult::kReady);
  EXPECT_EQ(end.ready_at - end.requested_at, seconds(140));
}

TEST(LifecycleScaleUpTest, AScaleUpReadyButUnjudgedAtARestartIsReadyAgainAtIt) {
  StateMachine m = ScalingService();
  m.AdvanceTo(At(seconds(100)));
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(1)});
  Ok(m, state::ReplicaReadyEdit{W(1), Pod(2)});  // ready at 100 s, no tick yet
  StateMachine r = Restarted(m, At(seconds(120)));
  EXPECT_EQ(r.state().scale_up(W(1))->ready_at, kInfiniteFuture);
  for (uint32_t g : {0u, 1u, 2u}) Ok(r, state::ReplicaReadyEdit{W(1), Pod(g)});
  // Ready again at the restart (120 s), 60 s after the request.
  const std::vector<Edit> fired = r.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).ready_at, At(seconds(120)));
}

TEST(LifecycleScaleUpTest, AScaleUpOpenAtARestartStillTimesOutOnTime) {
  StateMachine m = ScalingService();
  StateMachine r = Restarted(m, At(seconds(300)));
  // Requested at 60 s: due at 660 s whatever the restart.
  r.AdvanceTo(At(seconds(660) - Duration(1)));
  EXPECT_TRUE(r.Tick().empty());
  r.AdvanceTo(At(seconds(660)));
  const std::vector<Edit> fired = r.Tick();
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(std::get<ScaleUpEndEdit>(fired[0]).result, ScaleUpResult::kTimedOut);
}

TEST(LifecycleScaleUpTest, ARestartDropsTheScaleUpOfAServiceThatEnded) {
  StateMachine m = ScalingService();
  std::vector<state::PendingScaleUp> open = m.state().extras().scale_ups;
  Ok(m, state::ReleaseEdit{W(1), WorkloadState::kCancelled});
  Snapshot kept = m.state().snapshot();
  auto restarted = state::RestartedState(kept, {true, true}, open);
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_EQ(restarted->scale_up(W(1)), nullptr);
}

}  // namespace
}  // namespace tidal
