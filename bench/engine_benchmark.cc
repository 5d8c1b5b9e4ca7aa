// Engine speed on a 10,000-node x 8-GPU cluster that is 70% full.
//   BM_PlaceGang64: one 8 x 8 = 64-GPU gang placed topology-aware (the
//     placement search alone; p99 from a manual per-call percentile counter).
//   BM_PassOneGang: a whole Schedule() pass with that gang as the only
//     pending workload (includes indexing the 10,000 nodes).
//   BM_Pass50k: a whole pass over 50,000 pending workloads of mixed shapes.
//   BM_PodPlacements: a pass placing 20,000 one-GPU pods; items/s = pods/s.
#include <algorithm>
#include <chrono>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/common/rng.h"
#include "core/engine/scheduler.h"
#include "core/placement/cluster_state.h"
#include "core/placement/eligibility.h"
#include "core/placement/gang_placer.h"

namespace tidal {
namespace {

constexpr int kNodes = 10'000;
constexpr int kGpusPerNode = 8;
constexpr int kNodesPerRack = 20;

Workload MakeJob(uint64_t id, QueueId queue, int pods, int gpus, Duration expected, int priority) {
  Workload w;
  w.id = WorkloadId(id);
  w.name = "job-" + std::to_string(id);
  w.queue = queue;
  w.gpus_per_pod = gpus;
  w.pods = w.min_pods = w.max_pods = pods;
  w.expected_duration = expected;
  w.priority.value = priority;
  w.submit_time = TimeFromMillis(static_cast<int64_t>(id));
  return w;
}

// 10,000 nodes in racks of 20, 4 queues, and running 1-8 GPU jobs filling
// 70% of the GPUs at random.
Snapshot BusyCluster(double fill = 0.7) {
  Snapshot s;
  s.now = TimeFromMillis(0) + hours(10);
  s.cluster.pools.push_back({PoolId(0), "training", PoolKind::kTraining, QueueId()});
  s.cluster.zones.push_back({ZoneId(0), "z0"});
  for (int r = 0; r < kNodes / kNodesPerRack; ++r) {
    s.cluster.racks.push_back({RackId(static_cast<uint32_t>(r)), "r" + std::to_string(r), ZoneId(0)});
  }
  for (int i = 0; i < kNodes; ++i) {
    Node n;
    n.id = NodeId(static_cast<uint32_t>(i));
    n.name = "n" + std::to_string(i);
    n.pool = PoolId(0);
    n.rack = RackId(static_cast<uint32_t>(i / kNodesPerRack));
    n.zone = ZoneId(0);
    n.gpu_model = "H100";
    n.gpu_count = kGpusPerNode;
    n.nvlink_domains = {0xff};
    s.cluster.nodes.push_back(std::move(n));
  }
  for (int q = 0; q < 4; ++q) {
    Queue queue;
    queue.id = QueueId(static_cast<uint32_t>(q));
    queue.name = "q" + std::to_string(q);
    queue.guaranteed_gpus = kNodes * kGpusPerNode / 4;
    s.queues.push_back(queue);
  }
  Rng rng(42);
  std::vector<GpuMask> used(kNodes, 0);
  const int target = static_cast<int>(fill * kNodes * kGpusPerNode);
  uint64_t id = 1;
  for (int placed = 0; placed < target;) {
    const int gpus = 1 << rng.UniformInt(0, 3);
    const int node = static_cast<int>(rng.UniformInt(0, kNodes - 1));
    const GpuMask free = ~used[node] & 0xff;
    if (std::popcount(free) < gpus) continue;
    GpuMask take = 0;
    GpuMask f = free;
    for (int k = 0; k < gpus; ++k) {
      const GpuMask bit = f & (~f + 1);
      take |= bit;
      f &= ~bit;
    }
    used[node] |= take;
    Workload w = MakeJob(id++, QueueId(static_cast<uint32_t>(rng.UniformInt(0, 3))), 1, gpus,
                         minutes(rng.UniformInt(60, 1200)), 0);
    w.state = WorkloadState::kRunning;
    Allocation a;
    a.workload = w.id;
    a.pods = {{NodeId(static_cast<uint32_t>(node)), take}};
    a.start_time = TimeFromMillis(0) + minutes(rng.UniformInt(0, 590));
    a.last_checkpoint = a.start_time;
    s.workloads.push_back(std::move(w));
    s.allocations.push_back(std::move(a));
    placed += gpus;
  }
  return s;
}

const Snapshot& Busy() {
  static const Snapshot* s = new Snapshot(BusyCluster());
  return *s;
}

void BM_PlaceGang64(benchmark::State& state) {
  const Snapshot& s = Busy();
  engine::ClusterState cluster(s);
  placement::EligibilityIndex index(s, cluster);
  placement::GangPlacer placer;
  Workload gang = MakeJob(1'000'000, QueueId(0), 8, 8, hours(1), 0);
  gang.constraints.topology = {TopologyLevel::kRack, false};
  const placement::Eligibility& e = index.For(gang);
  const placement::PlacementRequest request{8, 8, gang.constraints.topology};
  std::vector<double> micros;
  micros.reserve(1 << 16);
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto plan = placer.Place(cluster, e, request, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(plan);
    if (!plan) state.SkipWithError("the gang did not fit");
    micros.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(micros.begin(), micros.end());
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
}
BENCHMARK(BM_PlaceGang64);

void BM_PassOneGang(benchmark::State& state) {
  Snapshot s = Busy();
  Workload gang = MakeJob(1'000'000, QueueId(0), 8, 8, hours(1), 0);
  s.workloads.push_back(gang);
  const Scheduler scheduler{PolicyConfig{}};
  std::vector<double> millis;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Decisions d = scheduler.Schedule(s);
    const auto t1 = std::chrono::steady_clock::now();
    if (d.places.size() != 1) state.SkipWithError("the gang was not placed");
    benchmark::DoNotOptimize(d);
    millis.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(millis.begin(), millis.end());
  state.counters["p99_ms"] = millis[std::min(millis.size() - 1, millis.size() * 99 / 100)];
}
BENCHMARK(BM_PassOneGang)->Unit(benchmark::kMillisecond);

// 50,000 pending: 1-8 GPU single pods and 2-8 pod gangs over 4 queues and 3
// priorities, with a few constraint shapes; far more than the 24,000 free
// GPUs, so most of them wait with an explanation.
void BM_Pass50k(benchmark::State& state) {
  Snapshot s = Busy();
  Rng rng(7);
  uint64_t id = 2'000'000;
  for (int i = 0; i < 50'000; ++i) {
    const bool gang = rng.Bernoulli(0.1);
    Workload w = MakeJob(id++, QueueId(static_cast<uint32_t>(rng.UniformInt(0, 3))),
                         gang ? static_cast<int>(rng.UniformInt(2, 8)) : 1,
                         gang ? 8 : 1 << rng.UniformInt(0, 3), minutes(rng.UniformInt(10, 600)),
                         static_cast<int>(rng.UniformInt(0, 2)));
    w.preemptible = false;  // measured without preemption searches
    s.workloads.push_back(std::move(w));
  }
  const Scheduler scheduler{PolicyConfig{}};
  size_t places = 0;
  size_t waits = 0;
  std::vector<double> millis;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Decisions d = scheduler.Schedule(s);
    const auto t1 = std::chrono::steady_clock::now();
    places = d.places.size();
    waits = d.waits.size();
    benchmark::DoNotOptimize(d);
    millis.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(millis.begin(), millis.end());
  state.counters["p99_ms"] = millis[std::min(millis.size() - 1, millis.size() * 99 / 100)];
  state.counters["places"] = static_cast<double>(places);
  state.counters["waits"] = static_cast<double>(waits);
}
BENCHMARK(BM_Pass50k)->Unit(benchmark::kMillisecond);

void BM_PodPlacements(benchmark::State& state) {
  Snapshot s = Busy();
  for (int i = 0; i < 20'000; ++i) {
    s.workloads.push_back(MakeJob(3'000'000 + i, QueueId(static_cast<uint32_t>(i % 4)), 1, 1, hours(1), 0));
  }
  const Scheduler scheduler{PolicyConfig{}};
  int64_t pods = 0;
  for (auto _ : state) {
    Decisions d = scheduler.Schedule(s);
    pods += static_cast<int64_t>(d.places.size());
    if (d.places.size() != 20'000) state.SkipWithError("not every pod was placed");
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(pods);
}
BENCHMARK(BM_PodPlacements)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tidal

BENCHMARK_MAIN();
