// The state one scheduling pass sees. The caller (server or simulator) builds
// it; the engine only reads it.
#ifndef TIDAL_CORE_MODEL_SNAPSHOT_H_
#define TIDAL_CORE_MODEL_SNAPSHOT_H_

#include <cstdint>
#include <vector>

#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/model/cluster.h"
#include "core/model/queue.h"
#include "core/model/workload.h"

namespace tidal {

struct Snapshot {
  Time now;
  Cluster cluster;
  std::vector<Queue> queues;      // indexed by QueueId
  std::vector<Project> projects;  // indexed by ProjectId
  // Every workload that is pending, awaiting approval, running or
  // terminating. Finished ones are left out.
  std::vector<Workload> workloads;
  // One per running or terminating workload.
  std::vector<Allocation> allocations;
  // Shared-pool nodes currently lent to training, indexed by NodeId. Set by
  // the co-location planner; empty means none is lent.
  std::vector<bool> lent_nodes;
  // Names the contents of `cluster.nodes` for the engine's node-class cache.
  // A caller that sets a non-zero version must change it whenever a node is
  // added or removed or a node's pool, rack, zone, GPU model or count, NVLink
  // domains, health, cordon, labels or taints change (failed_gpus may change
  // freely). 0 = unknown: node classes are recomputed every pass. (Added for
  // the simulator, whose cluster never changes: it saves a string key per
  // node per pass.)
  uint64_t cluster_version = 0;
  // Optional, both or neither (added for the simulator, which tracks them
  // anyway): each node's free GPUs (its GPUs minus failed GPUs minus every
  // allocation's pods, indexed by NodeId) and each allocation's GPU count
  // (parallel to `allocations`). Given, a pass reads neither every node nor
  // every allocation's pods to find free GPUs; Debug builds check them
  // against the cluster and the allocations. Empty = computed here.
  std::vector<GpuMask> free_gpus;
  std::vector<int> allocation_gpus;

  bool is_lent(NodeId n) const {
    return n.value() < lent_nodes.size() && lent_nodes[n.value()];
  }
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_SNAPSHOT_H_
