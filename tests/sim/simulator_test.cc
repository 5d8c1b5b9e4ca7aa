#include "sim/simulator.h"

#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "sim/report.h"
#include "sim/sim_output.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

SimInput SmallInput(int reserved, int shared, int training) {
  return testing::SmallSimInput(reserved, shared, training);
}

// Checkpoints every 10 min.
SimWorkload Training(const SimInput& in, const std::string& name, int pods, int gpus_per_pod,
                     double duration_s, double submit_s) {
  return testing::SimTraining(in, name, pods, gpus_per_pod, duration_s, submit_s, seconds(600));
}

SimWorkload Service(const SimInput& in, const std::string& name) {
  return testing::SimService(in, name, 10, 16, milliseconds(1000), seconds(60));
}

TEST(SimulatorTest, OneJobRunsForItsDuration) {
  SimInput in = SmallInput(1, 1, 2);
  in.workloads.push_back(Training(in, "solo", 1, 8, 1000, 0));
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_EQ(s.training.jobs, 1);
  EXPECT_EQ(s.training.completed, 1);
  EXPECT_DOUBLE_EQ(s.training.queue_wait_mean_s, 0);
  EXPECT_DOUBLE_EQ(s.training.jct_mean_s, 1000);
  EXPECT_DOUBLE_EQ(s.sim_duration_s, 1000);
  // 8 of 32 GPUs for the whole 1000 s: 8 * 1000 / (32 * 1000) = 0.25.
  EXPECT_DOUBLE_EQ(s.cluster.gpu_allocation_ratio, 0.25);
  EXPECT_EQ(s.scheduler.invalid_decisions, 0);
  EXPECT_GE(s.scheduler.cycles, 1);
}

TEST(SimulatorTest, QueueWaitIsMeasuredFromSubmitToStart) {
  // 16 training GPUs; two 16-GPU gangs: the second waits for the first (500 s).
  SimInput in = SmallInput(1, 0, 2);
  in.workloads.push_back(Training(in, "first", 2, 8, 500, 0));
  in.workloads.push_back(Training(in, "second", 2, 8, 500, 100));
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_EQ(s.training.completed, 2);
  // Waits 0 and 500 - 100 = 400: mean 200; JCTs 500 and 1000 - 100 = 900.
  EXPECT_DOUBLE_EQ(s.training.queue_wait_mean_s, 200);
  EXPECT_DOUBLE_EQ(s.training.queue_wait_p99_s, 400);
  EXPECT_DOUBLE_EQ(s.training.jct_mean_s, 700);
  EXPECT_EQ(s.training.gang_partial_starts, 0);
  EXPECT_DOUBLE_EQ(s.training.gang_start_success_rate, 1.0);
}

