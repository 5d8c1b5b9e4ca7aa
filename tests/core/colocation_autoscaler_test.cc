#include "core/colocation/autoscaler.h"

#include <gtest/gtest.h>

#include "tests/support/colocation_fixtures.h"

namespace tidal {
namespace {

using colocation_testing::InferenceService;

Time At(Duration d) { return Time(d); }

TEST(ColdStartTest, DeclaredElseEstimatedFromModelSize) {
  InferenceSpec spec;
  spec.cold_start = seconds(90);
  spec.model_size_gib = 100;
  EXPECT_EQ(EstimateColdStart(spec), seconds(90));
  spec.cold_start = milliseconds(0);
  spec.model_size_gib = 20;
  spec.model_source = ModelSource::kLocalCache;
  // 30 s container start + 20 GiB / 2 GiB/s = 40 s.
  EXPECT_EQ(EstimateColdStart(spec), seconds(40));
  spec.model_source = ModelSource::kSharedStorage;
  // 30 s + 20 GiB / 0.5 GiB/s = 70 s.
  EXPECT_EQ(EstimateColdStart(spec), seconds(70));
  ColdStartModel fast{seconds(5), 4.0, 1.0};
  // 5 s + 20 / 1 = 25 s.
  EXPECT_EQ(EstimateColdStart(spec, fast), seconds(25));
}

TEST(RequiredReplicasTest, LatencyTargetOrStabilityWithHeadroom) {
  InferenceSpec spec;
  spec.replica_capacity_rps = 10;
  // No target: floor(40 * 1.2 / 10) + 1 = floor(4.8) + 1 = 5.
  EXPECT_EQ(RequiredReplicas(spec, 40, 0.2), 5);
  // 8 rps, target 1 s, no headroom: 1 replica is 2302 ms, 2 are 515 ms.
  spec.target_p99 = milliseconds(1000);
  EXPECT_EQ(RequiredReplicas(spec, 8, 0.0), 2);
  EXPECT_EQ(RequiredReplicas(spec, 0, 0.2), 0);
}

TEST(AutoscalerTest, ClampsToMinAndMaxPods) {
  Autoscaler scaler({0.2, minutes(10)});
  const Workload svc = InferenceService(1, 1, 10, 2, 6);
  EXPECT_EQ(scaler.Update(svc, 0, 0, At(minutes(0))), 2);
  // 1000 rps wants 121 replicas; max is 6.
  EXPECT_EQ(scaler.Update(svc, 1000, 0, At(minutes(1))), 6);
}

TEST(AutoscalerTest, ScalesUpAtOnceOnCurrentOrForecastLoad) {
  Autoscaler scaler({0.2, minutes(10)});
  Workload svc = InferenceService(1, 1, 10, 1, 100);
  svc.pods = 1;
  // floor(10 * 1.2 / 10) + 1 = 2.
  EXPECT_EQ(scaler.Update(svc, 10, 0, At(minutes(0))), 2);
  // A forecast of 40 rps: floor(4.8) + 1 = 5, the same minute.
  EXPECT_EQ(scaler.Update(svc, 10, 40, At(minutes(1))), 5);
  // Current 90 rps: floor(10.8) + 1 = 11.
  EXPECT_EQ(scaler.Update(svc, 90, 0, At(minutes(2))), 11);
  EXPECT_EQ(scaler.Target(svc.id), 11);
}

TEST(AutoscalerTest, NoisyLoadDoesNotFlapAndScaleDownWaitsTheDelay) {
  Autoscaler scaler({0.2, minutes(10)});
  const Workload svc = InferenceService(1, 1, 10, 1, 100);
  // 40 and 30 rps alternating each minute: needs 5 (4.8 -> 5) and 4 (3.6 -> 4).
  int changes = 0;
  int last = -1;
  for (int m = 0; m < 60; ++m) {
    const int target = scaler.Update(svc, m % 2 == 0 ? 40 : 30, 0, At(minutes(m)));
    if (last != -1 && target != last) ++changes;
    last = target;
  }
  EXPECT_EQ(changes, 0);
  EXPECT_EQ(last, 5);
  // The last 40 rps came at minute 58; 30 rps from minute 59 on. The need
  // has been 4 for 10 minutes once the minute-58 sample is over 10 minutes old.
  for (int m = 59; m <= 68; ++m) {
    EXPECT_EQ(scaler.Update(svc, 30, 0, At(minutes(m))), 5) << "minute " << m;
  }
  EXPECT_EQ(scaler.Update(svc, 30, 0, At(minutes(69))), 4);
}

TEST(AutoscalerTest, ScaleDownGoesToTheHighestNeedOfTheWindow) {
  Autoscaler scaler({0.2, minutes(10)});
  const Workload svc = InferenceService(1, 1, 10, 1, 100);
  EXPECT_EQ(scaler.Update(svc, 90, 0, At(minutes(0))), 11);
  // Minutes 1..11 at 40 rps (need 5) except minute 6 at 60 rps (need 8).
  int target = 0;
  for (int m = 1; m <= 11; ++m) {
    target = scaler.Update(svc, m == 6 ? 60 : 40, 0, At(minutes(m)));
  }
  // At minute 11 the window (1, 11] holds needs 5 and 8: down to 8, not 5.
  EXPECT_EQ(target, 8);
  // Minute 16: the minute-6 sample is still inside (6 >= 16 - 10).
  for (int m = 12; m <= 16; ++m) target = scaler.Update(svc, 40, 0, At(minutes(m)));
  EXPECT_EQ(target, 8);
  EXPECT_EQ(scaler.Update(svc, 40, 0, At(minutes(17))), 5);
}

}  // namespace
}  // namespace tidal
