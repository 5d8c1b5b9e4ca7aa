// Small end-to-end scenarios through the simulator, the co-location
// controller and the engine, checked on named summary.json metrics.
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <numbers>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "sim/simulator.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

SimInput Input(int reserved, int shared, int training) {
  return testing::SmallSimInput(reserved, shared, training);
}

// 8-GPU pods, checkpoints every 15 min.
SimWorkload Training(const SimInput& in, const std::string& name, int pods, double duration_s,
                     double submit_s) {
  return testing::SimTraining(in, name, pods, 8, duration_s, submit_s, seconds(900));
}

SimWorkload Service(const SimInput& in, const std::string& name, double capacity_rps) {
  return testing::SimService(in, name, capacity_rps, 64, milliseconds(1500), seconds(120));
}

TEST(GangScenarioTest, GangsNeverStartPartially) {
  // 4 training nodes (32 GPUs), gangs of 1 to 4 nodes arriving every 10 min.
  SimInput in = Input(1, 0, 4);
  for (int i = 0; i < 16; ++i)
    in.workloads.push_back(Training(in, "gang-" + std::to_string(i), 1 + (i * 7) % 4, 1800 + 600 * (i % 3),
                                    600.0 * i));
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_EQ(s.training.jobs, 16);
  EXPECT_EQ(s.training.completed, 16);
  EXPECT_EQ(s.training.gang_partial_starts, 0);
  EXPECT_DOUBLE_EQ(s.training.gang_start_success_rate, 1.0);
  EXPECT_GT(s.training.queue_wait_p95_s, 0);  // the cluster was oversubscribed
  EXPECT_EQ(s.scheduler.invalid_decisions, 0);
}

