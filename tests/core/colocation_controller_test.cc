#include "core/colocation/colocation_controller.h"

#include <algorithm>
#include <optional>

#include <gtest/gtest.h>

#include "core/engine/scheduler.h"
#include "core/state/state_machine.h"
#include "tests/support/colocation_fixtures.h"

namespace tidal {
namespace {

using colocation_testing::AddRunning;
using colocation_testing::ColocationSnapshot;
using colocation_testing::Gpus;
using colocation_testing::InferenceService;
using colocation_testing::StepLoad;
using colocation_testing::StepScenario;
using colocation_testing::TrainingJob;

Time At(Duration d) { return Time(d); }
NodeId N(uint32_t i) { return NodeId(i); }
// Readable in failures: 720 is 12:00.
int64_t MinuteOfDay(Time t) { return ToMillis(t) / 60000 % (24 * 60); }
constexpr WorkloadId kService(1);

PolicyConfig Policy(ColocationMode mode) {
  PolicyConfig p;
  p.colocation.mode = mode;
  p.colocation.headroom = 0.2;
  p.colocation.scale_down_delay = minutes(10);
  // Short on purpose: the look-ahead must then come from cold start + grace.
  p.colocation.forecast_horizon = minutes(1);
  p.preemption.default_grace = seconds(60);
  return p;
}

// Runs Prepare and commits its plan to `s` through the state machine, as the
// simulator and the server do before the engine's pass; returns the plan's
// decisions.
Decisions Commit(ColocationController& controller, Snapshot& s) {
  const ColocationPlan plan = controller.Prepare(s);
  StatusOr<state::State> st = state::State::FromSnapshot(s);
  EXPECT_TRUE(st.ok()) << st.status().message();
  if (!st.ok()) return plan.decisions;
  state::StateMachine machine(*std::move(st), state::LifecycleOptions{seconds(60), Duration(0)});
  const state::ApplyOutcome outcome = machine.ApplyPlan(plan);
  EXPECT_TRUE(outcome.refused.empty()) << outcome.refused[0].why.message();
  s = machine.state().snapshot();
  // The tests edit `s` by hand next: let the engine recount free GPUs.
  s.ClearDerived();
  s.cluster_version = 0;
  return plan.decisions;
}

// Removes a preempted victim, as if it had exited at once.
void Apply(Snapshot& s, const Decisions& d) {
  for (const PreemptDecision& p : d.preempts) {
    std::erase_if(s.allocations, [&](const Allocation& a) { return a.workload == p.victim; });
    std::erase_if(s.workloads, [&](const Workload& w) { return w.id == p.victim; });
  }
}

struct StepRun {
  std::optional<Time> first_return;
  std::vector<PreemptDecision> preempts;
};

// Two days of history, then day 3 from 10:00 to 13:00 minute by minute.
StepRun RunStepDay(ColocationMode mode) {
  ColocationController controller(Policy(mode));
  for (int m = 0; m < 2 * 24 * 60; ++m) {
    controller.ObserveLoad(kService, At(minutes(m)), StepLoad(At(minutes(m))));
  }
  Snapshot s = StepScenario();
  StepRun run;
  for (Time t = At(hours(58)); t <= At(hours(61)); t += minutes(1)) {
    controller.ObserveLoad(kService, t, StepLoad(t));
    s.now = t;
    const Decisions d = Commit(controller, s);
    if (!controller.status().returned.empty() && !run.first_return) run.first_return = t;
    run.preempts.insert(run.preempts.end(), d.preempts.begin(), d.preempts.end());
    Apply(s, d);
  }
  return run;
}

TEST(ColocationControllerTest, PredictiveReturnsAheadOfTheForecastRise) {
  const StepRun run = RunStepDay(ColocationMode::kPredictive);
  const Time rise = At(hours(60));  // 12:00 on day 3
  ASSERT_TRUE(run.first_return.has_value());
  // Look-ahead = max(1 min, 5 min cold start + 60 s grace + 1 min tick) = 7
  // min: the 12:00 bucket enters the window at 11:53, 7 minutes ahead; the
  // interpolated forecast at the window's end starts rising from 11:57:30,
  // which the 11:51 window already reaches.
  EXPECT_EQ(MinuteOfDay(*run.first_return), MinuteOfDay(rise - minutes(9)));
  // All three nodes the peak needs go back by then, each with notice at
  // least cold start + grace (6 min) before the rise, and their victims
  // leave by the grace deadline, before the replicas' cold start begins.
  ASSERT_EQ(run.preempts.size(), 3u);
  for (const PreemptDecision& p : run.preempts) {
    EXPECT_EQ(p.cause, PreemptCause::kInferenceReturn);
    EXPECT_EQ(p.preemptor, kService);
    EXPECT_LE(MinuteOfDay(p.notice_time), MinuteOfDay(rise - minutes(7)));
    EXPECT_EQ(p.grace_deadline, p.notice_time + seconds(60));
  }
}

TEST(ColocationControllerTest, ReactiveReturnsOnlyOnDemand) {
  const StepRun run = RunStepDay(ColocationMode::kReactive);
  const Time rise = At(hours(60));
  ASSERT_TRUE(run.first_return.has_value());
  // Nothing goes back before the load is there.
  EXPECT_EQ(MinuteOfDay(*run.first_return), MinuteOfDay(rise));
  for (const PreemptDecision& p : run.preempts) {
    EXPECT_GE(MinuteOfDay(p.notice_time), MinuteOfDay(rise));
  }
  EXPECT_EQ(run.preempts.size(), 3u);
}

TEST(ColocationControllerTest, StaticLendsNothingAndEvictsLeftoverBorrowedWork) {
  ColocationController controller(Policy(ColocationMode::kStatic));
  Snapshot s = StepScenario();
  s.now = At(hours(1));
  const Decisions d = Commit(controller, s);
  EXPECT_EQ(s.lent_nodes, std::vector<bool>(5, false));
  EXPECT_EQ(controller.status().lent_nodes, 0);
  // The four jobs found on shared nodes (say, from before a mode change).
  ASSERT_EQ(d.preempts.size(), 4u);
  for (const PreemptDecision& p : d.preempts) {
    EXPECT_EQ(p.cause, PreemptCause::kInferenceReturn);
    // Checkpoint at 0:00, now 1:00, 8 GPUs: 8 * 3600 = 28800 GPU-seconds lost.
    EXPECT_DOUBLE_EQ(p.lost_gpu_seconds, 28800.0);
  }
  // The engine will see them leaving, as the caller will record them.
  for (const Allocation& a : s.allocations) {
    if (a.workload == kService) continue;
    EXPECT_TRUE(a.terminating);
    EXPECT_EQ(a.grace_deadline, s.now + seconds(60));
  }
  // The same victims are not noticed twice while inside their grace.
  s.now += seconds(30);
  EXPECT_TRUE(Commit(controller, s).preempts.empty());
}

TEST(ColocationControllerTest, ReturnIsWholeNodeAndElasticJobsShrink) {
  Snapshot s = ColocationSnapshot(1, 2, 0);
  s.now = At(hours(1));
  Workload svc = InferenceService(kService.value(), 8, 10, 1, 4);
  svc.inference.cold_start = seconds(30);
  AddRunning(s, svc, {{N(0), Gpus(0, 8)}}, At(hours(0)), At(hours(0)));
  // Node 1: a 2-GPU debug session and an elastic job's pod (2 of its 3 pods
  // are on node 2; min 1). Node 2: the elastic job's other pods and a rigid job.
  Workload dbg;
  dbg.id = WorkloadId(50);
  dbg.kind = WorkloadKind::kDebug;
  AddRunning(s, dbg, {{N(1), Gpus(0, 2)}}, At(minutes(50)), At(minutes(50)));
  Workload elastic = TrainingJob(60, 2, 3);
  elastic.min_pods = 1;
  elastic.max_pods = 4;
  AddRunning(s, elastic, {{N(1), Gpus(2, 2)}, {N(2), Gpus(0, 2)}, {N(2), Gpus(2, 2)}},
             At(minutes(0)), At(minutes(0)));
  AddRunning(s, TrainingJob(70, 4, 1), {{N(2), Gpus(4, 4)}}, At(minutes(0)), At(minutes(0)));

  ColocationController controller(Policy(ColocationMode::kReactive));
  EXPECT_TRUE(Commit(controller, s).preempts.empty());
  EXPECT_EQ(s.lent_nodes, (std::vector<bool>{false, true, true}));
  // 50 rps wants floor(60 / 10) + 1 = 7 replicas; capped at 2, one more
  // 8-GPU replica needs one whole shared node. At 1:01 node 1 costs 2 GPUs x
  // 660 s = 1320 GPU-s (the debug session; the elastic pod shrinks off for
  // free), node 2 costs 4 x 3660 = 14640 (its rigid job): node 1 goes back.
  s.workloads[0].max_pods = 2;
  controller.ObserveLoad(kService, s.now, 50);
  s.now += minutes(1);
  const Decisions d = Commit(controller, s);
  EXPECT_EQ(s.workloads[0].pods, 2);
  EXPECT_EQ(controller.status().returned, std::vector<NodeId>{N(1)});
  EXPECT_EQ(s.lent_nodes, (std::vector<bool>{false, false, true}));
  // Everything on node 1 gets notice, not just enough GPUs for one replica.
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].victim, WorkloadId(50));
  ASSERT_EQ(d.resizes.size(), 1u);
  EXPECT_EQ(d.resizes[0].workload, WorkloadId(60));
  EXPECT_EQ(d.resizes[0].from_pods, 3);
  EXPECT_EQ(d.resizes[0].to_pods, 2);
  EXPECT_EQ(d.resizes[0].removed, (std::vector<PodPlacement>{{N(1), Gpus(2, 2)}}));
  EXPECT_EQ(d.resizes[0].beneficiary, kService);
  EXPECT_EQ(d.resizes[0].grace_deadline, s.now + seconds(60));

