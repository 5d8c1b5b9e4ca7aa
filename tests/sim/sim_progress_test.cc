// The progress line of a long simulation (sim/sim_progress.h) and that the
// simulator reports it without changing the run.
#include "sim/sim_progress.h"

#include <gtest/gtest.h>

#include "sim/simulator.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

TEST(SimProgressTest, ShowsSimulatedTimeRateAndEta) {
  // 12 h of 72 h (3 d: days from 3 d on) done in 60 s of wall time: 60 s x (72 - 12) / 12 = 300 s left.
  // 1,234,567 events / 60 s = 20,576 events/s.
  EXPECT_EQ(FormatProgressLine({12 * 3600.0, 72 * 3600.0, 60, 1234567}),
            "sim 12.0 h / 3.0 d (16.7%)  1.2M events  20.6k events/s  ETA 5m00s");
  // Days from 3 d on; 10 s x (10 d - 4 d) / 4 d = 15 s left; 950 / 10 s = 95 events/s.
  EXPECT_EQ(FormatProgressLine({4 * 86400.0, 10 * 86400.0, 10, 950}),
            "sim 4.0 d / 10.0 d (40.0%)  950 events  95 events/s  ETA 15s");
  EXPECT_EQ(FormatProgressLine({100, 7200, 3, 5000}).substr(0, 26), "sim 1.7 min / 2.0 h (1.4%)");
  // 1 s for 10 s of 2 d: 1 s x (172800 - 10) / 10 = 17279 s = 4 h 47 min.
  EXPECT_NE(FormatProgressLine({10, 172800, 1, 10}).find("ETA 4h47m"), std::string::npos);
}

TEST(SimProgressTest, PastTheHorizonItDrainsAndWithoutOneItHasNoEta) {
  EXPECT_EQ(FormatProgressLine({7300, 7200, 2, 100}), "sim 2.0 h / 2.0 h (100.0%)  100 events  50 events/s  draining");
  EXPECT_EQ(FormatProgressLine({30, 0, 0, 0}), "sim 30 s  0 events");
}

TEST(SimProgressTest, TheSimulatorReportsProgressAndEndsWithTheFinalTime) {
  SimInput in = testing::SmallSimInput(0, 0, 1);
  for (int i = 0; i < 40; ++i)
    in.workloads.push_back(testing::SimTraining(in, "job-" + std::to_string(i), 1, 8, 600, 60.0 * i, minutes(10)));
  SimOptions o;
  o.wall_times = false;
  o.progress_interval_s = 0;  // report at every check
  std::vector<SimProgress> seen;
  o.on_progress = [&](const SimProgress& p) { seen.push_back(p); };
  auto with = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  ASSERT_FALSE(seen.empty());
  EXPECT_DOUBLE_EQ(seen.back().sim_s, with->summary.sim_duration_s);
  EXPECT_DOUBLE_EQ(seen.back().horizon_s, 39 * 60.0);  // the last arrival
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_LE(seen[i - 1].sim_s, seen[i].sim_s);
  SimOptions quiet = o;
  quiet.on_progress = nullptr;
  auto without = RunSimulation(in, quiet, nullptr);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(with->summary.ToJson().dump(), without->summary.ToJson().dump());
}

}  // namespace
}  // namespace tidal::sim
