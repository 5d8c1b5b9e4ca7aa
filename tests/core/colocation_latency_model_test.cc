#include "core/colocation/latency_model.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace tidal {
namespace {

TEST(ErlangTest, SmallCasesByHand) {
  // B(1, a) = a / (1 + a): a = 0.5 -> 1/3.
  EXPECT_NEAR(ErlangB(1, 0.5), 1.0 / 3, 1e-12);
  // B(1, 1) = 0.5; B(2, 1) = 1 * 0.5 / (2 + 0.5) = 0.2.
  EXPECT_NEAR(ErlangB(2, 1.0), 0.2, 1e-12);
  // C(2, 1): rho = 0.5, 0.2 / (1 - 0.5 * 0.8) = 1/3; also 2 rho^2 / (1 + rho).
  EXPECT_NEAR(ErlangC(2, 1.0), 1.0 / 3, 1e-12);
  // M/M/1: C(1, a) = rho.
  EXPECT_NEAR(ErlangC(1, 0.8), 0.8, 1e-12);
  // C(4, 0.8): B = 0.444444, 0.150943, 0.038694, 0.0076794;
  // 0.0076794 / (1 - 0.2 * 0.9923206) = 0.009581.
  EXPECT_NEAR(ErlangC(4, 0.8), 0.009581, 1e-5);
  // At or over capacity everyone waits.
  EXPECT_EQ(ErlangC(3, 3.0), 1.0);
  EXPECT_EQ(ErlangC(0, 0.5), 1.0);
  EXPECT_EQ(ErlangC(3, 0.0), 0.0);
}

TEST(ErlangTest, StableForLargeServerCounts) {
  // The factorial form overflows long before c = 5000; the recursion does not.
  const double c = ErlangC(5000, 4900.0);
  EXPECT_GT(c, 0.0);
  EXPECT_LT(c, 1.0);
  EXPECT_TRUE(std::isfinite(c));
  // More servers for the same load: less waiting.
  EXPECT_LT(ErlangC(5100, 4900.0), c);
}

TEST(LatencyModelTest, SingleReplicaIsMM1) {
  // lambda = 8, mu = 10: T ~ Exp(2) so P99 = ln(100)/2 s = 2302.585 ms,
  // P95 = ln(20)/2 s = 1497.866 ms; E[W] = rho/(mu - lambda) = 0.8/2 = 400 ms.
  const QueueLatency q = ModelLatency(8, 10, 1);
  EXPECT_TRUE(q.stable);
  EXPECT_NEAR(q.utilization, 0.8, 1e-12);
  EXPECT_NEAR(q.p_wait, 0.8, 1e-12);
  EXPECT_NEAR(q.mean_wait_ms, 400.0, 1e-9);
  EXPECT_NEAR(q.mean_response_ms, 500.0, 1e-9);
  EXPECT_NEAR(q.p99_ms, 1000 * std::log(100.0) / 2, 1e-3);
  EXPECT_NEAR(q.p95_ms, 1000 * std::log(20.0) / 2, 1e-3);
}

TEST(LatencyModelTest, TwoReplicasWhereThetaEqualsMu) {
  // lambda = 10, mu = 10, c = 2: C = 1/3, theta = 2*10 - 10 = 10 = mu, so
  // P(T > t) = (2/3) e^{-10t} + (1/3)(1 + 10t) e^{-10t} = e^{-10t}(1 + 10t/3).
  const double p99_s = ResponseTimeQuantileMs(10, 10, 2, 0.99) / 1000;
  EXPECT_NEAR(std::exp(-10 * p99_s) * (1 + 10 * p99_s / 3), 0.01, 1e-8);
  // Wait P99: (1/3) e^{-10t} = 0.01 -> t = ln(33.33)/10 = 350.656 ms.
  EXPECT_NEAR(WaitTimeQuantileMs(10, 10, 2, 0.99), 1000 * std::log(100.0 / 3) / 10, 1e-6);
  // Wait P50: C = 1/3 <= 0.5, so half the requests never wait.
  EXPECT_EQ(WaitTimeQuantileMs(10, 10, 2, 0.5), 0.0);
}

TEST(LatencyModelTest, GeneralCaseMatchesClosedFormTail) {
  // lambda = 8, mu = 10, c = 2: C = 0.228571, theta = 12,
  // P(T > t) = 0.771429 e^{-10t} + 0.228571 (10 e^{-12t} - 12 e^{-10t}) / (10 - 12)
  //          = 2.142857 e^{-10t} - 1.142857 e^{-12t}; at P99 that is 0.01.
  const double t = ResponseTimeQuantileMs(8, 10, 2, 0.99) / 1000;
  EXPECT_NEAR(2.142857 * std::exp(-10 * t) - 1.142857 * std::exp(-12 * t), 0.01, 1e-6);
  EXPECT_GT(t, 0.50);  // 0.0116 at t = 0.50
  EXPECT_LT(t, 0.52);  // 0.0096 at t = 0.52
}

TEST(LatencyModelTest, OverloadAndNoReplicasAreInfinite) {
  EXPECT_FALSE(ModelLatency(20, 10, 2).stable);
  EXPECT_TRUE(std::isinf(ModelLatency(20, 10, 2).p99_ms));
  EXPECT_TRUE(std::isinf(ModelLatency(1, 10, 0).p99_ms));
  // No load: the bare service time, P99 = ln(100)/10 s = 460.517 ms.
  EXPECT_NEAR(ModelLatency(0, 10, 1).p99_ms, 100 * std::log(100.0), 1e-3);
}

TEST(MinReplicasTest, SmallestCountMeetingTarget) {
  // 8 rps at 10 rps per replica: c = 1 gives 2302.6 ms, c = 2 about 515 ms.
  EXPECT_EQ(MinReplicasForTarget(8, 10, milliseconds(3000), 0), 1);
  EXPECT_EQ(MinReplicasForTarget(8, 10, milliseconds(1000), 0), 2);
  // Headroom 0.5 sizes for 12 rps, over one replica's 10: at least 2.
  EXPECT_EQ(MinReplicasForTarget(8, 10, milliseconds(3000), 0.5), 2);
  EXPECT_EQ(MinReplicasForTarget(0, 10, milliseconds(1000), 0.2), 0);
}

TEST(MinReplicasTest, UnreachableTargetStopsWhereWaitingVanishes) {
  // 100 ms is under the bare service P99 of 460.5 ms. C(c, 0.8) is
  // 0.229 (c=2), 0.052 (c=3), 0.0096 (c=4): the first <= 1% is 4.
  EXPECT_EQ(MinReplicasForTarget(8, 10, milliseconds(100), 0), 4);
}

TEST(MinReplicasTest, MeetsTargetAndOneFewerDoesNot) {
  for (double rps : {5.0, 50.0, 500.0, 5000.0}) {
    const int c = MinReplicasForTarget(rps, 10, milliseconds(600), 0.2);
    EXPECT_LE(ResponseTimeQuantileMs(rps * 1.2, 10, c, 0.99), 600.0) << rps;
    EXPECT_GT(ResponseTimeQuantileMs(rps * 1.2, 10, c - 1, 0.99), 600.0) << rps;
  }
}

// MinReplicasForTarget steps ErlangB up one server at a time; the count it
// finds must be the one the definition gives, computing each candidate
// count from scratch (ErlangC and ResponseTimeQuantileMs), for loads from a
// fraction of a replica to thousands of them.
TEST(MinReplicasTest, SteppedErlangGivesTheCountsComputedFromScratch) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_rps(-2, 3.5);
  std::uniform_real_distribution<double> log_capacity(-1, 2);
  std::uniform_int_distribution<int> target_ms(1, 5000);
  std::uniform_real_distribution<double> headroom(0, 0.5);
  for (int i = 0; i < 500; ++i) {
    const double rps = std::pow(10.0, log_rps(rng));
    const double capacity = std::pow(10.0, log_capacity(rng));
    const Duration target = milliseconds(target_ms(rng));
    const double h = headroom(rng);
    const double lambda = rps * (1 + h);
    const bool reachable = static_cast<double>(target.count()) > std::log(100.0) / capacity * 1000.0;
    int expected = static_cast<int>(std::floor(lambda / capacity)) + 1;
    while (reachable ? ResponseTimeQuantileMs(lambda, capacity, expected, 0.99) > target.count()
                     : ErlangC(expected, lambda / capacity) > 0.01) {
      ++expected;
    }
    ASSERT_EQ(MinReplicasForTarget(rps, capacity, target, h), expected)
        << "rps " << rps << ", capacity " << capacity << ", target " << target.count() << " ms, headroom " << h;
  }
}

}  // namespace
}  // namespace tidal