  // 30 s later the shrunk pod is still saving on node 1 (it leaves at its
  // grace deadline): that is no loan, and it gets no second notice.
  std::erase_if(s.allocations, [](const Allocation& a) { return a.workload == WorkloadId(50); });
  std::erase_if(s.workloads, [](const Workload& w) { return w.id == WorkloadId(50); });
  s.now += seconds(30);
  controller.ObserveLoad(kService, s.now, 50);
  const Decisions later = Commit(controller, s);
  EXPECT_TRUE(later.preempts.empty());
  EXPECT_TRUE(later.resizes.empty());
  EXPECT_EQ(s.lent_nodes, (std::vector<bool>{false, false, true}));
  EXPECT_TRUE(controller.status().newly_lent.empty());
  EXPECT_TRUE(controller.status().returned.empty());
}

// The controller shrinks an elastic job off a returned node; the engine, run
// on the same snapshot, must not then stop the whole job (its backstop for
// borrowed work on unlent shared nodes skips pods already leaving), and the
// job keeps running at its smaller size once the removed pod has exited.
TEST(ColocationControllerTest, PredictiveReturnShrinksElasticJobWhichKeepsRunning) {
  Snapshot s = ColocationSnapshot(1, 2, 0);
  s.now = At(hours(1));
  Workload svc = InferenceService(kService.value(), 8, 10, 1, 2);
  svc.inference.cold_start = seconds(30);
  AddRunning(s, svc, {{N(0), Gpus(0, 8)}}, At(hours(0)), At(hours(0)));
  // Elastic job 60: one pod on node 1, two on node 2; min 1, max 3.
  Workload elastic = TrainingJob(60, 2, 3);
  elastic.min_pods = 1;
  elastic.max_pods = 3;
  AddRunning(s, elastic, {{N(1), Gpus(2, 2)}, {N(2), Gpus(0, 2)}, {N(2), Gpus(2, 2)}},
             At(minutes(0)), At(minutes(0)));
  const PolicyConfig policy = Policy(ColocationMode::kPredictive);
  ColocationController controller(policy);
  const Scheduler scheduler(policy);
  controller.ObserveLoad(kService, s.now, 0);
  EXPECT_TRUE(Commit(controller, s).resizes.empty());
  EXPECT_EQ(s.lent_nodes, (std::vector<bool>{false, true, true}));

  // 50 rps: with under a day of history the forecast is 1.2 x the last
  // hour's peak = 60 rps, which wants more than max_pods = 2 replicas, so one
  // more 8-GPU replica needs a whole shared node. Both nodes cost 0 (the job
  // can shrink off either and keep >= 1 pod); node 1 holds fewer borrowed
  // GPUs (2 < 4), so it goes back, and the job shrinks 3 -> 2.
  s.now += minutes(1);
  controller.ObserveLoad(kService, s.now, 50);
  const Decisions pre = Commit(controller, s);
  EXPECT_EQ(controller.status().returned, std::vector<NodeId>{N(1)});
  EXPECT_TRUE(pre.preempts.empty());
  ASSERT_EQ(pre.resizes.size(), 1u);
  EXPECT_EQ(pre.resizes[0].workload, WorkloadId(60));
  EXPECT_EQ(pre.resizes[0].to_pods, 2);
  const Allocation* job = nullptr;
  for (const Allocation& a : s.allocations) {
    if (a.workload == WorkloadId(60)) job = &a;
  }
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->leaving, (std::vector<PodPlacement>{{N(1), Gpus(2, 2)}}));

  const Decisions eng = scheduler.Schedule(s);
  for (const PreemptDecision& p : eng.preempts) EXPECT_NE(p.victim, WorkloadId(60)) << p.detail;
  for (const ResizeDecision& r : eng.resizes) EXPECT_NE(r.workload, WorkloadId(60)) << r.detail;

  // The removed pod exits at its grace deadline; the job runs on with 2 pods
  // on node 2 (free to grow again on that lent node only) and the service's
  // replica takes node 1.
  for (Allocation& a : s.allocations) {
    if (a.workload != WorkloadId(60)) continue;
    std::erase(a.pods, PodPlacement{N(1), Gpus(2, 2)});
    a.leaving.clear();
  }
  s.now += seconds(60);
  controller.ObserveLoad(kService, s.now, 50);
  const Decisions pre2 = Commit(controller, s);
  const Decisions eng2 = scheduler.Schedule(s);
  EXPECT_TRUE(pre2.preempts.empty());
  EXPECT_TRUE(pre2.resizes.empty());
  EXPECT_TRUE(eng2.preempts.empty());
  const ResizeDecision* replica = nullptr;
  for (const ResizeDecision& r : eng2.resizes) {
    if (r.workload == kService) replica = &r;
    if (r.workload != WorkloadId(60)) continue;
    EXPECT_TRUE(r.removed.empty()) << r.detail;
    for (const PodPlacement& p : r.added) EXPECT_EQ(p.node, N(2)) << r.detail;
  }
  ASSERT_NE(replica, nullptr);
  ASSERT_EQ(replica->added.size(), 1u);
  EXPECT_EQ(replica->added[0].node, N(1));
  EXPECT_EQ(s.lent_nodes, (std::vector<bool>{false, false, true}));
}

