// Stable names of the model's enums: they appear in the API, the audit log,
// metrics labels and config files, so they never change once released.
#include <bit>

#include "core/model/allocation.h"
#include "core/model/cluster.h"
#include "core/model/decision.h"
#include "core/model/policy.h"
#include "core/model/workload.h"

namespace tidal {

std::string_view WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kTraining: return "training";
    case WorkloadKind::kInference: return "inference";
    case WorkloadKind::kBatchInference: return "batch_inference";
    case WorkloadKind::kDebug: return "debug";
  }
  return "unknown";
}

std::string_view HealthName(Health health) {
  switch (health) {
    case Health::kHealthy: return "healthy";
    case Health::kDegraded: return "degraded";
    case Health::kFailed: return "failed";
    case Health::kNotReady: return "not_ready";
  }
  return "unknown";
}

std::string_view TopologyLevelName(TopologyLevel level) {
  switch (level) {
    case TopologyLevel::kNone: return "none";
    case TopologyLevel::kNvlink: return "nvlink";
    case TopologyLevel::kNode: return "node";
    case TopologyLevel::kRack: return "rack";
  }
  return "unknown";
}

std::string_view PreemptibilityClassName(PreemptibilityClass c) {
  switch (c) {
    case PreemptibilityClass::kNever: return "never";
    case PreemptibilityClass::kPreemptible: return "preemptible";
    case PreemptibilityClass::kReclaimable: return "reclaimable";
  }
  return "unknown";
}

std::string_view WorkloadStateName(WorkloadState state) {
  switch (state) {
    case WorkloadState::kAwaitingApproval: return "awaiting_approval";
    case WorkloadState::kPending: return "pending";
    case WorkloadState::kRunning: return "running";
    case WorkloadState::kTerminating: return "terminating";
    case WorkloadState::kSucceeded: return "succeeded";
    case WorkloadState::kFailed: return "failed";
    case WorkloadState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::string_view BudgetStateName(BudgetState state) {
  switch (state) {
    case BudgetState::kWithinGuarantee: return "within_guarantee";
    case BudgetState::kBorrowing: return "borrowing";
    case BudgetState::kOverBudget: return "over_budget";
  }
  return "unknown";
}

std::string_view ColocationModeName(ColocationMode mode) {
  switch (mode) {
    case ColocationMode::kStatic: return "static";
    case ColocationMode::kReactive: return "reactive";
    case ColocationMode::kPredictive: return "predictive";
  }
  return "unknown";
}

std::string_view ReasonCodeName(ReasonCode code) {
  switch (code) {
    case ReasonCode::kQuota: return "quota";
    case ReasonCode::kGang: return "gang";
    case ReasonCode::kTopology: return "topology";
    case ReasonCode::kFragmentation: return "fragmentation";
    case ReasonCode::kConstraints: return "constraints";
    case ReasonCode::kNodeHealth: return "node_health";
    case ReasonCode::kAwaitingVictims: return "awaiting_victims";
    case ReasonCode::kReservation: return "reservation";
    case ReasonCode::kPriority: return "priority";
    case ReasonCode::kAwaitingApproval: return "awaiting_approval";
    case ReasonCode::kPool: return "pool";
    case ReasonCode::kLoan: return "loan";
    case ReasonCode::kDeadline: return "deadline";
    case ReasonCode::kCapacity: return "capacity";
  }
  return "unknown";
}

std::string_view PreemptCauseName(PreemptCause cause) {
  switch (cause) {
    case PreemptCause::kPriority: return "priority";
    case PreemptCause::kReclaim: return "reclaim";
    case PreemptCause::kInferenceReturn: return "inference_return";
    case PreemptCause::kMaxRuntime: return "max_runtime";
    case PreemptCause::kIdle: return "idle";
    case PreemptCause::kDrain: return "drain";
    case PreemptCause::kCancel: return "cancel";
  }
  return "unknown";
}

int Cluster::total_gpus() const {
  int total = 0;
  for (const Node& n : nodes) total += n.gpu_count;
  return total;
}

int Allocation::gpu_count() const {
  int total = 0;
  for (const PodPlacement& p : pods) total += std::popcount(p.gpus);
  return total;
}

}  // namespace tidal
