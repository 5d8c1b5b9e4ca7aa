// What one scheduling pass returns. The engine never changes the world: the
// server and the simulator apply these, in this order: preempts, resizes,
// places. Waits and rejects are recorded for explanations.
#ifndef TIDAL_CORE_MODEL_DECISION_H_
#define TIDAL_CORE_MODEL_DECISION_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/allocation.h"

namespace tidal {

// The dominant reason a workload waits (or is rejected).
enum class ReasonCode {
  kQuota,             // its queue's guarantee and borrowing are used up
  kGang,              // its gang minimum does not fit as a whole
  kTopology,          // GPUs are free but not inside one required domain
  kFragmentation,     // enough GPUs in total, scattered over nodes
  kConstraints,       // GPU model, node selector or taints rule nodes out
  kNodeHealth,        // the fitting nodes are unhealthy, failed or drained
  kAwaitingVictims,   // preempted victims are still inside their grace
  kReservation,       // capacity is held for a larger gang ahead of it
  kPriority,          // higher-priority work takes the free capacity first
  kAwaitingApproval,  // its top-tier priority awaits an admin
  kPool,              // no pool its queue may use has room
  kLoan,              // shared capacity is not lent now (inference needs it)
  kDeadline,          // batch: the deadline cannot be met
  kCapacity,          // the cluster is full
};
std::string_view ReasonCodeName(ReasonCode code);  // "quota", "gang", ...

enum class PreemptCause {
  kPriority,         // a higher-priority workload needs the GPUs
  kReclaim,          // a queue takes back its lent guarantee
  kInferenceReturn,  // loaned shared capacity goes back to inference
  kMaxRuntime,       // a debug job reached its maximum runtime
  kIdle,             // a debug job sat idle past its limit
  kDrain,            // its node is drained after a GPU fault
  kCancel,           // its owner cancelled it
};
std::string_view PreemptCauseName(PreemptCause cause);

struct PlaceDecision {
  WorkloadId workload;
  std::vector<PodPlacement> pods;  // a whole gang at once
  bool borrowed = false;

  friend bool operator==(const PlaceDecision&, const PlaceDecision&) = default;
};

struct PreemptDecision {
  WorkloadId victim;
  WorkloadId preemptor;  // invalid for max-runtime stops
  PreemptCause cause = PreemptCause::kPriority;
  Time notice_time;
  Time grace_deadline;
  double lost_gpu_seconds = 0;  // work since the victim's last checkpoint
  std::string detail;

  friend bool operator==(const PreemptDecision&, const PreemptDecision&) = default;
};

struct ResizeDecision {
  WorkloadId workload;
  int from_pods = 0;
  int to_pods = 0;
  std::vector<PodPlacement> added;    // grow
  std::vector<PodPlacement> removed;  // shrink: these pods get notice
  WorkloadId beneficiary;             // who the shrink makes room for
  Time grace_deadline;
  std::string detail;

  friend bool operator==(const ResizeDecision&, const ResizeDecision&) = default;
};

struct WaitDecision {
  WorkloadId workload;
  ReasonCode reason = ReasonCode::kCapacity;
  std::string detail;  // with the numbers, e.g. "gang: 16 of 32 GPUs fit"
  std::optional<Time> estimated_start;

  friend bool operator==(const WaitDecision&, const WaitDecision&) = default;
};

struct RejectDecision {
  WorkloadId workload;
  ReasonCode reason = ReasonCode::kCapacity;
  std::string detail;

  friend bool operator==(const RejectDecision&, const RejectDecision&) = default;
};

struct Decisions {
  std::vector<PreemptDecision> preempts;
  std::vector<ResizeDecision> resizes;
  std::vector<PlaceDecision> places;
  std::vector<WaitDecision> waits;
  std::vector<RejectDecision> rejects;

  friend bool operator==(const Decisions&, const Decisions&) = default;
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_DECISION_H_