TEST(ColocationControllerTest, AutoscalesAndReportsModelledLatency) {
  Snapshot s = StepScenario();
  ColocationController controller(Policy(ColocationMode::kReactive));
  s.now = At(hours(1));
  controller.ObserveLoad(kService, s.now, 30);
  Commit(controller, s);
  ASSERT_EQ(controller.status().services.size(), 1u);
  const ServiceStatus& st = controller.status().services[0];
  EXPECT_EQ(st.desired_replicas, 4);  // floor(36 / 10) + 1
  EXPECT_EQ(st.running_replicas, 4);
  EXPECT_DOUBLE_EQ(st.current_rps, 30.0);
  EXPECT_EQ(st.cold_start, minutes(5));
  // 30 rps over 4 replicas of 10: the M/M/4 figures.
  const QueueLatency q = ModelLatency(30, 10, 4);
  EXPECT_DOUBLE_EQ(st.modelled_p99_ms, q.p99_ms);
  EXPECT_DOUBLE_EQ(st.modelled_p95_ms, q.p95_ms);
  EXPECT_LT(st.modelled_p95_ms, st.modelled_p99_ms);
  // Load doubles: pods follow at once (floor(72 / 10) + 1 = 8).
  s.now += minutes(1);
  controller.ObserveLoad(kService, s.now, 60);
  Commit(controller, s);
  const auto svc = std::find_if(s.workloads.begin(), s.workloads.end(),
                                [](const Workload& w) { return w.id == kService; });
  EXPECT_EQ(svc->pods, 8);
}

