// Co-location costs per scheduling pass: the latency model's replica sizing,
// the forecaster, and ColocationController::Prepare on a large cluster.
#include <benchmark/benchmark.h>

#include <cmath>
#include <numbers>

#include "core/colocation/colocation_controller.h"
#include "core/colocation/latency_model.h"
#include "core/colocation/load_forecaster.h"

namespace tidal {
namespace {

void BM_MinReplicasForTarget(benchmark::State& state) {
  const double rps = static_cast<double>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(MinReplicasForTarget(rps, 10, milliseconds(600), 0.2));
  }
}
BENCHMARK(BM_MinReplicasForTarget)->Arg(50)->Arg(5000);

double Diurnal(int service, int minute) {
  return 100 + 10 * service + 50 * std::sin(2 * std::numbers::pi * minute / 1440.0);
}

void BM_ForecasterPeak30Min(benchmark::State& state) {
  LoadForecaster f;
  for (int m = 0; m < 2 * 1440; ++m) f.Observe(WorkloadId(1), Time(minutes(m)), Diurnal(0, m));
  Time now(hours(48));
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.PeakForecast(WorkloadId(1), now, now + minutes(30)));
    now += minutes(1);
  }
}
BENCHMARK(BM_ForecasterPeak30Min);

// nodes x 8 GPUs: 1/8 inference-reserved, 1/4 shared, the rest training.
// 50 services of 1-GPU replicas; one 8-GPU borrowed job per shared node.
// `steady`: each service already runs the replicas 1.2x its day-2 peak
// needs (packed over the reserved, then shared nodes), so a pass has little
// to place; otherwise none run and every replica is placed from scratch.
Snapshot BigSnapshot(int nodes, bool steady) {
  Snapshot s;
  s.cluster.pools = {{PoolId(0), "inference-reserved", PoolKind::kInferenceReserved, QueueId()},
                     {PoolId(1), "shared", PoolKind::kShared, QueueId()},
                     {PoolId(2), "training", PoolKind::kTraining, QueueId()}};
  s.cluster.zones = {{ZoneId(0), "z"}};
  s.cluster.racks = {{RackId(0), "r", ZoneId(0)}};
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.id = NodeId(static_cast<uint32_t>(i));
    n.name = "n" + std::to_string(i);
    n.pool = PoolId(i < nodes / 8 ? 0 : i < nodes * 3 / 8 ? 1 : 2);
    n.gpu_model = "H100";
    n.gpu_count = 8;
    n.nvlink_domains = {n.all_gpus()};
    s.cluster.nodes.push_back(n);
  }
  uint64_t id = 1;
  size_t next_gpu = 0;  // running replicas fill GPUs in node order
  std::vector<bool> inference_node(static_cast<size_t>(nodes), false);
  for (int k = 0; k < 50; ++k, ++id) {
    Workload w;
    w.id = WorkloadId(id);
    w.kind = WorkloadKind::kInference;
    w.state = WorkloadState::kRunning;
    w.gpus_per_pod = 1;
    w.min_pods = 1;
    w.max_pods = 10000;
    w.pods = 1;
    w.inference.replica_capacity_rps = 1;
    w.inference.target_p99 = milliseconds(8000);
    w.inference.cold_start = minutes(3);
    if (steady) {
      Allocation a;
      a.workload = w.id;
      const int replicas = MinReplicasForTarget(150 + 10 * k, 1, milliseconds(8000), 0.2) * 12 / 10;
      for (int r = 0; r < replicas; ++r, ++next_gpu) {
        const auto node = static_cast<uint32_t>(next_gpu / 8);
        a.pods.push_back({NodeId(node), GpuMask{1} << (next_gpu % 8)});
        inference_node[node] = true;
      }
      w.pods = replicas;
      s.allocations.push_back(a);
    }
    s.workloads.push_back(w);
  }
  for (int i = nodes / 8; i < nodes * 3 / 8; ++i, ++id) {
    if (inference_node[static_cast<size_t>(i)]) continue;
    Workload w;
    w.id = WorkloadId(id);
    w.kind = WorkloadKind::kTraining;
    w.state = WorkloadState::kRunning;
    w.gpus_per_pod = 8;
    s.workloads.push_back(w);
    Allocation a;
    a.workload = w.id;
    a.pods = {{NodeId(static_cast<uint32_t>(i)), 0xff}};
    a.borrowed = true;
    s.allocations.push_back(a);
  }
  return s;
}

void BM_PreparePredictive(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool steady = state.range(1) != 0;
  PolicyConfig policy;
  policy.colocation.mode = ColocationMode::kPredictive;
  ColocationController controller(policy);
  for (int m = 0; m < 2 * 1440; ++m) {
    for (int k = 0; k < 50; ++k) {
      controller.ObserveLoad(WorkloadId(k + 1), Time(minutes(m)), Diurnal(k, m));
    }
  }
  const Snapshot base = BigSnapshot(nodes, steady);
  int minute = 2 * 1440;
  for (auto _ : state) {
    state.PauseTiming();
    Snapshot s = base;
    s.now = Time(minutes(minute));
    for (int k = 0; k < 50; ++k) {
      controller.ObserveLoad(WorkloadId(k + 1), s.now, Diurnal(k, minute));
    }
    ++minute;
    state.ResumeTiming();
    benchmark::DoNotOptimize(controller.Prepare(s));
  }
  state.counters["gpus"] = nodes * 8;
}
BENCHMARK(BM_PreparePredictive)
    ->ArgNames({"nodes", "steady"})
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tidal

BENCHMARK_MAIN();
