// The state one scheduling pass sees. The caller (server or simulator) builds
// it; the engine only reads it.
#ifndef TIDAL_CORE_MODEL_SNAPSHOT_H_
#define TIDAL_CORE_MODEL_SNAPSHOT_H_

#include <cstdint>
#include <vector>

#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/model/change_stamp.h"
#include "core/model/cluster.h"
#include "core/model/free_gpus_log.h"
#include "core/model/queue.h"
#include "core/model/waiting_order.h"
#include "core/model/workload.h"
#include "core/model/workload_digest.h"

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
  // Optional, with free_gpus: which nodes' free GPUs changed, in order
  // (core/model/free_gpus_log.h). A copy of the snapshot starts it afresh.
  FreeGpusLog free_gpus_log;
  // Optional (kept by state::State as edits apply): one digest per workload,
  // parallel to `workloads`. Given, a pass sorts the workloads out and finds
  // each allocation's workload from these alone; builds with expensive
  // checks recompute them and check they agree. Empty = computed here.
  std::vector<WorkloadDigest> workload_digests;
  // Optional, with workload_digests (kept by state::State too): the
  // workloads waiting to start, in order. Given (its size is the number of
  // waiting digests), a pass takes its waiting work from it instead of
  // sorting; builds with expensive checks check it against the digests.
  WaitingOrder waiting_order;
  // Optional, with workload_digests and a kept waiting_order (all three
  // kept by state::State): each allocation's workload, as an index into
  // `workloads`, parallel to `allocations`. Given, a pass finds the placed
  // work from the allocations and the waiting work from the order, and
  // reads no digest of the rest; builds with expensive checks check it.
  std::vector<uint32_t> allocation_workloads;
  // Optional (bumped by state::State on every edit but a checkpoint): names
  // this version of everything above but `now` (and the allocations'
  // last_checkpoint, which only prices preemption victims), so the scheduler
  // can skip a pass over a version it saw decide nothing
  // (core/model/change_stamp.h, core/engine/scheduler.h). A copy is
  // untracked.
  ChangeStamp stamp;

  // Drops the optional bookkeeping above, for a copy whose workloads,
  // allocations or nodes are about to be edited by hand.
  void ClearDerived() {
    free_gpus.clear();
    free_gpus_log.Reset();
    allocation_gpus.clear();
    workload_digests.clear();
    waiting_order.Clear();
    allocation_workloads.clear();
    stamp.Reset();
  }

  bool is_lent(NodeId n) const {
    return n.value() < lent_nodes.size() && lent_nodes[n.value()];
  }

  // Calls f(w) for each workload of `kind`, in order. With digests the
  // others are skipped without reading their records: the co-location
  // planner looks for services and batch jobs among a training backlog tens
  // of thousands deep every pass.
  template <typename F>
  void ForEachOfKind(WorkloadKind kind, F f) const {
    const bool digests = workload_digests.size() == workloads.size();
    for (size_t i = 0; i < workloads.size(); ++i) {
      if (digests && workload_digests[i].kind != kind) continue;
      if (workloads[i].kind == kind) f(workloads[i]);
    }
  }
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_SNAPSHOT_H_
