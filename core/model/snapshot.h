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
#include "core/model/workload.h"

namespace tidal {

// The few fields of a workload that sort it into a pass's phases (pending,
// placed service, placed elastic job, debug session) and count its GPUs
// against its queue, with where its allocation is and whether pods of it are
// leaving, and what orders waiting work (its priority, submit time, id and
// gang). A pass reads these ~48 bytes per workload instead of each
// ~800-byte Workload and ~100-byte Allocation: at 30,000 live workloads
// those walks were most of a simulated week's time.
struct WorkloadDigest {
  int32_t allocation = -1;  // index into Snapshot::allocations, or -1
  QueueId queue;
  WorkloadKind kind = WorkloadKind::kTraining;
  WorkloadState state = WorkloadState::kPending;
  bool elastic = false;
  bool leaving = false;  // its allocation has pods leaving (a shrink under way)
  bool awaiting_approval = false;  // Priority::awaiting_approval
  int32_t priority = 0;            // Priority::value
  int32_t borrowing_start_delta = 0;
  int32_t min_pods = 0;
  int32_t gpus_per_pod = 0;
  WorkloadId id;
  Time submit_time;

  // `a` is the workload's allocation (at index `allocation`), or null.
  static WorkloadDigest Of(const Workload& w, int32_t allocation, const Allocation* a) {
    WorkloadDigest d;
    d.allocation = allocation;
    d.queue = w.queue;
    d.kind = w.kind;
    d.state = w.state;
    d.elastic = w.is_elastic();
    d.leaving = a != nullptr && !a->leaving.empty();
    d.awaiting_approval = w.priority.awaiting_approval;
    d.priority = w.priority.value;
    d.borrowing_start_delta = w.priority.borrowing_start_delta;
    d.min_pods = w.min_pods;
    d.gpus_per_pod = w.gpus_per_pod;
    d.id = w.id;
    d.submit_time = w.submit_time;
    return d;
  }
  bool operator==(const WorkloadDigest&) const = default;
};

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
    stamp.Reset();
  }

  bool is_lent(NodeId n) const {
    return n.value() < lent_nodes.size() && lent_nodes[n.value()];
  }
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_SNAPSHOT_H_
