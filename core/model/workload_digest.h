// A workload's digest: what a scheduling pass reads of it per pass.
#ifndef TIDAL_CORE_MODEL_WORKLOAD_DIGEST_H_
#define TIDAL_CORE_MODEL_WORKLOAD_DIGEST_H_

#include <cstdint>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/model/workload.h"

namespace tidal {

// The few fields of a workload that sort it into a pass's phases (pending,
// placed service, placed elastic job, debug session) and count its GPUs
// against its queue, with where its allocation is and whether pods of it are
// leaving, what orders waiting work (its priority, submit time, id and
// gang), what decides a wait once the rest of a pass can only wait
// (desired pods, topology, expected duration), and whether it may be a
// preemption victim. A pass reads these 64 bytes per workload instead of
// each ~800-byte Workload and ~100-byte Allocation: at 30,000 live
// workloads those walks were most of a simulated week's time, and
// explaining a backlog thousands deep touched several lines of each
// record.
struct WorkloadDigest {
  int32_t allocation = -1;  // index into Snapshot::allocations, or -1
  QueueId queue;
  WorkloadState state = WorkloadState::kPending;
  WorkloadKind kind = WorkloadKind::kTraining;
  bool elastic = false;
  bool leaving = false;  // its allocation has pods leaving (a shrink under way)
  bool awaiting_approval = false;  // Priority::awaiting_approval
  TopologyConstraint topology;     // PlacementConstraints::topology
  // No GPU model, node selector or toleration: its eligibility is its
  // queue's (placement::EligibilityIndex).
  bool plain_constraints = false;
  // Preemptible training without a checkpoint interval: the only work a
  // template's require_checkpoint_to_borrow keeps off the shared pool.
  bool preemptible_without_checkpoint = false;
  bool may_be_preempted = false;  // Workload::may_be_preempted
  int32_t priority = 0;            // Priority::value
  int32_t borrowing_start_delta = 0;
  int32_t min_pods = 0;
  int32_t gpus_per_pod = 0;
  int32_t pods = 0;  // desired
  WorkloadId id;
  Time submit_time;
  Duration expected_duration;

  // `a` is the workload's allocation (at index `allocation`), or null.
  static WorkloadDigest Of(const Workload& w, int32_t allocation, const Allocation* a) {
    WorkloadDigest d;
    d.allocation = allocation;
    d.queue = w.queue;
    d.state = w.state;
    d.kind = w.kind;
    d.elastic = w.is_elastic();
    d.leaving = a != nullptr && !a->leaving.empty();
    d.awaiting_approval = w.priority.awaiting_approval;
    d.topology = w.constraints.topology;
    d.plain_constraints = w.constraints.plain();
    d.preemptible_without_checkpoint = w.preemptible_without_checkpoint();
    d.may_be_preempted = w.may_be_preempted();
    d.priority = w.priority.value;
    d.borrowing_start_delta = w.priority.borrowing_start_delta;
    d.min_pods = w.min_pods;
    d.gpus_per_pod = w.gpus_per_pod;
    d.pods = w.pods;
    d.id = w.id;
    d.submit_time = w.submit_time;
    d.expected_duration = w.expected_duration;
    return d;
  }
  bool operator==(const WorkloadDigest&) const = default;
};
static_assert(sizeof(WorkloadDigest) == 64, "a digest is one cache line");

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_WORKLOAD_DIGEST_H_
