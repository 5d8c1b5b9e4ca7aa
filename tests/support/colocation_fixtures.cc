#include "tests/support/colocation_fixtures.h"

#include <bit>

namespace tidal::colocation_testing {

Snapshot ColocationSnapshot(int reserved, int shared, int training, int gpus_per_node) {
  Snapshot s;
  s.cluster.pools = {
      {PoolId(0), "inference-reserved", PoolKind::kInferenceReserved, QueueId()},
      {PoolId(1), "shared", PoolKind::kShared, QueueId()},
      {PoolId(2), "training", PoolKind::kTraining, QueueId()},
  };
  s.cluster.zones = {{ZoneId(0), "z0"}};
  s.cluster.racks = {{RackId(0), "r0", ZoneId(0)}};
  auto add = [&](int count, uint32_t pool, const char* prefix) {
    for (int i = 0; i < count; ++i) {
      Node n;
      n.id = NodeId(static_cast<uint32_t>(s.cluster.nodes.size()));
      n.name = std::string(prefix) + std::to_string(i);
      n.pool = PoolId(pool);
      n.rack = RackId(0);
      n.zone = ZoneId(0);
      n.gpu_model = "H100";
      n.gpu_memory_gib = 80;
      n.gpu_count = gpus_per_node;
      n.nvlink_domains = {n.all_gpus()};
      s.cluster.nodes.push_back(n);
    }
  };
  add(reserved, 0, "inf-");
  add(shared, 1, "shared-");
  add(training, 2, "train-");
  s.queues = {Queue{QueueId(0), "default", QueueId(), 0, kUnlimited, kUnlimited, 1.0, {}}};
  return s;
}

GpuMask Gpus(int first, int count) {
  const GpuMask ones = count >= 64 ? ~GpuMask{0} : ((GpuMask{1} << count) - 1);
  return ones << first;
}

Workload InferenceService(uint64_t id, int gpus_per_pod, double capacity_rps, int min_pods,
                          int max_pods) {
  Workload w;
  w.id = WorkloadId(id);
  w.name = "svc-" + std::to_string(id);
  w.queue = QueueId(0);
  w.kind = WorkloadKind::kInference;
  w.state = WorkloadState::kRunning;
  w.gpus_per_pod = gpus_per_pod;
  w.pods = min_pods;
  w.min_pods = min_pods;
  w.max_pods = max_pods;
  w.preemptible = false;
  w.inference.replica_capacity_rps = capacity_rps;
  w.priority.preemptibility = PreemptibilityClass::kNever;
  return w;
}

Workload TrainingJob(uint64_t id, int gpus_per_pod, int pods) {
  Workload w;
  w.id = WorkloadId(id);
  w.name = "train-" + std::to_string(id);
  w.queue = QueueId(0);
  w.kind = WorkloadKind::kTraining;
  w.state = WorkloadState::kRunning;
  w.gpus_per_pod = gpus_per_pod;
  w.pods = pods;
  w.min_pods = pods;
  w.max_pods = pods;
  return w;
}

void AddRunning(Snapshot& snapshot, Workload workload, const std::vector<PodPlacement>& pods,
         Time start, Time last_checkpoint) {
  Allocation a;
  a.workload = workload.id;
  a.pods = pods;
  a.start_time = start;
  a.last_checkpoint = last_checkpoint;
  a.borrowed = workload.kind != WorkloadKind::kInference;
  workload.state = WorkloadState::kRunning;
  if (!workload.queue.valid()) workload.queue = QueueId(0);
  snapshot.allocations.push_back(std::move(a));
  snapshot.workloads.push_back(std::move(workload));
}

double StepLoad(Time t) {
  const int64_t minute_of_day = (ToMillis(t) / 60000) % (24 * 60);
  return minute_of_day >= 12 * 60 && minute_of_day < 14 * 60 ? 100.0 : 30.0;
}

Snapshot StepScenario(Duration checkpoint_interval) {
  Snapshot s = ColocationSnapshot(1, 4, 0);
  Workload svc = InferenceService(kStepService.value(), 2, 10, 1, 32);
  svc.pods = 4;
  svc.inference.cold_start = minutes(5);
  const NodeId reserved(0);
  AddRunning(s, svc,
             {{reserved, Gpus(0, 2)}, {reserved, Gpus(2, 2)}, {reserved, Gpus(4, 2)}, {reserved, Gpus(6, 2)}},
             Time(), Time());
  for (uint32_t node = 1; node <= 4; ++node) {
    Workload job = TrainingJob(100 + node, 8, 1);
    job.training.checkpoint_interval = checkpoint_interval;
    AddRunning(s, job, {{NodeId(node), Gpus(0, 8)}}, Time(), Time());
  }
  return s;
}

}  // namespace tidal::colocation_testing
