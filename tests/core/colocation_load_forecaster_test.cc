#include "core/colocation/load_forecaster.h"

#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

namespace tidal {
namespace {

constexpr WorkloadId kService(7);

Time At(Duration d) { return Time(d); }

// 100 + 50 sin(2 pi t / day): peak 150 at 06:00, trough 50 at 18:00.
double Sine(Time t) {
  const double day_s = 24 * 3600.0;
  return 100 + 50 * std::sin(2 * std::numbers::pi * ToSeconds(t) / day_s);
}

void ObserveSineDays(LoadForecaster& f, int days) {
  for (int m = 0; m < days * 24 * 60; ++m) {
    const Time t = At(minutes(m));
    f.Observe(kService, t, Sine(t));
  }
}

TEST(LoadForecasterTest, LearnsDailySineAfterTwoDays) {
  LoadForecaster f;
  ObserveSineDays(f, 2);
  ASSERT_TRUE(f.HasDailyProfile(kService));
  const Time day3 = At(hours(48));
  // A 5-minute bucket mean of the sine at its crest loses under 0.01%, so the
  // forecast of the peak is within 1% of 150, at 06:00 tomorrow.
  EXPECT_NEAR(f.PeakForecast(kService, day3, day3 + hours(24)), 150.0, 1.5);
  EXPECT_NEAR(f.Forecast(kService, day3 + hours(6)), 150.0, 1.5);
  EXPECT_NEAR(f.Forecast(kService, day3 + hours(18)), 50.0, 1.5);
  // Over 12:00..20:00 the sine falls from 100 to 50 and back to 50 + 6.7:
  // the peak is the start, 100.
  EXPECT_NEAR(f.PeakForecast(kService, day3 + hours(12), day3 + hours(20)), 100.0, 1.5);
}

TEST(LoadForecasterTest, FallsBackToRecentMaxWithMarginUnderADay) {
  LoadForecaster f;  // margin 0.2, window 1 h
  f.Observe(kService, At(minutes(0)), 200);   // falls out of the window later
  f.Observe(kService, At(minutes(90)), 50);
  f.Observe(kService, At(minutes(100)), 80);
  f.Observe(kService, At(minutes(110)), 60);
  EXPECT_FALSE(f.HasDailyProfile(kService));
  // Max over [50 min, 110 min] is 80; 80 * 1.2 = 96 at any time.
  EXPECT_DOUBLE_EQ(f.RecentMax(kService), 80.0);
  EXPECT_DOUBLE_EQ(f.Forecast(kService, At(hours(5))), 96.0);
  EXPECT_DOUBLE_EQ(f.PeakForecast(kService, At(minutes(110)), At(hours(3))), 96.0);
  EXPECT_DOUBLE_EQ(f.LastObserved(kService), 60.0);
}

TEST(LoadForecasterTest, UnknownServiceForecastsZero) {
  LoadForecaster f;
  EXPECT_EQ(f.Forecast(WorkloadId(99), At(hours(1))), 0.0);
  EXPECT_EQ(f.PeakForecast(WorkloadId(99), At(hours(1)), At(hours(2))), 0.0);
}

TEST(LoadForecasterTest, LevelFollowsADayThatRunsHigh) {
  LoadForecaster f;
  ObserveSineDays(f, 2);
  // Day 3 runs 30% above the profile from 00:00 to 03:00; after 180
  // observations with beta = 0.05 the ratio is 1.3 - 0.3 * 0.95^180, about 1.3.
  for (int m = 0; m < 180; ++m) {
    const Time t = At(hours(48) + minutes(m));
    f.Observe(kService, t, 1.3 * Sine(t));
  }
  const double peak = f.PeakForecast(kService, At(hours(51)), At(hours(57)));
  EXPECT_NEAR(peak, 1.3 * 150, 3.0);
}

TEST(LoadForecasterTest, LearnsAStepAndForecastsItAhead) {
  LoadForecaster f;
  // 30 rps, 100 rps from 12:00 to 14:00, two days.
  auto load = [](Time t) {
    const int64_t minute_of_day = (ToMillis(t) / 60000) % (24 * 60);
    return minute_of_day >= 12 * 60 && minute_of_day < 14 * 60 ? 100.0 : 30.0;
  };
  for (int m = 0; m < 2 * 24 * 60; ++m) f.Observe(kService, At(minutes(m)), load(At(minutes(m))));
  const Time day3 = At(hours(48));
  // At 11:00, the next 30 minutes are quiet and the next 90 include the step.
  EXPECT_NEAR(f.PeakForecast(kService, day3 + hours(11), day3 + hours(11) + minutes(30)), 30.0,
              0.5);
  EXPECT_NEAR(f.PeakForecast(kService, day3 + hours(11), day3 + hours(11) + minutes(90)), 100.0,
              0.5);
}

// The learned margin on a flat load that steps up unforeseen. 60 rps for an
// hour (minute samples, no profile yet: the short forecast is the recent max
// x 1.2 = 72), then 90 rps from 60 min. The forecast issued at 55 min (72)
// is the one that had to cover 60 min (error horizon 5 min): 90 / 72 = 1.25.
// The later ones, issued at 56..59 min, scored at 61..64 min, are 72 too:
// the margin is max(1.25, decayed) = 1.25 up to 64 min. From 65 min on the
// forecasts issued at >= 60 min are 90 x 1.2 = 108 and score 90/108 < 1, so
// the margin only decays: half-life 30 min, 30 minutes after 64 min it is
// 1 + 0.25 / 2 = 1.125, and after 300 minutes 1 + 0.25 / 1024.
TEST(LoadForecasterTest, MarginLearnsHowFarTheLoadOutranTheShortForecast) {
  LoadForecaster f;
  for (int m = 0; m < 60; ++m) f.Observe(kService, At(minutes(m)), 60);
  EXPECT_DOUBLE_EQ(f.Margin(kService), 1.0) << "a flat load is forecast exactly";
  for (int m = 60; m <= 64; ++m) f.Observe(kService, At(minutes(m)), 90);
  EXPECT_DOUBLE_EQ(f.Margin(kService), 1.25);
  for (int m = 65; m <= 94; ++m) f.Observe(kService, At(minutes(m)), 90);
  EXPECT_NEAR(f.Margin(kService), 1.125, 1e-12);
  for (int m = 95; m <= 364; ++m) f.Observe(kService, At(minutes(m)), 90);
  EXPECT_NEAR(f.Margin(kService), 1 + 0.25 / 1024, 1e-12);
  EXPECT_DOUBLE_EQ(f.Margin(WorkloadId(99)), 1.0) << "never observed";
}

// The margin is capped at max_margin (2): 10 rps for an hour, then 100 rps:
// 100 / (10 x 1.2) = 8.3, counted as 2 (the forecast issued at 59 min,
// scored at 64). A rise from a forecast of 0 counts as the cap too.
TEST(LoadForecasterTest, MarginIsCapped) {
  LoadForecaster f;
  for (int m = 0; m < 60; ++m) f.Observe(kService, At(minutes(m)), 10);
  for (int m = 60; m <= 64; ++m) f.Observe(kService, At(minutes(m)), 100);
  EXPECT_DOUBLE_EQ(f.Margin(kService), 2.0);

  LoadForecaster g;
  for (int m = 0; m < 60; ++m) g.Observe(kService, At(minutes(m)), 0);
  for (int m = 60; m <= 64; ++m) g.Observe(kService, At(minutes(m)), 5);
  EXPECT_DOUBLE_EQ(g.Margin(kService), 2.0);
}

// A daily profile that foresees a step learns no margin: two days of the
// 30 -> 100 rps step at 12:00 (the third day's forecast issued at 11:55 sees
// the 12:00 bucket's maximum, 100, within its 5-minute horizon), so on day 3
// the step is covered and the margin stays 1. A margin learned on day 1
// (no profile yet: 100 / 36 = 2.8, capped at 2) decayed over the 22 hours
// to 1 + 2^-44, below 1e-12.
TEST(LoadForecasterTest, AForeseenStepLearnsNoMargin) {
  LoadForecaster f;
  auto load = [](int minute) {
    const int minute_of_day = minute % (24 * 60);
    return minute_of_day >= 12 * 60 && minute_of_day < 14 * 60 ? 100.0 : 30.0;
  };
  for (int m = 0; m < 3 * 24 * 60; ++m) f.Observe(kService, At(minutes(m)), load(m));
  EXPECT_NEAR(f.Margin(kService), 1.0, 1e-12);
}

TEST(LoadForecasterTest, PeakSeesAStepInsideABucketAtFullHeight) {
  LoadForecaster f;
  // 10 rps, 40 rps from 19:12 to 20:00, two days. The 19:10-19:15 bucket
  // holds 10, 10, 40, 40, 40: mean 28, max 40.
  auto load = [](Time t) {
    const int64_t minute_of_day = (ToMillis(t) / 60000) % (24 * 60);
    return minute_of_day >= 19 * 60 + 12 && minute_of_day < 20 * 60 ? 40.0 : 10.0;
  };
  for (int m = 0; m < 2 * 24 * 60; ++m) f.Observe(kService, At(minutes(m)), load(At(minutes(m))));
  const Time day3 = At(hours(48));
  // At 19:06 a window to 19:10 touches the bucket: the full 40 is expected
  // from 19:10 on, before the step at 19:12.
  EXPECT_NEAR(f.PeakForecast(kService, day3 + hours(19) + minutes(6),
                             day3 + hours(19) + minutes(10)),
              40.0, 0.5);
  // A window that ends at 19:09 stays out of that bucket: its peak is the
  // mean forecast at 19:09, interpolated between the centres 19:07:30 (10)
  // and 19:12:30 (28): 10 + 18 * 1.5 / 5 = 15.4.
  EXPECT_NEAR(f.PeakForecast(kService, day3 + hours(19), day3 + hours(19) + minutes(9)), 15.4,
              0.01);
  // The point forecast is the mean: at the bucket centre 19:12:30, 28.
  EXPECT_NEAR(f.Forecast(kService, day3 + hours(19) + minutes(12) + seconds(30)), 28.0, 0.5);
}

TEST(LoadForecasterTest, IgnoresOutOfOrderObservations) {
  LoadForecaster f;
  f.Observe(kService, At(minutes(10)), 40);
  f.Observe(kService, At(minutes(5)), 400);
  EXPECT_DOUBLE_EQ(f.RecentMax(kService), 40.0);
}

// Day 1 at 100 rps, day 2 at 120: every bucket's profile is
// 0.5 x 120 + 0.5 x 100 = 110 and its error |120 - 100| = 20 (the level stays
// 1 with beta 0), so over any interval of day 3 the band is 110 - 20 = 90,
// 110, 110 + 20 = 130.
TEST(LoadForecasterTest, BandIsTheProfileGiveOrTakeItsLearnedError) {
  ForecasterOptions options;
  options.beta = 0;
  LoadForecaster f(options);
  for (int m = 0; m < 2 * 24 * 60; ++m) f.Observe(kService, At(minutes(m)), m < 24 * 60 ? 100 : 120);
  const Time day3 = At(hours(48));
  const LoadBand band = f.Band(kService, day3 + hours(1), day3 + hours(1) + minutes(10) - Duration(1));
  EXPECT_DOUBLE_EQ(band.planned, 110.0);
  EXPECT_DOUBLE_EQ(band.low, 90.0);
  EXPECT_DOUBLE_EQ(band.high, 130.0);
  EXPECT_DOUBLE_EQ(band.planned, f.PeakForecast(kService, day3 + hours(1), day3 + hours(1) + minutes(10) - Duration(1)));
}

// One day seen, none repeated: no error is measured yet, so each bucket
// counts fallback_margin (0.2) x its mean, 20, as its error: 80, 100, 120.
TEST(LoadForecasterTest, BandBeforeAnyErrorIsMeasuredUsesTheFallbackMargin) {
  LoadForecaster f;
  for (int m = 0; m <= 24 * 60; ++m) f.Observe(kService, At(minutes(m)), 100);
  ASSERT_TRUE(f.HasDailyProfile(kService));
  const LoadBand band = f.Band(kService, At(hours(25)), At(hours(26)));
  EXPECT_DOUBLE_EQ(band.planned, 100.0);
  EXPECT_DOUBLE_EQ(band.low, 80.0);
  EXPECT_DOUBLE_EQ(band.high, 120.0);
}

// Half an hour at 100 rps, no profile: planned is the fallback's 100 x 1.2,
// the band 100 x (1 - 0.2) = 80 to 100 x (1 + 2 x 0.2) = 140; an unknown
// service has an empty band.
TEST(LoadForecasterTest, BandWithoutAProfileIsAFlatGuessAroundTheRecentMax) {
  LoadForecaster f;
  for (int m = 0; m < 30; ++m) f.Observe(kService, At(minutes(m)), 100);
  const LoadBand band = f.Band(kService, At(hours(1)), At(hours(2)));
  EXPECT_DOUBLE_EQ(band.planned, 120.0);
  EXPECT_DOUBLE_EQ(band.low, 80.0);
  EXPECT_DOUBLE_EQ(band.high, 140.0);
  const LoadBand none = f.Band(WorkloadId(99), At(hours(1)), At(hours(2)));
  EXPECT_EQ(none.planned + none.low + none.high, 0.0);
}

}  // namespace
}  // namespace tidal
