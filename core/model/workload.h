// A workload is what a team submits: a training job, an inference service, a
// batch-inference job or a debug session. Each is a set of identical pods; a
// training job's first `min_pods` pods form its gang.
#ifndef TIDAL_CORE_MODEL_WORKLOAD_H_
#define TIDAL_CORE_MODEL_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/cluster.h"

namespace tidal {

enum class WorkloadKind : uint8_t { kTraining, kInference, kBatchInference, kDebug };
std::string_view WorkloadKindName(WorkloadKind kind);  // "training", ...

enum class TopologyLevel : uint8_t { kNone, kNvlink, kNode, kRack };
std::string_view TopologyLevelName(TopologyLevel level);

struct TopologyConstraint {
  TopologyLevel level = TopologyLevel::kNone;
  bool required = false;  // false = preferred
  bool operator==(const TopologyConstraint&) const = default;
};

struct PlacementConstraints {
  std::vector<std::string> required_gpu_models;   // empty = any
  std::vector<std::string> preferred_gpu_models;
  std::map<std::string, std::string> node_selector;  // label = value, all must match
  std::vector<Taint> tolerations;                     // value "" tolerates any value
  TopologyConstraint topology;

  // No GPU model, selector or toleration: every such workload of a queue
  // and kind is eligible for the same nodes, so eligibility is shared.
  bool plain() const {
    return required_gpu_models.empty() && preferred_gpu_models.empty() && node_selector.empty() &&
           tolerations.empty();
  }
};

enum class ModelSource { kLocalCache, kSharedStorage };

struct InferenceSpec {
  Duration target_p99 = milliseconds(0);
  Duration cold_start = milliseconds(0);  // 0 = estimate from the model
  double replica_capacity_rps = 0;
  double model_size_gib = 0;
  ModelSource model_source = ModelSource::kLocalCache;
};

struct TrainingSpec {
  Duration checkpoint_interval = milliseconds(0);  // 0 = never checkpoints
  // How long a checkpoint takes to save when a notice asks for one (the
  // notice file's "checkpoint": true); 0 = the job saves only at its
  // interval. A victim whose grace covers it loses only the save.
  Duration checkpoint_on_request = milliseconds(0);
};

struct BatchSpec {
  Time deadline = kInfiniteFuture;
};

struct DebugSpec {
  Duration max_runtime = minutes(60);
};

enum class PreemptibilityClass {
  kNever,          // never a victim (inference, critical training)
  kPreemptible,    // a victim of higher priority or reclaim, with notice
  kReclaimable,    // always reclaimable (debug, best effort)
};
std::string_view PreemptibilityClassName(PreemptibilityClass c);

// The derived priority and how it was derived, so that it can be shown.
struct Priority {
  int value = 0;
  PreemptibilityClass preemptibility = PreemptibilityClass::kPreemptible;
  std::string template_name;
  std::vector<std::string> derivation;  // one line per layer, in order
  bool awaiting_approval = false;
  // The part of `value` that is the requeued bonus: it orders waiting work,
  // but a preemptor is compared with its victims without it.
  int resume_bonus = 0;
  // Set while its queue is within its guarantee: what the budget layer adds
  // instead if the workload's start would take the queue above the
  // guarantee (borrowing's adjustment minus within_guarantee's). The engine
  // adds it to waiting work at the start of each pass
  // (SchedulingPass::StartPriority), so the stored priority does not flip
  // with every start and exit in the queue; running work ignores it.
  int borrowing_start_delta = 0;
};

enum class WorkloadState : uint8_t {
  kAwaitingApproval,
  kPending,
  kRunning,
  kTerminating,  // preempted: inside its grace period
  kSucceeded,
  kFailed,
  kCancelled,
};
std::string_view WorkloadStateName(WorkloadState state);

struct Workload {
  WorkloadId id;
  std::string name;
  std::string tenant;
  ProjectId project;
  QueueId queue;
  WorkloadKind kind = WorkloadKind::kTraining;
  WorkloadState state = WorkloadState::kPending;

  int gpus_per_pod = 1;
  int pods = 1;       // desired (training replicas, inference current target)
  int min_pods = 1;   // gang minimum; == pods for a rigid gang
  int max_pods = 1;   // > pods only for an elastic job
  // Inference in predictive mode: of `pods`, the spares the co-location
  // controller keeps on the reserved pool's free GPUs (not demand: a
  // scale-up is opened and judged on pods - spare_pods).
  int spare_pods = 0;
  bool preemptible = true;
  Duration expected_duration = milliseconds(0);  // at full size; 0 = unknown

  Time submit_time;
  PlacementConstraints constraints;
  TrainingSpec training;
  InferenceSpec inference;
  BatchSpec batch;
  DebugSpec debug;

  Priority priority;
  // An admin approved its project's top tier for it (state::ApproveEdit):
  // re-derivations keep the approved tier instead of the fallback.
  bool top_tier_approved = false;
  // Times it lost its GPUs and waited again (state::RequeueEdit): the
  // requeued bonus applies while such a workload waits.
  int requeues = 0;

  int min_gpus() const { return min_pods * gpus_per_pod; }
  bool is_gang() const { return min_pods > 1; }
  bool is_elastic() const { return max_pods > min_pods; }
  // Whether higher-priority work may take its GPUs: not a service, and its
  // template's class allows it (a kPreemptible one only when preemptible).
  bool may_be_preempted() const {
    return kind != WorkloadKind::kInference && priority.preemptibility != PreemptibilityClass::kNever &&
           (priority.preemptibility != PreemptibilityClass::kPreemptible || preemptible);
  }
  // The pods the service's load asks for: `pods` less the spares. A
  // scale-up is opened and judged on it, and the metrics report it.
  int demand_pods() const { return pods - spare_pods; }
  // Preemptible training that never checkpoints: a template may keep it off
  // the shared pool, since a return there loses all its work.
  bool preemptible_without_checkpoint() const {
    return kind == WorkloadKind::kTraining && preemptible && training.checkpoint_interval.count() <= 0;
  }
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_WORKLOAD_H_