// The learned margin sizes predictive's replicas, but never beyond the
// inference pools. StepScenario: 1 reserved + 4 shared nodes of 8 GPUs = 40
// GPUs, 2-GPU replicas of 10 rps, floor(rps x 1.2 / 10) + 1 replicas.
// 30 rps for an hour (no daily profile: the short forecast is the last
// hour's max x 1.2 = 36), then 100 rps from 60 min: the forecast issued at
// 59 min (36) scored at 64 min gives 100 / 36 = 2.8, capped at 2.
// At 64 min the base is max(100, 100 x 1.2) = 120 rps. Without the margin:
// floor(144 / 10) + 1 = 15 replicas (reactive sizes 100 rps: 13). At the
// full margin, 240 rps: 29 replicas = 58 GPUs > 40, so the margin is scaled
// to 1 + f: floor(14.4 (1 + f)) + 1 <= 20 for f < 0.3889;
// bisection to 1/1024 gives f = 398/1024, 166.6 rps, 20 replicas = 40 GPUs.
// The load steps from 30 to 100 rps at minute 60: the short forecast
// (untrusted, under a day of history: the last hour's maximum x 1.2 = 36)
// missed it by 100 / 36 > 2, so the margin is 2, its cap. The forecast is
// now 120 (100 x 1.2). At margin 2 the service would need
// floor(2 x 120 x 1.2 / 10) + 1 = 29 replicas of 2 GPUs; the pools hold 40.
TEST(ColocationControllerTest, TheMarginSizesReplicasUpToWhatIsNotLentAndCallsTheRestBack) {
  ColocationController predictive(Policy(ColocationMode::kPredictive));
  ColocationController reactive(Policy(ColocationMode::kReactive));
  for (int m = 0; m <= 64; ++m) {
    const double rps = m < 60 ? 30 : 100;
    predictive.ObserveLoad(kService, At(minutes(m)), rps);
    reactive.ObserveLoad(kService, At(minutes(m)), rps);
  }
  EXPECT_DOUBLE_EQ(predictive.forecaster().Margin(kService), 2.0);
  Snapshot s = StepScenario();
  s.now = At(minutes(64));
  // The four shared nodes are lent (each runs a borrowed job): the replicas
  // may use the reserved node's 8 GPUs only, which the margin-free target
  // already overflows, so the margin is not used for them:
  // floor(120 x 1.2 / 10) + 1 = 15. Reactive sizes for the 100 rps now:
  // floor(100 x 1.2 / 10) + 1 = 13.
  const ColocationPlan p = predictive.Prepare(s);
  ASSERT_EQ(p.targets.size(), 1u);
  EXPECT_EQ(p.targets[0].second, 15);
  const ColocationPlan r = reactive.Prepare(s);
  ASSERT_EQ(r.targets.size(), 1u);
  EXPECT_EQ(r.targets[0].second, 13);
  // The loans plan for the margin, fitted to all 40 GPUs (20 replicas): all
  // four shared nodes come back. Their jobs never checkpoint, so waiting
  // would only lose more: they get notice now.
  EXPECT_EQ(p.lent_nodes, std::vector<bool>(5, false));
  EXPECT_EQ(p.decisions.preempts.size(), 4u);
  // Once the borrowers are gone, the replicas get the margin up to what the
  // pools hold: 20 replicas = 40 GPUs.
  Snapshot after = StepScenario();
  std::erase_if(after.allocations, [](const Allocation& a) { return a.workload != kService; });
  std::erase_if(after.workloads, [](const Workload& w) { return w.id != kService; });
  after.now = At(minutes(65));
  predictive.ObserveLoad(kService, after.now, 100);
  const ColocationPlan later = predictive.Prepare(after);
  ASSERT_EQ(later.targets.size(), 1u);
  EXPECT_EQ(later.targets[0].second, 20);
}

