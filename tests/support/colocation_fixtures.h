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

}  // namespace tidal::colocation_testing

#endif  // TIDAL_TESTS_SUPPORT_COLOCATION_FIXTURES_H_
