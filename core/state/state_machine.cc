#include "core/state/state_machine.h"

#include <unordered_set>
#include <utility>

namespace tidal::state {

StateMachine::StateMachine(State state, LifecycleOptions options, std::vector<PriorityTemplate> templates)
    : state_(std::move(state)),
      lifecycle_(options),
      refresher_(std::move(templates)),
      default_grace_(options.default_grace) {
  lifecycle_.ArmExisting(state_);
}

Status StateMachine::Apply(const Edit& edit, EditOrigin origin) {
  TIDAL_RETURN_IF_ERROR(state_.Apply(edit));
  lifecycle_.Observe(edit, state_);
  refresher_.Observe(edit);
  if (sink_) sink_(state_.now(), origin, edit);
  return Status::Ok();
}

std::vector<Edit> StateMachine::Tick() {
  std::vector<Edit> applied;
  for (Edit& e : lifecycle_.Tick(state_, state_.now())) {
    // A timer's edit can go stale only through an earlier edit of the same
    // tick (two timers of one workload); the first one wins.
    if (Apply(e, EditOrigin::kLifecycle).ok()) applied.push_back(std::move(e));
  }
  return applied;
}

Status StateMachine::RefreshPriorities() {
  PriorityRefresh refresh = refresher_.Refresh(state_);
  for (const SetPriorityEdit& e : refresh.edits) TIDAL_RETURN_IF_ERROR(Apply(e, EditOrigin::kPriority));
  return refresh.first_error;
}

// All edits of one decision, or none: each is checked against the state as
// the previous ones left it, and nothing is applied unless all pass.
Status StateMachine::ApplyGroup(const std::vector<Edit>& group, EditOrigin origin) {
  if (group.size() == 1) return Apply(group.front(), origin);
  // Multi-edit decisions (a resize that grows and shrinks) check the second
  // edit on a copy of what the first leaves: rare, and cheaper than undo.
  State trial = state_;
  trial.set_observer(nullptr);
  for (const Edit& e : group) TIDAL_RETURN_IF_ERROR(trial.Apply(e));
  for (const Edit& e : group) TIDAL_RETURN_IF_ERROR(Apply(e, origin));
  return Status::Ok();
}

ApplyOutcome StateMachine::ApplyDecisions(const Decisions& d) {
  return ApplyDecisionsFrom(d, EditOrigin::kEngine);
}

ApplyOutcome StateMachine::ApplyDecisionsFrom(const Decisions& d, EditOrigin origin) {
  ApplyOutcome out;
  const Time now = state_.now();
  std::unordered_set<WorkloadId> changed;
  auto apply = [&](WorkloadId w, std::string_view kind, std::vector<Edit> group) {
    if (!changed.insert(w).second) {
      out.refused.push_back({w, kind, FailedPrecondition("a second decision for one workload in one pass")});
      return;
    }
    if (group.empty()) return;
    if (Status s = ApplyGroup(group, origin); !s.ok()) {
      out.refused.push_back({w, kind, std::move(s)});
      return;
    }
    for (Edit& e : group) out.applied.push_back(std::move(e));
  };
  const auto grace = [&](Time deadline) {
    return deadline < now || deadline == kInfiniteFuture ? now + default_grace_ : deadline;
  };
  for (const PreemptDecision& p : d.preempts) {
    const StopNotice* already = state_.stop(p.victim);
    if (already != nullptr) continue;  // noticed before: nothing new to decide
    NoticeEdit n;
    n.workload = p.victim;
    n.preemptor = p.preemptor;
    n.cause = p.cause;
    n.grace_deadline = grace(p.grace_deadline);
    n.lost_gpu_seconds = p.lost_gpu_seconds;
    n.requeue = p.cause != PreemptCause::kMaxRuntime && p.cause != PreemptCause::kIdle;
    apply(p.victim, "preempt", {std::move(n)});
  }
  for (const ResizeDecision& r : d.resizes) {
    std::vector<Edit> group;
    if (!r.added.empty()) group.push_back(GrowEdit{r.workload, r.added});
    if (!r.removed.empty()) {
      group.push_back(ShrinkEdit{r.workload, r.removed, r.beneficiary, grace(r.grace_deadline)});
    }
    apply(r.workload, "resize", std::move(group));
  }
  for (const PlaceDecision& p : d.places) {
    apply(p.workload, "place", {PlaceEdit{p.workload, p.pods, p.borrowed}});
  }
  for (const RejectDecision& r : d.rejects) {
    const Workload* w = state_.workload(r.workload);
    if (w == nullptr || w->state != WorkloadState::kPending) continue;  // it started or ended meanwhile
    apply(r.workload, "reject", {ReleaseEdit{r.workload, WorkloadState::kFailed}});
  }
  return out;
}

ApplyOutcome StateMachine::ApplyPlan(const ColocationPlan& plan) {
  ApplyOutcome out;
  for (size_t k = 0; k < plan.targets.size(); ++k) {
    const auto& [id, pods] = plan.targets[k];
    const int spares = k < plan.spares.size() ? plan.spares[k] : 0;
    const Workload* w = state_.workload(id);
    if (w == nullptr || (w->pods == pods && w->spare_pods == spares)) continue;
    SetTargetEdit e{id, pods, 0, 0, spares};
    if (Apply(e, EditOrigin::kColocation).ok()) out.applied.push_back(e);
  }
  const Snapshot& s = state_.snapshot();
  for (size_t n = 0; n < plan.lent_nodes.size() && n < s.cluster.nodes.size(); ++n) {
    const NodeId node(static_cast<uint32_t>(n));
    if (plan.lent_nodes[n] == s.is_lent(node)) continue;
    Edit e = plan.lent_nodes[n] ? Edit(LendEdit{node}) : Edit(ReturnEdit{node});
    if (Apply(e, EditOrigin::kColocation).ok()) out.applied.push_back(std::move(e));
  }
  ApplyOutcome decided = ApplyDecisionsFrom(plan.decisions, EditOrigin::kColocation);
  for (Edit& e : decided.applied) out.applied.push_back(std::move(e));
  out.refused = std::move(decided.refused);
  return out;
}

}  // namespace tidal::state
