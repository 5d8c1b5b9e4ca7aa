// Why an inference service missed its SLO, and why a scale-up was slow or
// failed: one dominant cause, with its numbers, for the server and the
// simulator alike (a simulation must predict production, so neither computes
// a cause of its own).
//
// The algorithm. SloDiagnosis is told every edit the state machine applies
// (Observe, from the machine's sink, after the edit) and keeps, per inference
// service, what the committed state forgets: when each of its pods was placed
// and became ready, the replicas it lost and why (a GPU fault drained them, a
// node was lost, a replica stopped being ready by itself: a crash), and the
// victims preempted or returned for it that still hold their GPUs.
//
// A missed interval (DiagnoseMiss) is explained in replicas. The replicas the
// observed load needed (the autoscaler's RequiredReplicas at the observed
// rate without its headroom, and at least one more than were ready, since the
// interval was missed) minus the replicas ready over the interval is the
// shortfall. A replica serves an interval only if it was asked for at least
// a declared cold start before the interval began, and all along since, so
// the shortfall is cut against two targets: the target in time (the lowest
// target from one cold start before the interval to now, kept from the
// edits) and the target now:
//   * below the target in time: replicas the autoscaler wanted early enough
//     that did not serve. They go, in this order, to the losses not yet made
//     up (node_lost, gpu_fault, replica_crash), then to the pods placed but
//     still loading: slower than declared if placed a cold start before the
//     interval (cold_start), else placed late, charged to what its open
//     scale-ups waited on before placing (victims_in_grace,
//     loan_not_returned or capacity_short; cold_start if they never
//     waited), then to pods not placed: victims still in their grace for
//     this service (victims_in_grace), else shared nodes still lent to
//     training (loan_not_returned), else capacity_short;
//   * between the target in time and the target now: replicas asked for too
//     late to load in time, and above the target now: replicas never asked
//     for. Both are forecast_under_predicted (the target was sized for less
//     load than came; reactive and static modes size for the load of the
//     moment, so a rise always is), except those above a target at the
//     service's max_pods: max_replicas_reached.
// The dominant cause is the one short the most replicas. A tie goes to the
// cause listed first in MissCause, which lists root causes before the
// consequences they set off (a lost node is why its replicas cold start; a
// loan not returned is why replicas wait), so the answer names what to fix.
//
// A scale-up (opened by the state, judged by the Lifecycle: docs/colocation.md
// "Scale-up success") is explained in seconds: from its request on, each
// instant is charged to what blocks it then (a loss not made up; else, while
// fewer pods than its goal are placed, victims in grace, a loan not returned
// or capacity short; else the placed replicas loading: cold_start), and the
// dominant cause is the one charged the most seconds (ties as above). Time
// only moves at edits, and the state does not change between them, so the
// charge of an interval is the cause set after the edit that opened it:
// exact whatever the pass rate. It is "slow" when it timed out or took more
// than max(60 s, 2 x the service's cold start).
//
// Costs: Observe is O(1) for edits of non-inference work, plus one step per
// open scale-up; DiagnoseMiss is O(the service's pods + victims).
#ifndef TIDAL_CORE_DIAGNOSIS_SLO_DIAGNOSIS_H_
#define TIDAL_CORE_DIAGNOSIS_SLO_DIAGNOSIS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/state/edit.h"
#include "core/state/state.h"

namespace tidal::diagnosis {

// The closed set of causes of a missed SLO interval or a slow/failed
// scale-up, root causes first (the order breaks ties). The names are stable:
// metric labels, summary.json keys, the API.
enum class MissCause : uint8_t {
  kNodeLost,                // its replicas' node lost its agent's lease
  kGpuFault,                // a GPU fault drained its replicas off a node
  kReplicaCrash,            // a replica stopped being ready by itself
  kLoanNotReturned,         // the capacity it needs is shared nodes still lent to training
  kVictimsInGrace,          // work preempted or returned for it still holds the GPUs (grace)
  kColdStart,               // replicas placed, still loading the model
  kForecastUnderPredicted,  // the target was sized for less load than came
  kMaxReplicasReached,      // the load needed more replicas than max_pods
  kCapacityShort,           // nothing above: no free GPUs it may use
};
inline constexpr int kMissCauseCount = 9;
// "node_lost", "gpu_fault", "replica_crash", "loan_not_returned",
// "victims_in_grace", "cold_start", "forecast_under_predicted",
// "max_replicas_reached", "capacity_short".
std::string_view MissCauseName(MissCause cause);
// Every cause, in enum order (for exporting each label at 0).
std::array<MissCause, kMissCauseCount> AllMissCauses();

// One interval of a service that missed its SLO, as its caller judged it
// (the simulator: a modelled service-minute; the server: a measured sample).
struct MissObservation {
  WorkloadId service;
  Time from;          // the interval missed: [from, to)
  Time to;
  double rps = 0;     // the load observed over it
  int ready = 0;      // replicas ready during all of it
};

struct MissDiagnosis {
  MissCause cause = MissCause::kCapacityShort;
  int needed = 0;  // replicas the observed load needed (>= ready + 1)
  int ready = 0;
  int target = 0;  // the autoscaler's target at diagnosis
  // The lowest target since one declared cold start before the interval
  // began: the replicas asked for early enough to serve it.
  int target_in_time = 0;
  std::array<int, kMissCauseCount> short_by_cause{};  // replicas, by MissCause
  // The numbers of the causes that apply (0 when not):
  int loading = 0;                 // pods placed, not ready during the interval
  int placed_late = 0;             // of them, placed less than a cold start before it
  double loading_s = 0;            // the longest of them has loaded this long
  double declared_cold_start_s = 0;
  int victims = 0;                 // workloads stopping for it
  double victims_grace_left_s = 0; // until the last one's grace deadline
  int lent_nodes = 0;              // shared nodes lent to training
  std::string detail;              // the numbers, in one line
};

// A judged scale-up (ScaleUpEndEdit), where its time went.
struct ScaleUpDiagnosis {
  WorkloadId service;
  int from = 0, to = 0;
  Time requested_at;
  bool succeeded = false;
  double time_to_capacity_s = 0;  // to ready, or to the timeout
  double slow_after_s = 0;        // max(60, 2 x cold start)
  bool slow = false;              // timed out, or over slow_after_s
  MissCause cause = MissCause::kColdStart;
  std::array<double, kMissCauseCount> seconds_by_cause{};
  double declared_cold_start_s = 0;
  std::string detail;
};

class SloDiagnosis {
 public:
  // Told each applied edit, with the state after it (the machine's sink).
  void Observe(const state::State& state, const state::Edit& edit);

