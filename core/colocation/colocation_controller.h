// The co-location facade the simulator and the server call once per
// scheduling pass:
//   controller.ObserveLoad(service, t, rps);          // as load is measured
//   Decisions pre = controller.Prepare(snapshot);     // before the engine
//   Decisions eng = scheduler.Schedule(snapshot);     // on the prepared snapshot
//   apply pre, then eng (each: preempts, resizes, places).
//
// Prepare, in workload-id order:
//  1. Autoscale: for every pending or running inference workload, sets
//     `pods` to the autoscaler's target. The load it sizes for is the latest
//     observed rps; in predictive mode also m x max(current, the forecast
//     peak over [now, now + cold start + tick]), so replicas are ready when
//     load arrives, where m >= 1 is the forecaster's learned margin: how far
//     the load recently outran its short forecast (load_forecaster.h). A
//     profile cannot say how much higher today's ramp runs than the past
//     days' (the GenAI trace's peaks differ up to 7x from day to day), and a
//     fixed headroom is too small at such a ramp and wasted on a calm day;
//     the measured error is neither. The margins never ask for more GPUs
//     than the inference-reserved and shared pools hold (healthy GPUs of
//     nodes that take work): a replica beyond them cannot start and only
//     fails its scale-up (the Lifecycle's timeout), so where the services'
//     targets at full margin (each at least the target the autoscaler
//     still holds) would not fit, every margin is scaled to
//     1 + f x (m - 1) with the largest f in [0, 1] that fits (bisection to
//     1/1024; f = 0 asks what reactive would). The replica targets (and the
//     urgent returns of step 2) count only the shared nodes not lent now:
//     a margin is insurance, and insurance never forces a return at a loss;
//     the loans plan for the full margin, so its nodes come back at a cheap
//     moment (return_timing.h) and the targets rise as they do.
//     Spares (predictive): the inference-reserved pool is never lent, so
//     its free GPUs cost no one anything; every service that may use all
//     reserved nodes is sized again for x times the load it was sized
//     for, with the largest x in
//     [1, kMaxSpareFactor] whose extra replicas all fit (first fit, largest
//     pods first) on the reserved pool's free GPUs after the replicas still
//     to place (bisection). A step the forecast and the margin missed then
//     finds replicas already warm. Spares are not demand: they never call a
//     node back, and a pass that needs their room takes it (the pods above
//     a target are the newest, which a scale-down removes first).
//  2. Loans: sets `snapshot.lent_nodes` (sized to the cluster) from
//     PlanLoans. The demand is the current targets (static/reactive) or, in
//     predictive mode, the larger of the target and the forecast need over
//     the look-ahead max(forecast_horizon, cold start + grace + tick) (also
//     m x max(current, forecast peak), so returns come ahead of a ramp the
//     margin expects and can wait for checkpoints); the
//     tick is the time since the previous Prepare. A shared node inference
//     needed (held a replica, or was planned to) less than
//     colocation.relend_delay ago is held: not lent anew. In predictive
//     mode a return the short look-ahead does not call for yet waits while
//     a later moment loses less work (return_timing.h): the node stays lent
//     and is listed in `deferred`.
//  3. Returns: borrowed training/batch/debug work on nodes being returned gets
//     notice: an elastic job that can lose its pods there and keep min_pods is
//     shrunk (Resize, removed = its pods on those nodes), anything else is
//     preempted (cause kInferenceReturn, grace = preemption.default_grace,
//     lost work = GPUs x time since last checkpoint). Work that is still on
//     a non-lent shared node and was not given notice yet gets it too.
//  4. Pending batch jobs that cannot meet their deadline are rejected.
// Prepare never edits the snapshot: it returns a ColocationPlan, and the
// caller applies it (state::StateMachine::ApplyPlan) before the engine's pass,
// so the engine sees the new targets and loans, the victims terminating and a
// shrunk job's removed pods leaving (Allocation::leaving), exactly as they
// will be committed.
// Lent state persists inside the controller between passes; a shared node
// that holds borrowed non-terminating work counts as lent (so a restarted
// server recovers its loans from the allocations).
#ifndef TIDAL_CORE_COLOCATION_COLOCATION_CONTROLLER_H_
#define TIDAL_CORE_COLOCATION_COLOCATION_CONTROLLER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/colocation/autoscaler.h"
#include "core/colocation/batch_admission.h"
#include "core/colocation/latency_model.h"
#include "core/colocation/load_forecaster.h"
#include "core/colocation/loan_planner.h"
#include "core/model/decision.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"

