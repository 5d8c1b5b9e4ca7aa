#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <string>

#include "core/common/ids.h"
#include "core/common/rng.h"
#include "core/common/status.h"
#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/model/cluster.h"

namespace tidal {
namespace {

StatusOr<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("gpus: expected a positive integer");
  return v;
}

Status UsesMacros(int v, int* out) {
  TIDAL_ASSIGN_OR_RETURN(int parsed, ParsePositive(v));
  *out = parsed * 2;
  return Status::Ok();
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = NotFound("queue 'nlp' is unknown");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: queue 'nlp' is unknown");
  EXPECT_EQ(s.WithContext("cluster.yaml:3: ").message(), "cluster.yaml:3: queue 'nlp' is unknown");
}

TEST(StatusTest, MacrosPropagateErrors) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = UsesMacros(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 8);  // untouched on error
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  StatusOr<int> bad = ParsePositive(0);
  EXPECT_DEATH((void)bad.value(), "value\\(\\) on an error");
}

TEST(RngTest, SameSeedSameSequence) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    differs |= (x != c.NextU64());
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, DrawsStayInRange) {
  Rng rng(7);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    int64_t k = rng.UniformInt(3, 5);
    ASSERT_GE(k, 3);
    ASSERT_LE(k, 5);
    seen.insert(k);
    ASSERT_GT(rng.Exponential(2.0), 0.0);
  }
  EXPECT_EQ(seen.size(), 3u);
}

TEST(RngTest, ExponentialMeanIsClose) {
  Rng rng(1);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) sum += rng.Exponential(10.0);
  // Standard error of the mean = 10 / sqrt(20000) ≈ 0.07; allow 5 sigma.
  EXPECT_NEAR(sum / n, 10.0, 0.35);
}

TEST(TimeTest, ConversionsKeepUnits) {
  Time t = TimeFromMillis(90'500);
  EXPECT_EQ(ToMillis(t), 90'500);
  EXPECT_DOUBLE_EQ(ToSeconds(t), 90.5);
  EXPECT_EQ(SecondsF(1.25), milliseconds(1250));
  ManualClock clock(TimeFromMillis(0));
  clock.Advance(minutes(2));
  EXPECT_EQ(ToMillis(clock.Now()), 120'000);
}

TEST(IdsTest, StrongIdsCompareAndDefaultInvalid) {
  NodeId none;
  EXPECT_FALSE(none.valid());
  EXPECT_LT(NodeId(1), NodeId(2));
  EXPECT_FALSE(WorkloadId().valid());
  EXPECT_TRUE(WorkloadId(9).valid());
}

TEST(ModelTest, MasksCountGpus) {
  Node n;
  n.gpu_count = 8;
  EXPECT_EQ(n.all_gpus(), GpuMask{0xFF});
  Allocation a;
  a.pods = {{NodeId(0), 0x0F}, {NodeId(1), 0x03}};
  // 4 GPUs on node 0 + 2 on node 1.
  EXPECT_EQ(a.gpu_count(), 6);
}

}  // namespace
}  // namespace tidal
