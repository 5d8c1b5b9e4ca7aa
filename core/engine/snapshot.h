// The state one scheduling pass sees. The caller (server or simulator) builds
// it; the engine only reads it.
#ifndef TIDAL_CORE_ENGINE_SNAPSHOT_H_
#define TIDAL_CORE_ENGINE_SNAPSHOT_H_

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

  bool is_lent(NodeId n) const {
    return n.value() < lent_nodes.size() && lent_nodes[n.value()];
  }
};

}  // namespace tidal

#endif  // TIDAL_CORE_ENGINE_SNAPSHOT_H_
