// The loan calendar: when each shared node is planned to be lent to training
// and when it must be back for inference, over the coming day, with bounds.
//
// The span [from, from + span) is cut into slots. For each slot, each service
// has three loads, LoadForecaster::Band over the slot (its last millisecond
// included, the next slot's first not): low, planned and high. Under each, it
// needs clamp(RequiredReplicas(spec, rps, headroom), min_pods, max_pods)
// replicas, in the first slot at least its current target. Those demands
// are packed by PlanLoans, the planner Prepare uses, in the controller's
// mode, on the snapshot at the slot's start with each service's running
// replicas cut to the slot's need (its first pods stay where they run: the
// engine scales a service down by its newest pods), so only the replicas
// beyond those are placed anew; each slot starts
// from the previous slot's loans and hold-downs (relend_delay) under the same
// load, the first from the controller's. A node's windows are its runs of
// lent slots under the planned load: lent at the run's start, returned by its
// end (when inference needs the node), with the notice to its borrowers one
// look-ahead earlier (never before the loan starts): max(forecast_horizon,
// the largest cold start + grace), as in Prepare. The bounds:
// `return_earliest` is the first slot of the window in which the high load
// needs the node (the window's end, or the span's, if it never does);
// `return_latest` the first slot from the window's end on in which even the
// low load needs it (none within the span: unbounded).
// Static mode lends nothing, so its calendar has no windows. In reactive mode
// the calendar is what the forecast implies; the controller itself returns a
// node only when a replica finds no room.
// Cost: 3 x slots packings (3 x 48 for a day of half-hour slots), each as
// costly as one pass's loan planning: the server plans one on request
// (GET /v1/loans), the simulator one a day, never in the scheduling pass.
#ifndef TIDAL_CORE_COLOCATION_LOAN_CALENDAR_H_
#define TIDAL_CORE_COLOCATION_LOAN_CALENDAR_H_

#include <optional>
#include <string>
#include <vector>

#include "core/colocation/colocation_controller.h"
#include "core/colocation/load_forecaster.h"
#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"

namespace tidal {

struct LoanCalendarOptions {
  Duration span = hours(24);
  Duration slot = minutes(30);
};

// The bounds on a span of slots: at most this many, so a request cannot ask
// for a year of one-second slots.
inline constexpr int kMaxLoanCalendarSlots = 2016;  // a week of 5-minute slots

struct LoanWindow {
  Time lend_at;
  // When inference needs the node back; nullopt: still lent at the span's end.
  std::optional<Time> return_by;
  // return_by - look-ahead: the earliest notice; a predictive return may
  // wait after it for a checkpoint, up to the short look-ahead before
  // return_by (return_timing.h).
  std::optional<Time> notice_at;
  Time return_earliest;           // under high load
  std::optional<Time> return_latest;  // under low load; nullopt: past the span
  bool operator==(const LoanWindow&) const = default;
};

struct NodeLoanPlan {
  NodeId node;
  std::string name;
  std::vector<LoanWindow> windows;
  // One character per slot: 'L' lent even under high load, 'l' lent under
  // the planned load but not the high one, '-' lent only under low load,
  // '.' kept for inference.
  std::string timeline;
  bool operator==(const NodeLoanPlan&) const = default;
};

struct ServiceLoadPlan {
  WorkloadId service;
  std::string name;
  bool profiled = false;  // a daily profile is in use (else a flat guess)
  std::vector<LoadBand> load;        // per slot, req/s
  std::vector<int> planned_replicas;  // per slot, under the planned load
  bool operator==(const ServiceLoadPlan&) const = default;
};

struct LoanCalendar {
  Time from;
  Duration slot{0};
  int slots = 0;
  ColocationMode mode = ColocationMode::kPredictive;
  Duration lookahead{0};
  // Per slot, how many shared nodes are lent under each load.
  std::vector<int> lent_low_load;
  std::vector<int> lent_planned;
  std::vector<int> lent_high_load;
  std::vector<NodeLoanPlan> nodes;        // every shared node, by id
  std::vector<ServiceLoadPlan> services;  // active inference, by id
  bool operator==(const LoanCalendar&) const = default;
};

// `options.span` and `options.slot` must be positive with at most
// kMaxLoanCalendarSlots slots (callers check what users give).
LoanCalendar PlanLoanCalendar(const ColocationController& controller, const Snapshot& snapshot,
                              Time from, const LoanCalendarOptions& options = {});

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_LOAN_CALENDAR_H_