// One reserved and one shared node of 8 GPUs; 1-GPU replicas of 10 rps
// without a latency target, so n x the sized load L needs
// floor(n x L x 1.2 / 10) + 1 replicas. The load is 20 rps for an hour; the
// forecast is not trusted yet (under a day), so L = 20 x 1.2 = 24: the
// autoscaler's target is floor(24 x 1.2 / 10) + 1 = 3, running on the
// reserved node, whose other 5 GPUs are free. Spares: the largest n <= 4
// whose replicas beyond 3 fit in 5 GPUs: floor(2.88 n) + 1 <= 8, so 5 spares
// and 8 replicas. The shared node stays lent to its borrower: spares never
// call a node back. Reactive sizes for the 20 rps now, and keeps no spares.
TEST(ColocationControllerTest, PredictiveKeepsSparesOnTheReservedPoolsFreeGpusOnly) {
  Snapshot s = ColocationSnapshot(1, 1, 0);
  Workload svc = InferenceService(kService.value(), 1, 10, 1, 64);
  svc.pods = 3;
  AddRunning(s, svc, {{N(0), Gpus(0, 1)}, {N(0), Gpus(1, 1)}, {N(0), Gpus(2, 1)}}, At(Duration(0)), At(Duration(0)));
  AddRunning(s, TrainingJob(101, 8, 1), {{N(1), Gpus(0, 8)}}, At(Duration(0)), At(Duration(0)));
  ColocationController predictive(Policy(ColocationMode::kPredictive));
  ColocationController reactive(Policy(ColocationMode::kReactive));
  for (int m = 0; m <= 60; ++m) {
    predictive.ObserveLoad(kService, At(minutes(m)), 20);
    reactive.ObserveLoad(kService, At(minutes(m)), 20);
  }
  s.now = At(minutes(60));
  const ColocationPlan p = predictive.Prepare(s);
  ASSERT_EQ(p.targets.size(), 1u);
  EXPECT_EQ(p.targets[0].second, 8);
  ASSERT_EQ(predictive.status().services.size(), 1u);
  EXPECT_EQ(predictive.status().services[0].desired_replicas, 3);
  EXPECT_EQ(predictive.status().services[0].spare_replicas, 5);
  EXPECT_EQ(p.lent_nodes, (std::vector<bool>{false, true}));
  EXPECT_TRUE(p.decisions.preempts.empty());
  const ColocationPlan r = reactive.Prepare(s);
  ASSERT_EQ(r.targets.size(), 1u);
  EXPECT_EQ(r.targets[0].second, 3);

  // Once the spares run, their own GPUs count as room again: the count
  // holds.
  Snapshot running = s;
  for (Allocation& a : running.allocations) {
    if (a.workload != kService) continue;
    for (int g = 3; g < 8; ++g) a.pods.push_back({N(0), Gpus(g, 1)});
  }
  running.now = At(minutes(60) + seconds(10));
  predictive.ObserveLoad(kService, running.now, 20);
  EXPECT_EQ(predictive.Prepare(running).targets[0].second, 8);

  // Other work on the reserved node leaves the spares less room: with 2 of
  // its GPUs taken, 3 spares.
  AddRunning(s, TrainingJob(102, 2, 1), {{N(0), Gpus(6, 2)}}, At(Duration(0)), At(Duration(0)));
  s.now = At(minutes(60) + seconds(20));
  predictive.ObserveLoad(kService, s.now, 20);
  EXPECT_EQ(predictive.Prepare(s).targets[0].second, 6);
}

