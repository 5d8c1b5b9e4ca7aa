#include "sim/load_profile.h"

#include <gtest/gtest.h>

#include "sim/event_queue.h"
#include "sim/summary.h"

namespace tidal::sim {
namespace {

TEST(LoadProfileTest, IsAStepFunctionPerService) {
  auto p = ParseLoadCsv("# a comment\ntime_s,service,rps\n0,chat,10\n60,chat,20\n30,code,5\n", "load.csv");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->Rps("chat", 0), 10);
  EXPECT_DOUBLE_EQ(p->Rps("chat", 59.9), 10);
  EXPECT_DOUBLE_EQ(p->Rps("chat", 60), 20);
  EXPECT_DOUBLE_EQ(p->Rps("chat", 1e6), 20);  // the last rate holds
  EXPECT_DOUBLE_EQ(p->Rps("code", 10), 0);    // before its first row
  EXPECT_DOUBLE_EQ(p->Rps("missing", 10), 0);
  EXPECT_DOUBLE_EQ(p->end_s(), 60);
  EXPECT_EQ(p->services(), (std::vector<std::string>{"chat", "code"}));
}

TEST(LoadProfileTest, RepeatsWithAPeriod) {
  auto p = ParseLoadCsv("time_s,service,rps\n0,chat,10\n43200,chat,30\n", "load.csv");
  ASSERT_TRUE(p.ok());
  p->set_period_s(86400);
  // 1 day + 13 h is 13 h into the second day: 30.
  EXPECT_DOUBLE_EQ(p->Rps("chat", 86400 + 13 * 3600), 30);
  EXPECT_DOUBLE_EQ(p->Rps("chat", 2 * 86400 + 3600), 10);
}

TEST(LoadProfileTest, RoundTripsThroughCsv) {
  auto p = ParseLoadCsv("time_s,service,rps\n0,b,1.5\n0,a,2\n60,a,3\n", "x");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ToCsv(), "time_s,service,rps\n0,a,2.0000\n0,b,1.5000\n60,a,3.0000\n");
}

TEST(LoadProfileTest, BadRowsNameLineAndField) {
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& c : {Case{"time,service,rps\n", "load.csv:1: header"},
                        Case{"time_s,service,rps\n0,chat,-1\n", "load.csv:2: field 'rps'"},
                        Case{"time_s,service,rps\nabc,chat,1\n", "load.csv:2: field 'time_s'"},
                        Case{"time_s,service,rps\n0,,1\n", "load.csv:2: field 'service'"},
                        Case{"time_s,service,rps\n60,chat,1\n0,chat,1\n", "load.csv:3: field 'time_s'"},
                        Case{"time_s,service,rps\n0,chat\n", "load.csv:2: field 'row'"},
                        Case{"", "empty file"}}) {
    auto p = ParseLoadCsv(c.text, "load.csv");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_NE(p.status().message().find(c.expect), std::string::npos) << p.status().message();
  }
}

TEST(LoadProfileTest, DiurnalFactorPeaksAndTroughs) {
  LoadSeries s;
  s.step_s = 3600;
  s.rps.assign(24, 100.0);
  ApplyDiurnal(s, 0.25, 14.5 * 3600, 86400);
  // Bucket 14 is centred on 14:30, the peak: factor 1. Bucket 2 (02:30) is half a
  // day away: factor 0.25.
  EXPECT_NEAR(s.rps[14], 100, 1e-9);
  EXPECT_NEAR(s.rps[2], 25, 1e-9);
  EXPECT_GT(s.rps[10], s.rps[6]);
}

TEST(EventQueueTest, PopsByTimeThenKindThenInsertion) {
  EventQueue q;
  q.Push(TimeFromMillis(2000), EventKind::kArrival, 1);
  q.Push(TimeFromMillis(1000), EventKind::kPass, 2);
  q.Push(TimeFromMillis(1000), EventKind::kArrival, 3);
  q.Push(TimeFromMillis(1000), EventKind::kVictimExit, 4);
  q.Push(TimeFromMillis(1000), EventKind::kArrival, 5);
  std::vector<uint64_t> order;
  while (!q.empty()) order.push_back(q.Pop().subject);
  // At 1 s: the exit, the two arrivals in insertion order, the pass; then 2 s.
  EXPECT_EQ(order, (std::vector<uint64_t>{4, 3, 5, 2, 1}));
}

TEST(SummaryTest, NearestRankPercentiles) {
  std::vector<double> v = {4, 1, 3, 2};
  // Ranks: p50 -> ceil(0.5*4) = 2nd = 2; p95 -> ceil(3.8) = 4th = 4; p0 -> 1st.
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 2);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.95), 4);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  std::vector<double> empty;
  EXPECT_DOUBLE_EQ(Percentile(empty, 0.5), 0);
  EXPECT_DOUBLE_EQ(Mean({1, 2, 6}), 3);
}

TEST(SummaryTest, JsonHasTheDocumentedFields) {
  Summary s;
  s.policy = "p";
  s.colocation = "static";
  s.training.queue_wait_p95_s = 12.3456789;
  const auto j = s.ToJson();
  for (const char* k : {"policy", "colocation", "sim_wall_s"}) EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"jobs", "completed", "queue_wait_mean_s", "queue_wait_p50_s", "queue_wait_p95_s",
                        "queue_wait_p99_s", "jct_mean_s", "gang_partial_starts", "gang_start_success_rate",
                        "preemptions", "lost_gpu_hours", "recovery_time_p50_s", "recovery_time_p95_s"})
    EXPECT_TRUE(j["training"].contains(k)) << k;
  for (const char* k : {"services", "slo_attainment", "minute_p99_p95_ms", "latency_p99_ms", "scale_ups",
                        "scale_up_success_rate", "time_to_capacity_p50_s", "time_to_capacity_p99_s",
                        "forecast_error_mape", "return_leads", "return_lead_p50_s", "return_lead_p95_s"})
    EXPECT_TRUE(j["inference"].contains(k)) << k;
  EXPECT_TRUE(j["batch_inference"].contains("deadline_met_rate"));
  EXPECT_TRUE(j["debug"].contains("queue_wait_p95_s"));
  for (const char* k : {"gpu_allocation_ratio", "borrowed_gpu_hours", "reclaims", "reclaim_latency_p95_s"})
    EXPECT_TRUE(j["cluster"].contains(k)) << k;
  for (const char* k : {"cycles", "cycle_p50_ms", "cycle_p99_ms"}) EXPECT_TRUE(j["scheduler"].contains(k)) << k;
  EXPECT_DOUBLE_EQ(j["training"]["queue_wait_p95_s"].get<double>(), 12.345679);  // 6 decimals
}

}  // namespace
}  // namespace tidal::sim
