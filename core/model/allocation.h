// What a running workload holds: one entry per pod, each on one node.
#ifndef TIDAL_CORE_MODEL_ALLOCATION_H_
#define TIDAL_CORE_MODEL_ALLOCATION_H_

#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/cluster.h"

namespace tidal {

struct PodPlacement {
  NodeId node;
  GpuMask gpus = 0;
  bool operator==(const PodPlacement&) const = default;
};

struct Allocation {
  WorkloadId workload;
  std::vector<PodPlacement> pods;
  Time start_time;
  // The last checkpoint the workload reported; start_time when it has none.
  Time last_checkpoint;
  // Set once a Preempt decision was applied: the GPUs stay in use until the
  // victim exits or the grace deadline passes.
  bool terminating = false;
  Time grace_deadline = kInfiniteFuture;
  // Placed on capacity borrowed from another queue's guarantee or from the
  // shared pool's loan.
  bool borrowed = false;
  // Pods a shrink (ResizeDecision::removed) gave notice to that have not
  // exited yet: still listed in `pods` and still holding their GPUs. The
  // engine neither shrinks them again nor grows the job meanwhile, and a
  // preemptor may wait for them instead of preempting more. Added by the
  // engine (issue #2); empty when the caller removes shrunk pods at once.
  std::vector<PodPlacement> leaving;

  int gpu_count() const;
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_ALLOCATION_H_