TEST(ColocationControllerTest, BatchRejectsComeOutOfPrepare) {
  Snapshot s = ColocationSnapshot(1, 1, 0);
  s.now = At(minutes(59));
  Workload batch;
  batch.id = WorkloadId(6);
  batch.kind = WorkloadKind::kBatchInference;
  batch.state = WorkloadState::kPending;
  batch.expected_duration = hours(2);
  batch.batch.deadline = s.now + hours(1);
  s.workloads.push_back(batch);
  ColocationController controller(Policy(ColocationMode::kPredictive));
  // Two hours of work cannot end within the hour left.
  const ColocationPlan plan = controller.Prepare(s);
  ASSERT_EQ(plan.decisions.rejects.size(), 1u);
  EXPECT_EQ(plan.decisions.rejects[0].reason, ReasonCode::kDeadline);
  // Max-runtime stops are the lifecycle's (core/state), never Prepare's.
  EXPECT_TRUE(plan.decisions.preempts.empty());
}

TEST(ColocationControllerTest, PrepareLeavesItsInputAlone) {
  Snapshot s = StepScenario();
  s.now = At(hours(1));
  ColocationController controller(Policy(ColocationMode::kStatic));
  const Snapshot before = s;
  // Static mode returns all four shared nodes and notices their jobs...
  const ColocationPlan plan = controller.Prepare(s);
  EXPECT_EQ(plan.decisions.preempts.size(), 4u);
  EXPECT_EQ(plan.lent_nodes, std::vector<bool>(5, false));
  // ... in the plan only: nothing in the snapshot moved.
  ASSERT_EQ(s.allocations.size(), before.allocations.size());
  for (size_t i = 0; i < s.allocations.size(); ++i) {
    EXPECT_FALSE(s.allocations[i].terminating);
    EXPECT_TRUE(s.allocations[i].leaving.empty());
  }
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    EXPECT_EQ(s.workloads[i].pods, before.workloads[i].pods);
    EXPECT_EQ(s.workloads[i].state, before.workloads[i].state);
  }
  EXPECT_EQ(s.lent_nodes, before.lent_nodes);
}