// Reserved 1 node, shared 2 nodes, training 1 node. A 2-node gang ("big",
// saving on request in `on_request`, 0 = only every 15 min) fits only with a
// lent shared node; at 1 h the service needs the shared pool back. 5 req/s
// needs 1 replica; 150 req/s (1 to 2 h) needs ~19 of 24 GPUs. Reactive.
Summary RunReturnedLoan(Duration on_request) {
  SimInput in = Input(1, 2, 1);
  in.workloads.push_back(Service(in, "chat", 10));
  SimWorkload big = Training(in, "big", 2, 4 * 3600, 300);
  big.workload.training.checkpoint_on_request = on_request;
  in.workloads.push_back(big);
  auto load = ParseLoadCsv("time_s,service,rps\n0,chat,5\n3600,chat,150\n7200,chat,5\n", "load.csv");
  EXPECT_TRUE(load.ok());
  in.load = *load;
  SimOptions o;
  o.wall_times = false;
  o.colocation = ColocationMode::kReactive;
  o.end_s = 10 * 3600;
  auto r = RunSimulation(in, o, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->summary : Summary();
}

TEST(PreemptionScenarioTest, AReturnedLoanPreemptsAndRecoveryIsMeasured) {
  const Summary s = RunReturnedLoan(Duration(0));
  EXPECT_GE(s.training.preemptions, 1);
  EXPECT_GE(s.cluster.reclaims, 1);
  // Notice at about 1 h; it runs again once the loan comes back after the
  // load drops at 2 h (and the scale-down delay): recovery of roughly an hour
  // or more, never zero.
  EXPECT_GT(s.training.recovery_time_p50_s, 600);
  EXPECT_EQ(s.training.completed, 1);
  EXPECT_GT(s.cluster.borrowed_gpu_hours, 0);
  // Checkpoints every 15 min bound the loss: at most 16 GPUs x 15 min = 4 GPU-hours.
  EXPECT_LE(s.training.lost_gpu_hours, 4.0 + 1e-9);
  EXPECT_EQ(s.training.gang_partial_starts, 0);
}

// Issue #10: the same return, to a job that saves on request in 20 s. Its
// notice asks for a checkpoint; it saves its progress at the notice and
// leaves once the save lands, so each preemption loses exactly the save:
// 16 GPUs x 20 s = 320 GPU-s, against up to 16 GPUs x (15 min + its 30 s
// shutdown) when it saves only at its interval.
TEST(PreemptionScenarioTest, AVictimThatSavesOnRequestLosesOnlyItsSave) {
  const Summary saves = RunReturnedLoan(seconds(20));
  const Summary periodic = RunReturnedLoan(Duration(0));
  ASSERT_GE(saves.training.preemptions, 1);
  EXPECT_NEAR(saves.training.lost_gpu_hours, saves.training.preemptions * 16 * 20 / 3600.0, 1e-6);
  EXPECT_EQ(saves.training.completed, 1);
  EXPECT_EQ(saves.training.gang_partial_starts, 0);
  EXPECT_GT(periodic.training.lost_gpu_hours, saves.training.lost_gpu_hours);
}

// Issue #3, session 2: a return in predictive mode shrinks an elastic job off
// the returned node, and the job keeps running at its smaller size instead of
// being preempted by the engine's backstop.
TEST(PreemptionScenarioTest, AReturnShrinksAnElasticJobThatKeepsRunning) {
  // Reserved 1 node (8 GPUs), shared 2 nodes, no training pool. The elastic
  // job (2 x 8 GPUs, min 1) can only run on the two lent shared nodes.
  SimInput in = Input(1, 2, 0);
  in.workloads.push_back(Service(in, "chat", 10));
  SimWorkload job = Training(in, "elastic", 2, 4 * 3600, 300);
  job.workload.min_pods = 1;
  in.workloads.push_back(job);
  // 5 req/s needs 1 replica; 60 req/s (from 2.5 h) needs more than the 8
  // reserved GPUs, so one shared node comes back. The load gets there by
  // 15 % every 5 minutes from 1 h (5 x 1.15^18 = 61.5, capped at 60): each
  // step stays under the short forecast issued 5 minutes before it (the
  // recent max x 1.2), so the forecaster learns no margin
  // (load_forecaster.h) and the return is the one the load itself calls for.
  // (A jump straight to 60 would be 10x the forecast: the margin, capped at
  // 2, would size for 120 req/s and take both shared nodes back.)
  std::string csv = "time_s,service,rps\n0,chat,5\n";
  double rps = 5;
  for (int k = 1; k <= 18; ++k) {
    rps = std::min(60.0, rps * 1.15);
    csv += std::to_string(3600 + 300 * (k - 1)) + ",chat," + std::to_string(rps) + "\n";
  }
  auto load = ParseLoadCsv(csv, "load.csv");
  ASSERT_TRUE(load.ok());
  in.load = *load;
  SimOptions o;
  o.wall_times = false;
  o.colocation = ColocationMode::kPredictive;
  o.end_s = 12 * 3600;
  std::ostringstream events;
  auto r = RunSimulation(in, o, &events);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Summary& s = r->summary;
  EXPECT_GE(s.cluster.reclaims, 1);
  EXPECT_EQ(s.training.preemptions, 0) << events.str();
  EXPECT_EQ(s.training.completed, 1);
  EXPECT_EQ(s.scheduler.invalid_decisions, 0);
  // The job was shrunk 2 -> 1 on the return.
  EXPECT_NE(events.str().find("\"event\":\"resize\",\"workload\":\"elastic\",\"from\":2,\"to\":1"),
            std::string::npos);
  // At half speed after over 1 h at full speed it needs more than 4 h in all,
  // so it finishes after 300 s + 4 h but well before the 12 h end.
  EXPECT_GT(s.training.jct_mean_s, 4 * 3600);
}

// Promise 5 of issue #9: a loan is never made and taken back within the
// minute. Reserved 1 node, shared 1 node (8 GPUs each). 5 req/s needs 1
// replica; 150 req/s needs floor(150 * 1.2 / 10) + 1 = 19, of which the
// reserved node holds 8: the shared node goes back. From 600 s the load
// flickers between the two every 20 s for 4 minutes. The autoscaler's own
// hysteresis is off (scale_down_delay 0), so only the loan hold keeps the
// shared node from being lent between the peaks. An 8-GPU job of 15 min
// arrives every minute, wanting the shared node.
struct Loans {
  int flaps = 0;  // a lend and a return of one node less than 60 s apart
  int preemptions = 0;
  std::string log;
};
Loans FlickeringLoad(Duration relend_delay) {
  SimInput in = Input(1, 1, 0);
  in.policy.colocation.scale_down_delay = Duration(0);
  in.policy.colocation.relend_delay = relend_delay;
  in.workloads.push_back(Service(in, "chat", 10));
  for (int i = 0; i < 20; ++i) in.workloads.push_back(Training(in, "t-" + std::to_string(i), 1, 900, 60.0 * i));
  std::string csv = "time_s,service,rps\n0,chat,5\n";
  for (int t = 600; t < 840; t += 40) csv += std::to_string(t) + ",chat,150\n" + std::to_string(t + 20) + ",chat,5\n";
  auto load = ParseLoadCsv(csv, "flicker.csv");
  EXPECT_TRUE(load.ok());
  if (load.ok()) in.load = *load;
  SimOptions o;
  o.wall_times = false;
  o.colocation = ColocationMode::kReactive;
  o.load_step = seconds(10);
  o.end_s = 3600;
  std::ostringstream log;
  auto r = RunSimulation(in, o, &log);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  Loans out;
  out.log = log.str();
  if (r.ok()) out.preemptions = r->summary.training.preemptions;
  std::map<std::string, double> last_change;  // node -> time of its last lend or return
  std::istringstream lines(out.log);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e["event"] != "lend" && e["event"] != "return") continue;
    const std::string node = e["node"];
    const double t = e["t"];
    if (auto it = last_change.find(node); it != last_change.end() && t - it->second < 60) ++out.flaps;
    last_change[node] = t;
  }
  return out;
}

