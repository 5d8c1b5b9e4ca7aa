// Simulator speed: a replay of the Alibaba openb pod list (8,152 pods, real
// arrival times over 149 days) and a synthetic week of 1,000,000 training
// jobs on 80,000 GPUs. Each iteration is one whole simulation (wall time).
//
//   build/bench/sim_benchmark [--benchmark_filter=Openb]
// The openb file is read from $TIDAL_OPENB_POD_LIST, else from
// /work/shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv.
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "core/common/rng.h"
#include "sim/sim_setup.h"
#include "sim/simulator.h"

namespace tidal::sim {
namespace {

std::string ClusterYaml(int reserved, int shared, int training, int serving_gpus, int research_gpus) {
  std::string y = "zones: [z]\nracks:\n";
  for (int r = 0; r < 16; ++r) y += fmt::format("  - {{name: r{}, zone: z}}\n", r);
  std::string racks = "[";
  for (int r = 0; r < 16; ++r) racks += fmt::format("{}r{}", r ? ", " : "", r);
  racks += "]";
  y += "pools:\n  - inference-reserved\n  - shared\n  - training\nnodes:\n";
  auto group = [&](const char* name, int count, const char* pool) {
    if (count <= 0) return;
    y += fmt::format(
        "  - name: {}-{{i}}\n    count: {}\n    racks: {}\n    pool: {}\n    gpus: 8\n"
        "    gpu_model: H100\n    gpu_memory_gib: 80\n    nvlink: all\n",
        name, count, racks, pool);
  };
  group("inf", reserved, "inference-reserved");
  group("shr", shared, "shared");
  group("trn", training, "training");
  y += fmt::format(
      "queues:\n  - name: serving\n    guaranteed_gpus: {}\n    pools: [inference-reserved, shared]\n"
      "  - name: research\n    guaranteed_gpus: {}\n    pools: [training, shared]\n",
      serving_gpus, research_gpus);
  y += "projects:\n  - {name: online, tenant: product, tier: critical, queue: serving, "
       "top_tier_approved: true}\n  - {name: research, tenant: research, tier: standard, queue: research}\n";
  return y;
}

void BM_ReplayOpenb(benchmark::State& state) {
  const char* env = std::getenv("TIDAL_OPENB_POD_LIST");
  const std::string path =
      env ? env : "/work/shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv";
  SimInput in;
  // 784 nodes x 8 = 6,272 GPUs, about the openb cluster's 6,212 GPUs in whole
  // 8-GPU nodes spread over 16 racks.
  auto cluster = config::ParseClusterYaml(ClusterYaml(304, 192, 288, 3968, 2304));
  if (!cluster.ok()) {
    state.SkipWithError(cluster.status().ToString().c_str());
    return;
  }
  in.cluster = *cluster;
  in.policy = config::DefaultPolicy();
  auto spec = ParseTraceSpec("openb:" + path + ",project=research,inference_project=online");
  Status s = spec.ok() ? AddWorkloadTrace(*spec, in.cluster, in.workloads) : spec.status();
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  SimOptions o;
  o.wall_times = false;
  int pods = 0;
  for (auto _ : state) {
    auto r = RunSimulation(in, o, nullptr);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    pods = r->summary.training.jobs + r->summary.inference.services;
    state.counters["cycles"] = r->summary.scheduler.cycles;
    state.counters["sim_days"] = r->summary.sim_duration_s / 86400;
  }
  state.counters["gpu_pods"] = pods;
}
BENCHMARK(BM_ReplayOpenb)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// 1M jobs arriving as a Poisson stream over a week on 10,000 x 8 GPUs: 70% 1
// GPU, 15% 2, 8% 4, 5% 8 and 2% multi-node gangs of 2-8 nodes; durations
// exponential with a 4 h mean (about 75% of the cluster busy).
void BM_SyntheticWeek(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  SimInput in;
  auto cluster = config::ParseClusterYaml(ClusterYaml(0, 0, 10000, 0, 80000));
  if (!cluster.ok()) {
    state.SkipWithError(cluster.status().ToString().c_str());
    return;
  }
  in.cluster = *cluster;
  in.policy = config::DefaultPolicy();
  const Project* p = in.cluster.FindProject("research");
  Rng rng(42);
  const double week_s = 7 * 86400.0;
  const double mean_gap_s = week_s / jobs;
  double t = 0;
  in.workloads.reserve(static_cast<size_t>(jobs));
  for (int i = 0; i < jobs; ++i) {
    t += rng.Exponential(mean_gap_s);
    SimWorkload s;
    Workload& w = s.workload;
    w.name = fmt::format("syn-{}", i);
    w.kind = WorkloadKind::kTraining;
    w.project = p->id;
    w.tenant = p->tenant;
    w.queue = p->default_queue;
    const double u = rng.Uniform();
    int pods = 1, per = 1;
    if (u < 0.70) {
      per = 1;
    } else if (u < 0.85) {
      per = 2;
    } else if (u < 0.93) {
      per = 4;
    } else if (u < 0.98) {
      per = 8;
    } else {
      per = 8;
      pods = static_cast<int>(rng.UniformInt(2, 8));
    }
    w.pods = w.min_pods = w.max_pods = pods;
    w.gpus_per_pod = per;
    w.expected_duration = SecondsF(std::max(60.0, rng.Exponential(4 * 3600.0)));
    w.training.checkpoint_interval = minutes(30);
    s.submit_s = t;
    in.workloads.push_back(std::move(s));
  }
  SimOptions o;
  o.wall_times = false;
  o.min_pass_gap = seconds(10);  // arrivals every ~0.6 s are batched into one pass per 10 s
  o.end_s = week_s;
  for (auto _ : state) {
    auto r = RunSimulation(in, o, nullptr);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    state.counters["cycles"] = r->summary.scheduler.cycles;
    state.counters["completed"] = r->summary.training.completed;
    state.counters["alloc_ratio"] = r->summary.cluster.gpu_allocation_ratio;
    state.counters["wait_mean_s"] = r->summary.training.queue_wait_mean_s;
  }
}
BENCHMARK(BM_SyntheticWeek)->Arg(100000)->Arg(1000000)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace tidal::sim

BENCHMARK_MAIN();
