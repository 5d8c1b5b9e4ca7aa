// Small clusters and workloads for the co-location tests.
#ifndef TIDAL_TESTS_SUPPORT_COLOCATION_FIXTURES_H_
#define TIDAL_TESTS_SUPPORT_COLOCATION_FIXTURES_H_

#include <string>
#include <vector>

#include "core/model/snapshot.h"

namespace tidal::colocation_testing {

// Pool 0 inference-reserved, pool 1 shared, pool 2 training. Nodes are
// numbered in the order given: `reserved` nodes, then `shared`, then
// `training`, each with `gpus_per_node` GPUs of model "H100".
Snapshot ColocationSnapshot(int reserved, int shared, int training, int gpus_per_node = 8);

// A mask of `count` GPUs starting at GPU `first`.
GpuMask Gpus(int first, int count);

Workload InferenceService(uint64_t id, int gpus_per_pod, double capacity_rps, int min_pods,
                          int max_pods);
Workload TrainingJob(uint64_t id, int gpus_per_pod, int pods);

// Adds a running allocation with one pod per (node, mask) pair.
void AddRunning(Snapshot& snapshot, Workload workload, const std::vector<PodPlacement>& pods,
         Time start, Time last_checkpoint);

// The step the controller, calendar and return-timing tests share: 30 rps
// all day, 100 rps from 12:00 to 14:00.
double StepLoad(Time t);
inline constexpr WorkloadId kStepService(1);

// Node 0 inference-reserved, nodes 1..4 shared, 8 GPUs each. Service 1 has
// 2-GPU replicas of 10 rps with no latency target, so it needs
// floor(rps x 1.2 / 10) + 1 replicas: 4 at 30 rps (the reserved node, where
// its 4 replicas run), 13 at 100 rps (9 more = 18 GPUs = 3 shared nodes);
// cold start 5 min. Each shared node n runs a borrowed 8-GPU training job
// 100 + n, started and checkpointed at 0, checkpointing every
// `checkpoint_interval` (0: never).
Snapshot StepScenario(Duration checkpoint_interval = Duration(0));

}  // namespace tidal::colocation_testing

#endif  // TIDAL_TESTS_SUPPORT_COLOCATION_FIXTURES_H_