TEST(PreemptionScenarioTest, FlickeringLoadNeverLendsAndTakesBackWithinTheMinute) {
  const Loans held = FlickeringLoad(seconds(60));
  EXPECT_EQ(held.flaps, 0) << held.log;
  // One return at 600 s stops the job then on the shared node; no job is
  // placed there again until the flicker has been over for a minute.
  EXPECT_EQ(held.preemptions, 1) << held.log;
  // The same run without the hold flaps, and preempts work it just placed.
  const Loans flapping = FlickeringLoad(Duration(0));
  EXPECT_GT(flapping.flaps, 0) << flapping.log;
  EXPECT_GT(flapping.preemptions, held.preemptions) << flapping.log;
}

// Two days of a daily cycle: inference peaks at 14:00 and needs most of the
// shared pool; a steady stream of 1-node training jobs wants more than the
// training pool.
SimInput Diurnal() {
  SimInput in = Input(1, 4, 2);
  in.workloads.push_back(Service(in, "chat", 10));
  std::string csv = "time_s,service,rps\n";
  for (int m = 0; m < 24 * 60; m += 10) {
    const double phase = 2 * std::numbers::pi * (m / 60.0 - 14) / 24;
    const double rps = 30 + 170 * (1 + std::cos(phase)) / 2;  // 30 at 02:00, 200 at 14:00
    csv += std::to_string(m * 60) + ",chat," + std::to_string(rps) + "\n";
  }
  auto load = ParseLoadCsv(csv, "diurnal.csv");
  EXPECT_TRUE(load.ok());
  in.load = *load;
  in.load.set_period_s(86400);
  for (int i = 0; i < 2 * 24 * 2; ++i)  // one 8-GPU job every 30 min, 3 h each
    in.workloads.push_back(Training(in, "t-" + std::to_string(i), 1, 3 * 3600, 1800.0 * i));
  return in;
}