  // The dominant cause of a missed interval of `miss.service`, read from
  // the state now (at or after miss.to) and what Observe kept.
  MissDiagnosis DiagnoseMiss(const state::State& state, const MissObservation& miss) const;

  // Where the time of the scale-up `end` judged went; forgets it. Call it
  // from the sink when the ScaleUpEndEdit arrives (after Observe).
  ScaleUpDiagnosis TakeScaleUp(const state::State& state, const state::ScaleUpEndEdit& end);

 private:
  struct PodRecord {
    PodPlacement pod;
    Time placed_at;
    Time ready_at = kInfiniteFuture;
  };
  struct Loss {
    MissCause cause = MissCause::kCapacityShort;
    int outstanding = 0;         // replicas not made up yet
    std::vector<Time> made_up;   // when the others were: an interval that
                                 // began before still lacked them
  };
  // How long a made-up loss is kept for intervals judged after it.
  static constexpr Duration kKeepMadeUp = hours(1);
  struct OpenScaleUp {
    Time requested_at;
    int to = 0;
    bool blocked = false;  // fewer ready replicas than its goal: time is charged
    MissCause current = MissCause::kColdStart;
    Time since;
    std::array<double, kMissCauseCount> seconds{};
  };
  // A target the service had from `since` on.
  struct TargetSince {
    Time since;
    int pods = 0;
  };
  // How far back targets are kept: a miss is judged against the target one
  // declared cold start before its interval, and intervals end at most a
  // load sample's gap before they are judged. Bounded in entries too, for a
  // target that flickers every pass.
  static constexpr Duration kKeepTargets = hours(2);
  static constexpr size_t kMaxTargets = 1024;
  struct Service {
    std::vector<PodRecord> pods;
    std::vector<Loss> losses;          // oldest first
    std::map<WorkloadId, Time> victims;  // victim -> grace deadline
    std::vector<OpenScaleUp> scale_ups;
    std::vector<TargetSince> targets;  // oldest first, each a change
  };

  Service& ServiceOf(WorkloadId id) { return services_[id]; }
  void Lose(WorkloadId service, MissCause cause, int replicas);
  void PodsGone(Service& s, const std::vector<PodPlacement>& pods);
  static void NoteTarget(Service& s, Time now, int pods);
  // What the service's open scale-ups waited on before their pods were
  // placed (victims in grace, a loan not returned, capacity short: the one
  // charged the most seconds), or cold_start if they never waited.
  static MissCause PlacementDelay(const Service& s);
  // The lowest target from `t` to now (`now` the target now): the replicas
  // asked for all along since `t`. An entry in force at `t` counts; when `t`
  // is older than every entry the first one does (a service is judged
  // against its first target while it first deploys).
  static int LowestTargetSince(const Service& s, Time t, int now);
  void ForgetVictim(WorkloadId victim);
  void SyncScaleUps(const state::State& state, WorkloadId id, Service& s);
  MissCause Blocking(const state::State& state, WorkloadId id, const Service& s, int goal) const;
  int PlacedPods(const state::State& state, WorkloadId id) const;
  void CountLent(const state::State& state);

  std::map<WorkloadId, Service> services_;
  std::map<WorkloadId, Service> no_services_;  // always empty: the loops' target when none is open
  int open_scale_ups_ = 0;  // over all services: the per-edit charge is skipped at 0
  std::map<WorkloadId, WorkloadId> victim_of_;  // victim -> the service it stops for
  int lent_nodes_ = -1;  // -1 until counted from the state once
  Time last_;
};

// The dominant cause of a count or time per cause: the largest, ties to the
// cause listed first. Exposed for the tests of the rule.
MissCause DominantMissCause(const std::array<double, kMissCauseCount>& weight);

}  // namespace tidal::diagnosis

#endif  // TIDAL_CORE_DIAGNOSIS_SLO_DIAGNOSIS_H_