// Promise 5 of issue #9: a node is not lent and taken back within the
// minute because demand flickered. Returns the seconds at which shared node 1
// was lent and returned over 10-s ticks from 0 to 120 s, with 50 rps at 30 s
// and 5 rps otherwise.
struct LoanTimes {
  std::vector<int> lent;
  std::vector<int> returned;
};
LoanTimes FlickeringLoad(Duration relend_delay) {
  // Node 0 reserved, node 1 shared, 8 GPUs each; 8-GPU replicas of 10 rps
  // (max 2). 5 rps needs floor(5 * 1.2 / 10) + 1 = 1 replica (node 0); 50 rps
  // needs floor(60 / 10) + 1 = 7, capped at 2: node 1 too.
  Snapshot s = ColocationSnapshot(1, 1, 0);
  Workload svc = InferenceService(kService.value(), 8, 10, 1, 2);
  svc.inference.cold_start = seconds(30);
  AddRunning(s, svc, {{N(0), Gpus(0, 8)}}, At(Duration(0)), At(Duration(0)));
  PolicyConfig policy = Policy(ColocationMode::kReactive);
  // The autoscaler drops the target at once: only the hold damps the loans.
  policy.colocation.scale_down_delay = Duration(0);
  policy.colocation.relend_delay = relend_delay;
  ColocationController controller(policy);
  LoanTimes out;
  for (int t = 0; t <= 120; t += 10) {
    s.now = At(seconds(t));
    controller.ObserveLoad(kService, s.now, t == 30 ? 50 : 5);
    Commit(controller, s);
    if (!controller.status().newly_lent.empty()) out.lent.push_back(t);
    if (!controller.status().returned.empty()) out.returned.push_back(t);
  }
  return out;
}

TEST(ColocationControllerTest, ANodeInferenceNeededIsLentAgainOnlyAfterTheRelendDelay) {
  // The first loan is at once (t=0). Inference takes node 1 back at 30 s and
  // needs it no more from 40 s; with a 60-s delay it is lent again at
  // 30 + 60 = 90 s, not at 40 s, and is held in between.
  const LoanTimes held = FlickeringLoad(seconds(60));
  EXPECT_EQ(held.lent, (std::vector<int>{0, 90}));
  EXPECT_EQ(held.returned, std::vector<int>{30});
  // Without the delay the node flaps: lent again 10 s after its return.
  const LoanTimes flapping = FlickeringLoad(Duration(0));
  EXPECT_EQ(flapping.lent, (std::vector<int>{0, 40}));
  EXPECT_EQ(flapping.returned, std::vector<int>{30});
}

TEST(ColocationControllerTest, SameInputsSameDecisions) {
  const StepRun a = RunStepDay(ColocationMode::kPredictive);
  const StepRun b = RunStepDay(ColocationMode::kPredictive);
  ASSERT_EQ(a.preempts.size(), b.preempts.size());
  for (size_t i = 0; i < a.preempts.size(); ++i) {
    EXPECT_EQ(a.preempts[i].victim, b.preempts[i].victim);
    EXPECT_EQ(a.preempts[i].notice_time, b.preempts[i].notice_time);
  }
}

}  // namespace
}  // namespace tidal