TEST(DiurnalScenarioTest, PredictiveBeatsStaticOnATinyDailyCycle) {
  SimOptions o;
  o.wall_times = false;
  o.pass_interval = seconds(60);
  o.end_s = 2 * 86400;
  const SimInput in = Diurnal();
  o.colocation = ColocationMode::kStatic;
  auto fixed = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  o.colocation = ColocationMode::kPredictive;
  auto predictive = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(predictive.ok()) << predictive.status().ToString();
  const Summary& a = fixed->summary;
  const Summary& b = predictive->summary;
  EXPECT_EQ(a.colocation, "static");
  EXPECT_EQ(b.colocation, "predictive");
  EXPECT_DOUBLE_EQ(a.cluster.borrowed_gpu_hours, 0);  // static lends nothing
  EXPECT_GT(b.cluster.borrowed_gpu_hours, 0);
  EXPECT_LT(b.training.queue_wait_mean_s, a.training.queue_wait_mean_s);
  EXPECT_GT(b.cluster.gpu_allocation_ratio, a.cluster.gpu_allocation_ratio);
  ASSERT_TRUE(a.inference.slo_attainment.has_value() && b.inference.slo_attainment.has_value());
  EXPECT_GE(*b.inference.slo_attainment, *a.inference.slo_attainment - 0.01);
  EXPECT_EQ(b.training.gang_partial_starts, 0);
}

// Issue #10's claim on a small input: with yesterday's load, predictive
// has its capacity sooner than reactive. Reactive raises the target only
// when the load is there, and its new replicas wait for the returned shared
// nodes' borrowers to leave (their grace) before their cold start (120 s);
// predictive returns and scales ahead, so each of its scale-ups (one per
// rise, core/state PendingScaleUp) waits for the cold start alone.
// Reactive, then predictive, over one day of Diurnal() with yesterday's
// load (the same) as history.
std::pair<Summary, Summary> ReactiveAndPredictiveWithHistory() {
  SimOptions o;
  o.wall_times = false;
  o.pass_interval = seconds(60);
  o.end_s = 86400;
  SimInput in = Diurnal();
  in.load_history = in.load;  // yesterday ran like today
  in.load_history.set_period_s(0);
  std::pair<Summary, Summary> out;
  for (const ColocationMode mode : {ColocationMode::kReactive, ColocationMode::kPredictive}) {
    o.colocation = mode;
    auto run = RunSimulation(in, o, nullptr);
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    if (run.ok()) (mode == ColocationMode::kReactive ? out.first : out.second) = run->summary;
  }
  return out;
}

TEST(DiurnalScenarioTest, PredictiveWithHistoryReachesCapacitySoonerThanReactive) {
  const auto [reactive, predictive] = ReactiveAndPredictiveWithHistory();
  const Summary::Inference& r = reactive.inference;
  const Summary::Inference& p = predictive.inference;
  ASSERT_GT(r.scale_ups, 0);
  ASSERT_GT(p.scale_ups, 0);
  EXPECT_LT(p.time_to_capacity_p99_s, r.time_to_capacity_p99_s)
      << "predictive " << p.time_to_capacity_p99_s << " s, reactive " << r.time_to_capacity_p99_s << " s";
  EXPECT_DOUBLE_EQ(p.scale_up_success_rate.value_or(0), 1.0);
  ASSERT_TRUE(p.slo_attainment.has_value() && r.slo_attainment.has_value());
  EXPECT_GE(*p.slo_attainment, *r.slo_attainment);
}

// Issue #10's lost-work claim on a small input: predictive knows the rise
// 30 minutes ahead, so its returns wait for the borrowers' checkpoints
// (every 15 minutes, inside the 25-minute slack: core/colocation/
// return_timing.h) and lose at most a pass and the save time; reactive
// returns when the load arrives, losing what each victim did since its last
// checkpoint.
TEST(DiurnalScenarioTest, PredictiveReturnsLoseLessThanHalfOfReactivesWork) {
  const auto [reactive, predictive] = ReactiveAndPredictiveWithHistory();
  const Summary::Training& r = reactive.training;
  const Summary::Training& p = predictive.training;
  ASSERT_GT(r.lost_gpu_hours, 0);
  EXPECT_LE(p.lost_gpu_hours, 0.5 * r.lost_gpu_hours)
      << "predictive " << p.lost_gpu_hours << " GPU-h, reactive " << r.lost_gpu_hours << " GPU-h";
  EXPECT_LE(p.queue_wait_mean_s, 1.1 * r.queue_wait_mean_s);
  EXPECT_EQ(p.gang_partial_starts, 0);
}

}  // namespace
}  // namespace tidal::sim
