// The one place where anything changes the committed state. It owns the
// State, its Lifecycle (timers) and the applier that turns engine decisions
// into edits; the server and the simulator each hold one and differ only in
// where their inputs come from and where the applied edits go (the server's
// journal, the simulator's event model).
//
//   machine.AdvanceTo(now);
//   machine.Tick();                          // due timers: grace, leaving, max runtime
//   machine.RefreshPriorities();             // budget and deadline moves
//   machine.ApplyPlan(controller.Prepare(machine.state().snapshot()));
//   machine.ApplyDecisions(scheduler.Schedule(machine.state().snapshot()));
//
// Every applied edit is handed to the sink, with the clock it applied at, in
// order. A decision that no longer fits the state (the world moved between
// the snapshot and the apply) is refused whole and counted; it never applies
// half.
//
// Decisions become edits (the applier):
//  - Preempt -> Notice (requeue unless the cause is max runtime or idle). A
//    grace deadline in the past or unset becomes now + default grace.
//  - Resize  -> Grow (added pods), then Shrink (removed pods, leaving).
//  - Place   -> Place.
//  - Reject  -> Release as failed, for a workload still pending.
//  - Wait    -> nothing: waits are explanations, not state.
// At most one decision per workload applies in one batch: a second one for a
// workload already changed by the batch is refused (the engine must never
// emit two; the refusal keeps the state sane if it does).
#ifndef TIDAL_CORE_STATE_STATE_MACHINE_H_
#define TIDAL_CORE_STATE_STATE_MACHINE_H_

#include <functional>
#include <string>
#include <vector>

#include "core/colocation/colocation_controller.h"
#include "core/model/decision.h"
#include "core/state/lifecycle.h"
#include "core/state/priority_refresher.h"
#include "core/state/state.h"

namespace tidal::state {

struct RefusedDecision {
  WorkloadId workload;
  std::string_view kind;  // "preempt", "resize", "place", "reject"
  Status why;
};

struct ApplyOutcome {
  std::vector<Edit> applied;  // in order
  std::vector<RefusedDecision> refused;
};

class StateMachine {
 public:
  // Called with each applied edit, the clock it applied at and who made it;
  // the edit is not copied (a journal that keeps it copies it).
  using Sink = std::function<void(Time at, EditOrigin origin, const Edit& edit)>;

  // `templates` are the policy's priority templates; with none, priorities
  // are never refreshed (engine tests that set priorities by hand).
  StateMachine(State state, LifecycleOptions options, std::vector<PriorityTemplate> templates = {});

  const State& state() const { return state_; }
  const Lifecycle& lifecycle() const { return lifecycle_; }
  void set_sink(Sink sink) { sink_ = std::move(sink); }
  void set_observer(StateObserver* observer) { state_.set_observer(observer); }

  void AdvanceTo(Time t) { state_.AdvanceTo(t); }
  // Applies one edit from the world (a submit, an exit, a checkpoint, a
  // fault), the priority refresher, or a replayed journal.
  Status Apply(const Edit& edit, EditOrigin origin = EditOrigin::kWorld);
  // Fires every due timer; returns the edits that applied.
  std::vector<Edit> Tick();
  ApplyOutcome ApplyDecisions(const Decisions& decisions);
  // The co-location plan: replica targets and loans, then its decisions.
  ApplyOutcome ApplyPlan(const ColocationPlan& plan);
  // Re-derives the priorities that the budget or the clock moved
  // (core/state/priority_refresher.h) and applies them as SetPriority edits
  // of origin kPriority. The error is the first derivation that failed.
  Status RefreshPriorities();

 private:
  Status ApplyGroup(const std::vector<Edit>& group, EditOrigin origin);
  ApplyOutcome ApplyDecisionsFrom(const Decisions& decisions, EditOrigin origin);

  State state_;
  Lifecycle lifecycle_;
  PriorityRefresher refresher_;
  Duration default_grace_;
  Sink sink_;
};

}  // namespace tidal::state

#endif  // TIDAL_CORE_STATE_STATE_MACHINE_H_
