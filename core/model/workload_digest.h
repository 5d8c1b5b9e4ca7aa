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

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_WORKLOAD_DIGEST_H_
