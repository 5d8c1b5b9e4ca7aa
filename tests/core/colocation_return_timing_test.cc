// Predictive returns wait, within the slack the forecast leaves, for the
// moment that loses the least work: just after the borrowers' checkpoints.
#include "core/colocation/return_timing.h"

#include <map>

#include <gtest/gtest.h>

#include "core/colocation/colocation_controller.h"
#include "core/state/state_machine.h"
#include "tests/support/colocation_fixtures.h"

namespace tidal {
namespace {

using colocation_testing::kStepService;
using colocation_testing::StepLoad;
using colocation_testing::StepScenario;

Time At(Duration d) { return Time(d); }
NodeId N(uint32_t i) { return NodeId(i); }
constexpr Duration kGrace = seconds(60);  // what a return's victims get
constexpr WorkloadId kService = kStepService;
const std::map<std::pair<WorkloadId, NodeId>, Time> kNoneNoticed;

// colocation_fixtures.h's StepScenario with borrowers that checkpoint every
// 10 minutes, job 100 + n at minute 3 x (n - 1) of each ten (:00, :03, :06,
// :09): the service needs the reserved node at 30 rps and three shared
// nodes more at 100 rps.
// The borrowers checkpoint on their schedule: job 100 + n at minute
// 3 x (n - 1) of every ten.
void Checkpoint(Snapshot& s, Time t) {
  for (Allocation& a : s.allocations) {
    const uint64_t id = a.workload.value();
    if (id < 101 || a.terminating) continue;
    const int64_t offset_ms = static_cast<int64_t>(3 * (id - 101)) * 60'000;
    if ((ToMillis(t) - offset_ms) % 600'000 == 0) a.last_checkpoint = t;
  }
}

struct Return {
  Time notice;
  double lost_gpu_seconds;
};

// Two days of history, then day 3 from 11:00 to 12:00 minute by minute,
// with the borrowers checkpointing; every inference return's notice.
std::vector<Return> RunToThePeak(Duration forecast_horizon) {
  PolicyConfig policy;
  policy.colocation.mode = ColocationMode::kPredictive;
  policy.colocation.headroom = 0.2;
  policy.colocation.forecast_horizon = forecast_horizon;
  policy.preemption.default_grace = seconds(60);
  ColocationController controller(policy);
  for (int m = 0; m < 2 * 24 * 60; ++m) controller.ObserveLoad(kService, At(minutes(m)), StepLoad(At(minutes(m))));
  Snapshot s = StepScenario(minutes(10));
  std::vector<Return> out;
  for (Time t = At(hours(59)); t <= At(hours(60)); t += minutes(1)) {
    controller.ObserveLoad(kService, t, StepLoad(t));
    s.now = t;
    Checkpoint(s, t);
    const ColocationPlan plan = controller.Prepare(s);
    StatusOr<state::State> st = state::State::FromSnapshot(s);
    EXPECT_TRUE(st.ok()) << st.status().message();
    if (!st.ok()) return out;
    state::StateMachine machine(*std::move(st), state::LifecycleOptions{seconds(60), Duration(0)});
    EXPECT_TRUE(machine.ApplyPlan(plan).refused.empty());
    s = machine.state().snapshot();
    s.ClearDerived();
    s.cluster_version = 0;
    for (const PreemptDecision& p : plan.decisions.preempts) {
      out.push_back({p.notice_time, p.lost_gpu_seconds});
      // The victim leaves at once.
      std::erase_if(s.allocations, [&](const Allocation& a) { return a.workload == p.victim; });
      std::erase_if(s.workloads, [&](const Workload& w) { return w.id == p.victim; });
    }
  }
  return out;
}

// Look-ahead L = 30 min; short look-ahead S = 5 min cold start + 1 min grace
// + 2 x 1 min tick = 8 min; so a return may wait up to 22 minutes, more than
// the 10-minute interval. At 11:28 the full plan wants one node, the
// cheapest, job 103's (checkpointed 11:26): it waits for 11:36 + 1 min. At
// 11:29 job 104 checkpoints and its node goes at once, losing nothing; at
// 11:30 job 101 checkpoints and goes, at 11:33 job 102 does. Each victim
// loses at most one tick (8 GPUs x 60 s = 480 GPU-seconds); all are back by
// 11:52, 8 minutes before the rise. Without the wait they would lose
// 2,400 GPU-seconds (the next test).
TEST(ReturnTimingTest, PredictiveReturnsWaitForTheBorrowersCheckpoints) {
  const std::vector<Return> returns = RunToThePeak(minutes(30));
  ASSERT_EQ(returns.size(), 3u);
  double lost = 0;
  for (const Return& r : returns) {
    EXPECT_LE(r.lost_gpu_seconds, 480.0) << ToMillis(r.notice) / 60000 % (24 * 60);
    EXPECT_LE(r.notice, At(hours(59) + minutes(52)));
    lost += r.lost_gpu_seconds;
  }
  EXPECT_DOUBLE_EQ(lost, 0.0);
}

// With a 1-minute horizon L = max(1, 5 + 1 + 1) = 7 min and S = min(L, 8) =
// 7 min: no slack, so the returns go out when the forecast calls for them,
// whatever that loses. At 11:51 the window's end reads 37 rps, 5 replicas:
// one node, the cheapest, job 101's (last checkpoint 11:50: 8 GPUs x 60 s =
// 480). At 11:53 the 12:00 bucket is in: two more, the cheapest of jobs
// 102..104 (11:53, 11:46, 11:49): 0 and 8 x 240 = 1,920.
TEST(ReturnTimingTest, WithoutSlackReturnsAreNotDelayed) {
  const std::vector<Return> returns = RunToThePeak(minutes(1));
  ASSERT_EQ(returns.size(), 3u);
  EXPECT_EQ(returns[0].notice, At(hours(59) + minutes(51)));
  double lost = 0;
  for (const Return& r : returns) {
    EXPECT_LE(r.notice, At(hours(59) + minutes(53)));
    lost += r.lost_gpu_seconds;
  }
  EXPECT_DOUBLE_EQ(lost, 480.0 + 0.0 + 1920.0);
}

// The rule on its own: a node whose borrower checkpointed 7 minutes ago and
// checkpoints again in 3 waits if the slack covers the next checkpoint and
// a tick (3 + 1 = 4 minutes), and not if it does not; one that checkpointed
// just now, or never checkpoints, goes at once.
TEST(ReturnTimingTest, WaitsOnlyWhenALaterMomentWithinTheSlackLosesLess) {
  Snapshot s = StepScenario(minutes(10));
  s.now = At(hours(11) + minutes(30));
  for (Allocation& a : s.allocations) {
    if (a.workload == WorkloadId(101)) a.last_checkpoint = s.now - minutes(7);
    if (a.workload == WorkloadId(102)) a.last_checkpoint = s.now;
  }
  for (Workload& w : s.workloads) {
    if (w.id == WorkloadId(103)) w.training.checkpoint_interval = Duration(0);
  }
  const std::vector<NodeId> early = {N(1), N(2), N(3)};
  EXPECT_EQ(ReturnsToDefer(s, early, minutes(4), minutes(1), kGrace, kNoneNoticed), std::vector<NodeId>{N(1)});
  EXPECT_TRUE(ReturnsToDefer(s, early, minutes(3), minutes(1), kGrace, kNoneNoticed).empty());
  // A borrower already given notice on the node does not hold it.
  const std::map<std::pair<WorkloadId, NodeId>, Time> noticed = {{{WorkloadId(101), N(1)}, s.now}};
  EXPECT_TRUE(ReturnsToDefer(s, early, minutes(4), minutes(1), kGrace, noticed).empty());
}

// A borrower that saves on request loses its save (8 GPUs x 30 s = 240
// GPU-s) whenever it stops, so its node's return waits for the short plan,
// even with slack too short for any periodic checkpoint (3 minutes here):
// later costs the same and it trains meanwhile. Job 103 never checkpoints
// at an interval and, saving on request, no longer goes at once. A grace of
// 20 s cannot cover its 30 s save: it is priced as no save and goes at once.
// The step scenario at 11:30 with job 103 (on node 3) never checkpointing
// at an interval, saving on request in `save` (0 = never) and declaring
// `expected_duration` of work from its start at 0 (0 = unknown).
Snapshot WithJob103(Duration save, Duration expected_duration) {
  Snapshot s = StepScenario(minutes(10));
  s.now = At(hours(11) + minutes(30));
  for (Workload& w : s.workloads) {
    if (w.id != WorkloadId(103)) continue;
    w.training.checkpoint_interval = Duration(0);
    w.training.checkpoint_on_request = save;
    w.expected_duration = expected_duration;
  }
  return s;
}

TEST(ReturnTimingTest, NodesWhoseBorrowersSaveOnRequestWaitForTheShortPlan) {
  const Snapshot s = WithJob103(seconds(30), Duration(0));
  const std::vector<NodeId> early = {N(1), N(2), N(3)};
  EXPECT_EQ(ReturnsToDefer(s, early, minutes(3), minutes(1), kGrace, kNoneNoticed), std::vector<NodeId>{N(3)});
  EXPECT_TRUE(ReturnsToDefer(s, early, minutes(3), minutes(1), seconds(20), kNoneNoticed).empty());
}

// A borrower that never checkpoints but declared it ends 2 minutes from now
// (started at 0, 11 h 32 min of work) loses nothing from then: with 4
// minutes of slack its node waits for 11:32 + a tick; with 2 minutes (the
// pass after its end is at 11:33) it goes at once.
TEST(ReturnTimingTest, ANodeWaitsForABorrowerThatEndsWithinTheSlack) {
  const Snapshot s = WithJob103(Duration(0), hours(11) + minutes(32));
  const std::vector<NodeId> early = {N(3)};
  EXPECT_EQ(ReturnsToDefer(s, early, minutes(4), minutes(1), kGrace, kNoneNoticed), std::vector<NodeId>{N(3)});
  EXPECT_TRUE(ReturnsToDefer(s, early, minutes(2), minutes(1), kGrace, kNoneNoticed).empty());
}

}  // namespace
}  // namespace tidal