// One 8-GPU node; preemption needs a priority gap of 100. V (no
// checkpoints: 500) runs from t=0; P (checkpointed: 550) waits from t=100
// (550 - 500 < 100: it does not preempt V); a debug session D (500 + 100 =
// 600) preempts V at t=1000 (600 - 500 >= 100; V ran >= 5 min). V exits at
// its grace deadline (60 s) and D runs 600 s. Without a requeued bonus P
// (550) goes next for 3600 s and V (500) resumes after it: recovery ~ 1000
// + 60 + 600 + 3600 - 1000 = 4260 s. With a bonus of 60 (below the gap, as
// the policy loader requires), V waits at 560 > 550 and resumes when D ends
// (~660 s); running again at 500, it is not preempted by P (gap 50).
Summary RunPreemptedVictim(int requeued_bonus) {
  SimInput in = SmallInput(0, 0, 1);
  // Research guarantees 16, so no start here borrows (a start that would is
  // valued at the borrowing adjustment, -200, and D could not preempt).
  for (Queue& q : in.cluster.queues) {
    if (q.name == "research") q.guaranteed_gpus = 16;
  }
  in.policy.preemption.min_priority_gap = 100;
  in.policy.templates[0].attributes.requeued_bonus = requeued_bonus;
  in.workloads.push_back(testing::SimTraining(in, "v", 1, 8, 3600, 0, Duration(0)));
  in.workloads.push_back(Training(in, "p", 1, 8, 3600, 100));
  SimWorkload d = testing::SimTraining(in, "d", 1, 8, 600, 1000, Duration(0));
  d.workload.kind = WorkloadKind::kDebug;
  in.workloads.push_back(d);
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(in, o, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->summary : Summary();
}

TEST(SimulatorTest, ARequeuedVictimResumesAheadOfItsPeersWithTheBonus) {
  const Summary without = RunPreemptedVictim(0);
  const Summary with = RunPreemptedVictim(60);
  for (const Summary* s : {&without, &with}) {
    EXPECT_EQ(s->training.completed, 2);
    EXPECT_EQ(s->training.preemptions, 1);
    ASSERT_EQ(s->training.recovery_by_cause.count("priority"), 1u);
    EXPECT_EQ(s->training.recovery_by_cause.at("priority").count, 1);
  }
  EXPECT_GT(without.training.recovery_time_p95_s, 4000);
  EXPECT_LT(with.training.recovery_time_p95_s, 1000);
  EXPECT_DOUBLE_EQ(with.training.recovery_by_cause.at("priority").p95_s, with.training.recovery_time_p95_s);
}

TEST(SimulatorTest, ScoresServiceMinutesFromTheLatencyModel) {
  SimInput in = SmallInput(2, 0, 1);
  in.workloads.push_back(Service(in, "chat"));
  auto load = ParseLoadCsv("time_s,service,rps\n0,chat,30\n", "load.csv");
  ASSERT_TRUE(load.ok());
  in.load = *load;
  SimOptions o;
  o.wall_times = false;
  o.end_s = 3600;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_EQ(s.inference.services, 1);
  // Scored from the minute after the first replicas are ready (cold start 60 s)
  // to the end: 58 or 59 minutes, all met at 30 req/s with enough replicas.
  EXPECT_GE(s.inference.service_minutes, 57);
  EXPECT_LE(s.inference.service_minutes, 59);
  EXPECT_DOUBLE_EQ(s.inference.slo_attainment.value_or(-1), 1.0);
  EXPECT_GT(s.inference.latency_p99_ms.value_or(0), 100);  // at least the service time's P99 tail
  EXPECT_LT(s.inference.latency_p99_ms.value_or(0), 1000);
  EXPECT_LE(s.inference.minute_p99_p95_ms.value_or(1e9), *s.inference.latency_p99_ms);
  ASSERT_EQ(r->series.services.size(), 1u);
  EXPECT_EQ(r->series.services[0].name, "chat");
  EXPECT_GE(r->series.services[0].ready.back(), 4);  // 30 req/s over 10 req/s replicas
}

TEST(SimulatorTest, ARunWithNoScoredServiceReportsNoSloFigures) {
  // Training only: no service-minute was scored and no scale-up happened, so
  // there is no attainment, latency or scale-up success to report (not 1.0).
  SimInput in = SmallInput(1, 0, 1);
  in.workloads.push_back(Training(in, "job", 1, 8, 600, 0));
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_EQ(s.inference.service_minutes, 0);
  EXPECT_FALSE(s.inference.slo_attainment.has_value());
  EXPECT_FALSE(s.inference.minute_p99_p95_ms.has_value());
  EXPECT_FALSE(s.inference.scale_up_success_rate.has_value());
  EXPECT_EQ(FormatRate(s.inference.slo_attainment), "n/a");
  const auto j = s.ToJson();
  EXPECT_TRUE(j["inference"]["slo_attainment"].is_null());
  EXPECT_TRUE(j["inference"]["minute_p99_p95_ms"].is_null());
  EXPECT_TRUE(j["inference"]["latency_p99_ms"].is_null());
  EXPECT_TRUE(j["inference"]["scale_up_success_rate"].is_null());
  EXPECT_EQ(FormatRate(0.99337), "0.9934");
}

TEST(SimulatorTest, SameInputsAndSeedGiveByteIdenticalOutput) {
  SimInput in = SmallInput(1, 2, 2);
  in.workloads.push_back(Service(in, "chat"));
  for (int i = 0; i < 12; ++i)
    in.workloads.push_back(Training(in, "job-" + std::to_string(i), 1 + i % 2, 4 + 4 * (i % 2),
                                    900 + 300 * i, 120.0 * i));
  auto load = ParseLoadCsv("time_s,service,rps\n0,chat,10\n1800,chat,60\n3600,chat,20\n", "load.csv");
  ASSERT_TRUE(load.ok());
  in.load = *load;
  SimOptions o;
  o.wall_times = false;
  o.seed = 7;
  o.load_noise = 0.2;
  o.end_s = 3 * 3600;
  const std::string a = testing::MakeScratchDir("det-a");
  const std::string b = testing::MakeScratchDir("det-b");
  ASSERT_TRUE(RunToDirectory(in, o, a).ok());
  ASSERT_TRUE(RunToDirectory(in, o, b).ok());
  for (const char* f : {"summary.json", "events.jsonl", "report.html", "timeseries.csv"}) {
    const std::string fa = testing::ReadWholeFile(a + "/" + f);
    EXPECT_FALSE(fa.empty()) << f;
    EXPECT_EQ(fa, testing::ReadWholeFile(b + "/" + f)) << f;
  }
  // A different seed draws different load noise.
  o.seed = 8;
  const std::string c = testing::MakeScratchDir("det-c");
  ASSERT_TRUE(RunToDirectory(in, o, c).ok());
  EXPECT_NE(testing::ReadWholeFile(a + "/timeseries.csv"), testing::ReadWholeFile(c + "/timeseries.csv"));
}

TEST(SimulatorTest, RejectsBadWorkloads) {
  SimInput in = SmallInput(1, 0, 1);
  SimWorkload w = Training(in, "bad", 0, 8, 100, 0);
  in.workloads.push_back(w);
  auto r = RunSimulation(in, SimOptions{}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("workload bad"), std::string::npos);
}

TEST(ReportTest, IsSelfContainedHtmlWithTheCharts) {
  SimInput in = SmallInput(1, 1, 1);
  in.workloads.push_back(Service(in, "chat"));
  in.workloads.push_back(Training(in, "t", 1, 8, 600, 0));
  auto load = ParseLoadCsv("time_s,service,rps\n0,chat,15\n", "load.csv");
  ASSERT_TRUE(load.ok());
  in.load = *load;
  SimOptions o;
  o.end_s = 1800;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string html = RenderReport(*r, "test <run>");
  EXPECT_NE(html.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_NE(html.find("test &lt;run&gt;"), std::string::npos);
  for (const char* title : {"GPUs held", "lent to training", "chat: load and ready capacity",
                            "chat: modelled P99", "Pending training jobs"})
    EXPECT_NE(html.find(title), std::string::npos) << title;
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
}

TEST(CompareTest, TablesEveryRunSideBySide) {
  std::vector<ComparedRun> runs = {
      {"static", {{"colocation", "static"}, {"training", {{"queue_wait_mean_s", 100.0}}}}},
      {"predictive", {{"colocation", "predictive"}, {"training", {{"queue_wait_mean_s", 25.5}}}}}};
  const std::string text = RenderComparisonText(runs);
  EXPECT_NE(text.find("training.queue_wait_mean_s"), std::string::npos);
  EXPECT_NE(text.find("25.5"), std::string::npos);
  EXPECT_NE(text.find("predictive"), std::string::npos);
  const std::string html = RenderComparisonHtml(runs);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace tidal::sim