namespace tidal {

struct ServiceStatus {
  WorkloadId service;
  std::string name;
  double current_rps = 0;
  double forecast_peak_rps = 0;   // over the look-ahead
  int desired_replicas = 0;       // the autoscaler's target
  int spare_replicas = 0;         // predictive: spares on the reserved pool (pods = desired + spare)
  int running_replicas = 0;       // pods in its allocation
  int forecast_replicas = 0;      // replicas the look-ahead needs
  Duration cold_start{0};
  Duration target_p99{0};
  // Modelled at current_rps over running replicas (+inf if unserved).
  double modelled_p95_ms = 0;
  double modelled_p99_ms = 0;
};

struct ColocationStatus {
  Time at;
  ColocationMode mode = ColocationMode::kPredictive;
  Duration lookahead{0};
  int shared_nodes = 0;
  int lent_nodes = 0;
  int unplaced_replicas = 0;
  std::vector<NodeId> returned;    // in the last Prepare
  std::vector<NodeId> newly_lent;  // in the last Prepare
  std::vector<NodeId> held;        // not lent anew yet: see relend_delay
  std::vector<NodeId> deferred;    // returns waiting for a checkpoint
  std::vector<ServiceStatus> services;  // in id order
};

// What one Prepare decided.
struct ColocationPlan {
  // Each active service's replica target, in id order, and (parallel, in
  // predictive mode) how many of them are spares.
  std::vector<std::pair<WorkloadId, int>> targets;
  std::vector<int> spares;
  // The whole loan state after this plan, indexed by NodeId.
  std::vector<bool> lent_nodes;
  // Notices (preempts) and shrinks (resizes) for returned capacity, and
  // rejects for batch jobs that cannot meet their deadline.
  Decisions decisions;
};

// What the controller carries from one Prepare to the next, beyond the
// snapshot it is given: the forecaster's series, the autoscaler's hysteresis,
// the loans it made, when inference last needed each node (relend_delay), the
// time of the last Prepare (the tick), the notices given and the services it
// knows. A journal snapshot keeps it (protocol/colocation_memory.h), so that
// a replay started there makes the controller's decisions the server made.
// Caches (the latency memo) and the last status are not memory.
struct ColocationMemory {
  std::map<WorkloadId, LoadSeries> load;
  std::map<WorkloadId, ServiceScaling> scaling;
  std::vector<bool> lent;  // by NodeId
  std::vector<std::optional<Time>> needed_at;  // by NodeId
  std::optional<Time> last_prepare;
  std::map<std::pair<WorkloadId, NodeId>, Time> noticed;  // until the grace deadline
  std::set<WorkloadId> known_services;
  bool operator==(const ColocationMemory&) const = default;
};

class ColocationController {
 public:
  explicit ColocationController(const PolicyConfig& policy,
                                ForecasterOptions forecaster = {},
                                ColdStartModel cold_start = {});

  void ObserveLoad(WorkloadId service, Time t, double rps);
  ColocationPlan Prepare(const Snapshot& snapshot);

  // As of the last Prepare.
  const ColocationStatus& status() const { return status_; }
  // Modelled latency of `rps` over `ready_replicas` of `service`'s spec.
  static QueueLatency ModelServiceLatency(const InferenceSpec& spec, double rps,
                                          int ready_replicas);

  ColocationMode mode() const { return config_.mode; }
  const ColocationConfig& config() const { return config_; }
  Duration grace() const { return grace_; }
  const ColdStartModel& cold_start_model() const { return cold_start_model_; }
  const LoadForecaster& forecaster() const { return forecaster_; }
  // Which nodes are lent, and per node the last Prepare at which inference
  // needed it, both indexed by NodeId (possibly shorter than the cluster):
  // where a loan calendar starts from.
  const std::vector<bool>& lent() const { return lent_; }
  const std::vector<std::optional<Time>>& needed_at() const { return needed_at_; }

  // The memory, and back. Restore replaces it whole, or fails (changing
  // nothing) when the load series do not fit this controller's forecaster.
  ColocationMemory memory() const;
  Status Restore(ColocationMemory memory);

 private:
  // Per service of `services` (active inference, in id order), the
  // forecaster's margin, scaled down where the targets it asks for would not
  // fit the inference pools (see the file comment).
  std::vector<double> FittedMargins(const Snapshot& snapshot,
                                    const std::vector<const Workload*>& services, Duration tick,
                                    const std::vector<bool>& lent) const;

  // Per service of `services` (active inference, in id order, with their
  // autoscaler `targets` and the load `sized_for_rps` they were sized for),
  // the spare replicas the inference-reserved pool's free GPUs take (see
  // the file comment).
  std::vector<int> SpareReplicas(const Snapshot& snapshot,
                                 const std::vector<const Allocation*>& allocation_of,
                                 const std::vector<const Workload*>& services,
                                 const std::vector<double>& sized_for_rps,
                                 const std::vector<std::pair<WorkloadId, int>>& targets) const;
  // Spares size a service for at most this multiple of its load: twice the
  // learned margin's cap.
  static constexpr double kMaxSpareFactor = 4.0;

  ColocationConfig config_;
  Duration grace_;
  ColdStartModel cold_start_model_;
  LoadForecaster forecaster_;
  Autoscaler autoscaler_;
  std::vector<bool> lent_;
  // Per node, the last Prepare at which inference needed it (nullopt: never).
  std::vector<std::optional<Time>> needed_at_;
  std::optional<Time> last_prepare_;
  // Borrowed work given notice, by (workload, node), until its grace deadline:
  // not noticed twice.
  std::map<std::pair<WorkloadId, NodeId>, Time> noticed_;
  std::set<WorkloadId> known_services_;
  // Per service, the last latency-model results and their inputs: P95/P99
  // and replica sizing run bisections, so they are recomputed only when a
  // service's load, replica count or spec changed.
  struct ServiceMemo {
    double need_rps = -1;
    double need_capacity_rps = 0;
    Duration need_target{0};
    int need = 0;
    double latency_rps = -1;
    int latency_replicas = -1;
    double latency_capacity_rps = 0;
    double p95_ms = 0;
    double p99_ms = 0;
  };
  std::unordered_map<WorkloadId, ServiceMemo> memo_;
  // RequiredReplicas(spec, rps, headroom) per service: the margin fits and
  // the spares bisect over loads that repeat from pass to pass while the
  // forecast holds, and each call is a bisection of the latency model.
  struct NeedCache {
    double capacity_rps = 0;
    Duration target{0};
    std::vector<std::pair<double, int>> entries;  // (rps, replicas)
    size_t next = 0;  // the entry replaced next once full
  };
  static constexpr size_t kNeedCacheSize = 64;
  int Need(const Workload& service, double rps) const;
  mutable std::unordered_map<WorkloadId, NeedCache> need_cache_;
  ColocationStatus status_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_COLOCATION_CONTROLLER_H_
