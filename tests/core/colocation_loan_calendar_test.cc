#include "core/colocation/loan_calendar.h"

#include <gtest/gtest.h>

#include "tests/support/colocation_fixtures.h"

namespace tidal {
namespace {

using colocation_testing::kStepService;
using colocation_testing::StepLoad;
using colocation_testing::StepScenario;

Time At(Duration d) { return Time(d); }
constexpr WorkloadId kService = kStepService;

// colocation_fixtures.h's StepScenario: the service needs the reserved node
// at 30 rps and three of the four shared nodes more at 100 rps; each shared
// node is lent to an 8-GPU training job. Cold start 5 min, grace 60 s: the
// look-ahead is 6 min.
PolicyConfig Policy(ColocationMode mode) {
  PolicyConfig p;
  p.colocation.mode = mode;
  p.colocation.headroom = 0.2;
  p.colocation.forecast_horizon = minutes(1);
  p.preemption.default_grace = seconds(60);
  return p;
}

// Two identical days seen, so the learned error is 0: low = planned = high.
ColocationController TwoDaysOfSteps(ColocationMode mode) {
  ColocationController controller(Policy(mode));
  for (int m = 0; m < 2 * 24 * 60; ++m) controller.ObserveLoad(kService, At(minutes(m)), StepLoad(At(minutes(m))));
  return controller;
}

// Half-hour slots of day 3. The peak's slots 24..27 (12:00-14:00) need 13
// replicas: three shared nodes. Slots 23 (11:30) and 28 (14:00) touch the
// step through the forecast's interpolation between bucket centres: at
// 11:59:59.999 and at 14:00 it reads 30 + 70 x 2.5/5 = 65 rps, 8 replicas,
// one shared node; their low load is the lowest bucket they touch, 30 rps,
// which needs none: '-'. Returns go cheapest first; the four borrowers cost
// the same, so the lower id: node 1 serves slots 23..28, nodes 2 and 3 slots
// 24..27, node 4 is never needed.
TEST(LoanCalendarTest, PlansTheReturnsAForecastPeakNeedsWithNoticeOneLookAheadEarlier) {
  const ColocationController controller = TwoDaysOfSteps(ColocationMode::kPredictive);
  Snapshot s = StepScenario();
  const Time day3 = At(hours(48));
  s.now = day3;
  const LoanCalendar c = PlanLoanCalendar(controller, s, day3);
  ASSERT_EQ(c.slots, 48);
  EXPECT_EQ(c.lookahead, minutes(6));
  ASSERT_EQ(c.nodes.size(), 4u);
  const std::string lent(23, 'L');
  EXPECT_EQ(c.nodes[0].timeline, lent + "-" + std::string(4, '.') + "-" + std::string(19, 'L'));
  EXPECT_EQ(c.nodes[1].timeline, lent + "L" + std::string(4, '.') + std::string(20, 'L'));
  EXPECT_EQ(c.nodes[2].timeline, c.nodes[1].timeline);
  EXPECT_EQ(c.nodes[3].timeline, std::string(48, 'L'));
  EXPECT_EQ(c.lent_planned[0], 4);
  EXPECT_EQ(c.lent_planned[23], 3);
  EXPECT_EQ(c.lent_planned[24], 1);
  EXPECT_EQ(c.lent_planned[28], 3);
  EXPECT_EQ(c.lent_low_load[23], 4);
  EXPECT_EQ(c.lent_low_load[24], 1);
  EXPECT_EQ(c.lent_low_load[28], 4);
  EXPECT_EQ(c.lent_high_load, c.lent_planned);

  // Node 1: lent now, back by 11:30 (notice 11:24; by 12:00 if the load is
  // low), lent again from 14:30 to past the span.
  ASSERT_EQ(c.nodes[0].windows.size(), 2u);
  const LoanWindow& first = c.nodes[0].windows[0];
  EXPECT_EQ(first.lend_at, day3);
  EXPECT_EQ(first.return_by, day3 + hours(11) + minutes(30));
  EXPECT_EQ(first.notice_at, day3 + hours(11) + minutes(24));
  EXPECT_EQ(first.return_earliest, *first.return_by);
  EXPECT_EQ(first.return_latest, day3 + hours(12));
  const LoanWindow& second = c.nodes[0].windows[1];
  EXPECT_EQ(second.lend_at, day3 + hours(14) + minutes(30));
  EXPECT_FALSE(second.return_by.has_value());
  EXPECT_FALSE(second.notice_at.has_value());
  EXPECT_EQ(second.return_earliest, day3 + hours(24));

  ASSERT_EQ(c.services.size(), 1u);
  EXPECT_TRUE(c.services[0].profiled);
  EXPECT_EQ(c.services[0].planned_replicas[0], 4);
  EXPECT_EQ(c.services[0].planned_replicas[24], 13);
  EXPECT_EQ(c.services[0].planned_replicas[23], 8);
}

// Day 2's step peaked at 140 rps: the peak buckets' profile is
// 0.5 x 140 + 0.5 x 100 = 120 with an error of 40. Planned, 120 rps: 15
// replicas, 11 beyond the reserved node, 22 GPUs on shared nodes 1..3. High,
// 160 rps: 20 replicas, 32 GPUs, all four. Low, 80 rps: 10 replicas, 12 GPUs,
// nodes 1 and 2. So at the peak node 3 is back under the planned load but
// lent under the low one ('-'), and node 4 lent under the planned load but
// not the high one ('l').
TEST(LoanCalendarTest, MarksWhatHangsOnTheForecastError) {
  ColocationController controller(Policy(ColocationMode::kPredictive));
  for (int m = 0; m < 2 * 24 * 60; ++m) {
    const double load = StepLoad(At(minutes(m)));
    controller.ObserveLoad(kService, At(minutes(m)), m >= 24 * 60 && load > 50 ? 140.0 : load);
  }
  Snapshot s = StepScenario();
  const Time day3 = At(hours(48));
  s.now = day3;
  const LoanCalendar c = PlanLoanCalendar(controller, s, day3);
  const int peak = 25;  // 12:30, inside the step on both sides
  EXPECT_EQ(c.services[0].planned_replicas[peak], 15);
  EXPECT_EQ(c.lent_high_load[peak], 0);
  EXPECT_EQ(c.lent_planned[peak], 1);
  EXPECT_EQ(c.lent_low_load[peak], 2);
  EXPECT_EQ(c.nodes[0].timeline[peak], '.');
  EXPECT_EQ(c.nodes[2].timeline[peak], '-');
  EXPECT_EQ(c.nodes[3].timeline[peak], 'l');
  // Node 4's window holds through the peak under the planned load; under
  // the high load it is needed from the first peak slot on.
  ASSERT_FALSE(c.nodes[3].windows.empty());
  EXPECT_LT(c.nodes[3].windows[0].return_earliest, day3 + hours(13));
}

TEST(LoanCalendarTest, StaticModeLendsNothing) {
  const ColocationController controller = TwoDaysOfSteps(ColocationMode::kStatic);
  Snapshot s = StepScenario();
  s.now = At(hours(48));
  const LoanCalendar c = PlanLoanCalendar(controller, s, s.now, {hours(2), minutes(30)});
  EXPECT_EQ(c.slots, 4);
  for (const NodeLoanPlan& n : c.nodes) {
    EXPECT_TRUE(n.windows.empty()) << n.name;
    EXPECT_EQ(n.timeline, "....");
  }
}

// The calendar is a plan: it reads the controller and the snapshot and
// changes neither, so asking twice gives the same answer.
TEST(LoanCalendarTest, SameInputsSamePlan) {
  const ColocationController controller = TwoDaysOfSteps(ColocationMode::kPredictive);
  Snapshot s = StepScenario();
  s.now = At(hours(48));
  const LoanCalendar a = PlanLoanCalendar(controller, s, s.now);
  const LoanCalendar b = PlanLoanCalendar(controller, s, s.now);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tidal
