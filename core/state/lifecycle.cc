#include "core/state/lifecycle.h"

#include <algorithm>

#include "core/model/lost_work.h"

namespace tidal::state {
namespace {

WorkloadId IdOf(const Workload& w) { return w.id; }
WorkloadId IdOf(const Allocation& a) { return a.workload; }

}  // namespace

LifecycleOptions ServerLifecycleOptions(const PolicyConfig& policy) {
  return LifecycleOptions{policy.preemption.default_grace, kServerExitReportSlack,
                          policy.colocation.scale_up_timeout};
}

Cluster ClusterAwaitingAgents(Cluster cluster) {
  for (Node& node : cluster.nodes) node.health = Health::kNotReady;
  return cluster;
}

StatusOr<State> RestartedState(Snapshot kept, const std::vector<bool>& registered,
                               std::vector<PendingScaleUp> open_scale_ups) {
  for (size_t i = 0; i < kept.cluster.nodes.size(); ++i) {
    Node& node = kept.cluster.nodes[i];
    if (i >= registered.size() || !registered[i]) {
      node.health = Health::kNotReady;
    } else {
      node.health = node.failed_gpus != 0 ? Health::kDegraded : Health::kHealthy;
    }
  }
  const auto by_id = [](const auto& a, const auto& b) { return IdOf(a) < IdOf(b); };
  std::sort(kept.workloads.begin(), kept.workloads.end(), by_id);
  std::sort(kept.allocations.begin(), kept.allocations.end(), by_id);
  // Loans are not kept: the co-location controller finds them again from the
  // borrowed work on shared nodes, and lends them anew at the first pass.
  kept.lent_nodes.clear();
  // Derived bookkeeping is recounted by FromSnapshot.
  kept.ClearDerived();
  TIDAL_ASSIGN_OR_RETURN(State restarted, State::FromSnapshot(kept));
  if (open_scale_ups.empty()) return restarted;
  State::Extras extras = restarted.extras();
  for (PendingScaleUp& su : open_scale_ups) {
    if (restarted.allocation(su.workload) == nullptr) continue;  // it ended with the old server
    su.ready_at = kInfiniteFuture;
    extras.scale_ups.push_back(su);
  }
  std::sort(extras.scale_ups.begin(), extras.scale_ups.end(),
            [](const PendingScaleUp& a, const PendingScaleUp& b) { return a.workload < b.workload; });
  return State::Restore(restarted.snapshot(), extras);
}

void Lifecycle::Arm(Time at, TimerKind kind, WorkloadId w, Time armed_for, NodeId node) {
  timers_.push(Timer{at, next_seq_++, kind, w, armed_for, node});
}

// A lease holds through `until`: the node is lost only once the clock is
// past it (as "more than a lease since the last heartbeat").
void Lifecycle::ArmLease(NodeId n, Time until) {
  if (until == kInfiniteFuture) return;
  Arm(until + Duration(1), TimerKind::kLease, WorkloadId(), until, n);
}

void Lifecycle::ArmIdle(const Workload& w, Time reclaim_at) {
  if (w.kind != WorkloadKind::kDebug || reclaim_at == kInfiniteFuture) return;
  Arm(reclaim_at, TimerKind::kIdle, w.id, reclaim_at);
}

void Lifecycle::ArmScaleUp(const PendingScaleUp& su, Time now) {
  if (su.ready_at != kInfiniteFuture) {
    Arm(now, TimerKind::kScaleUp, su.workload, su.requested_at);
  } else {
    Arm(su.requested_at + options_.scale_up_timeout, TimerKind::kScaleUp, su.workload, su.requested_at);
  }
}

void Lifecycle::NodeLost(const State& state, NodeId n, std::vector<Edit>& out) const {
  out.push_back(NodeHealthEdit{n, Health::kNotReady});
  // A scan of the allocations: a node is lost rarely, and an index of the
  // work per node would cost every placement.
  for (const Allocation& a : state.snapshot().allocations) {
    bool here = false;
    bool only_leaving = true;
    for (const PodPlacement& p : a.pods) {
      if (p.node != n) continue;
      here = true;
      if (std::find(a.leaving.begin(), a.leaving.end(), p) == a.leaving.end()) only_leaving = false;
    }
    if (!here) continue;
    if (only_leaving && !a.terminating) {
      // Only pods a shrink was removing were there: they are gone early.
      for (const PodPlacement& p : a.pods) {
        if (p.node == n) out.push_back(PodExitEdit{a.workload, p});
      }
      continue;
    }
    // The pods are gone with the node: the whole gang restarts elsewhere,
    // or, told to stop for good, ends.
    const StopNotice* stop = state.stop(a.workload);
    if (a.terminating && stop != nullptr && !stop->requeue) {
      out.push_back(ReleaseEdit{a.workload, WorkloadState::kCancelled, EndCause::kNodeLost});
    } else {
      out.push_back(RequeueEdit{a.workload, EndCause::kNodeLost});
    }
  }
}

void Lifecycle::Drain(const State& state, NodeId n, Time now, std::vector<Edit>& out) const {
  // A scan, as for a lost node: a GPU fault is rare.
  for (const Allocation& a : state.snapshot().allocations) {
    if (a.terminating) continue;
    std::vector<PodPlacement> here;  // its pods on the node that are not leaving already
    for (const PodPlacement& p : a.pods) {
      if (p.node == n && std::find(a.leaving.begin(), a.leaving.end(), p) == a.leaving.end()) here.push_back(p);
    }
    if (here.empty()) continue;
    // What can run on without them (a service's other replicas, an elastic
    // job above its minimum) loses only them, and grows back elsewhere.
    const Workload* w = state.workload(a.workload);
    const int left = static_cast<int>(a.pods.size() - a.leaving.size() - here.size());
    if (w != nullptr && left >= std::max(1, w->min_pods)) {
      out.push_back(ShrinkEdit{a.workload, std::move(here), WorkloadId(), now + options_.default_grace});
      continue;
    }
    NoticeEdit notice;
    notice.workload = a.workload;
    notice.cause = PreemptCause::kDrain;
    notice.grace_deadline = now + options_.default_grace;
    notice.lost_gpu_seconds = LostGpuSeconds(w, a, now, options_.default_grace);
    notice.requeue = true;
    out.push_back(std::move(notice));
  }
}

void Lifecycle::ArmMaxRuntime(const Workload& w, const Allocation& a) {
  if (w.kind != WorkloadKind::kDebug || w.debug.max_runtime <= Duration::zero()) return;
  Arm(a.start_time + w.debug.max_runtime - options_.default_grace, TimerKind::kMaxRuntime, w.id,
      a.start_time);
}

void Lifecycle::ArmExisting(const State& state) {
  for (const Allocation& a : state.snapshot().allocations) {
    if (a.terminating && a.grace_deadline != kInfiniteFuture) {
      Arm(a.grace_deadline + options_.exit_report_slack, TimerKind::kGrace, a.workload, a.grace_deadline);
    }
    const Time leaving = state.leaving_deadline(a.workload);
    if (!a.leaving.empty() && leaving != kInfiniteFuture) {
      Arm(leaving + options_.exit_report_slack, TimerKind::kLeaving, a.workload, leaving);
    }
    if (const Workload* w = state.workload(a.workload); w != nullptr && !a.terminating) {
      ArmMaxRuntime(*w, a);
      ArmIdle(*w, state.idle_reclaim_at(a.workload));
    }
  }
  for (size_t n = 0; n < state.snapshot().cluster.nodes.size(); ++n) {
    const NodeId node(static_cast<uint32_t>(n));
    ArmLease(node, state.lease_until(node));
  }
  for (const PendingScaleUp& su : state.extras().scale_ups) ArmScaleUp(su, state.now());
}

void Lifecycle::Observe(const Edit& edit, const State& state) {
  if (const auto* notice = std::get_if<NoticeEdit>(&edit)) {
    if (notice->grace_deadline != kInfiniteFuture) {
      Arm(notice->grace_deadline + options_.exit_report_slack, TimerKind::kGrace, notice->workload,
          notice->grace_deadline);
    }
  } else if (const auto* shrink = std::get_if<ShrinkEdit>(&edit)) {
    const Time deadline = state.leaving_deadline(shrink->workload);
    if (deadline != kInfiniteFuture) {
      Arm(deadline + options_.exit_report_slack, TimerKind::kLeaving, shrink->workload, deadline);
    }
  } else if (const auto* place = std::get_if<PlaceEdit>(&edit)) {
    const Workload* w = state.workload(place->workload);
    const Allocation* a = state.allocation(place->workload);
    if (w != nullptr && a != nullptr) ArmMaxRuntime(*w, *a);
  } else if (const auto* lease = std::get_if<LeaseEdit>(&edit)) {
    ArmLease(lease->node, lease->until);
  } else if (const auto* fault = std::get_if<GpuFaultEdit>(&edit)) {
    Arm(state.now(), TimerKind::kDrain, WorkloadId(), state.now(), fault->node);
  } else if (const auto* idle = std::get_if<IdleEdit>(&edit)) {
    if (const Workload* w = state.workload(idle->workload)) ArmIdle(*w, idle->reclaim_at);
  } else if (const auto* target = std::get_if<SetTargetEdit>(&edit)) {
    // One opened now (its timeout; raised twice in this instant, a stale
    // duplicate is dropped at Tick), or any made ready by a target lowered
    // to what is ready (now).
    for (const PendingScaleUp& su : state.open_scale_ups(target->workload)) {
      if (su.requested_at == state.now() || su.ready_at == state.now()) ArmScaleUp(su, state.now());
    }
  } else if (const auto* ready = std::get_if<ReplicaReadyEdit>(&edit)) {
    for (const PendingScaleUp& su : state.open_scale_ups(ready->workload)) {
      if (su.ready_at == state.now()) ArmScaleUp(su, state.now());
    }
  }
}

std::vector<Edit> Lifecycle::Tick(const State& state, Time now) {
  std::vector<Edit> out;
  while (!timers_.empty() && timers_.top().at <= now) {
    const Timer t = timers_.top();
    timers_.pop();
    if (t.kind == TimerKind::kLease) {
      // Renewed since (a newer lease), or already not ready: nothing to do.
      if (state.lease_until(t.node) != t.armed_for ||
          state.snapshot().cluster.node(t.node).health == Health::kNotReady) {
        continue;
      }
      NodeLost(state, t.node, out);
      continue;
    }
    if (t.kind == TimerKind::kDrain) {
      // An operator uncordoned it meanwhile: the fault was handled.
      if (state.snapshot().cluster.node(t.node).cordoned) Drain(state, t.node, now, out);
      continue;
    }
    if (t.kind == TimerKind::kScaleUp) {
      // Ended since: stale.
      const PendingScaleUp* su = state.scale_up(t.workload, t.armed_for);
      if (su == nullptr) continue;
      const Time deadline = su->requested_at + options_.scale_up_timeout;
      ScaleUpEndEdit e{t.workload, ScaleUpResult::kReady, su->from, su->to, su->requested_at, su->ready_at};
      if (su->ready_at != kInfiniteFuture) {
        if (su->ready_at > deadline) e.result = ScaleUpResult::kTimedOut;
      } else if (now >= deadline) {
        e.result = ScaleUpResult::kTimedOut;
      } else {
        continue;  // not ready, not due: a timer from before a restore
      }
      // Armed twice for one instant (opened, then raised), it ends once:
      // the machine refuses the repeat (StateMachine::Tick).
      out.push_back(e);
      continue;
    }
    const Allocation* a = state.allocation(t.workload);
    if (a == nullptr) continue;  // exited, requeued or released meanwhile
    switch (t.kind) {
      case TimerKind::kGrace: {
        const StopNotice* stop = state.stop(t.workload);
        if (!a->terminating || stop == nullptr || a->grace_deadline != t.armed_for) break;
        if (stop->requeue) {
          out.push_back(RequeueEdit{t.workload, EndCause::kGraceExpired});
        } else {
          out.push_back(ReleaseEdit{t.workload, WorkloadState::kCancelled, EndCause::kGraceExpired});
        }
        break;
      }
      case TimerKind::kLeaving: {
        if (a->terminating || state.leaving_deadline(t.workload) != t.armed_for) break;
        for (const PodPlacement& p : a->leaving) out.push_back(PodExitEdit{t.workload, p});
        break;
      }
      case TimerKind::kMaxRuntime: {
        const Workload* w = state.workload(t.workload);
        if (w == nullptr || a->terminating || a->start_time != t.armed_for) break;
        const Time stop_at = a->start_time + w->debug.max_runtime;
        NoticeEdit n;
        n.workload = t.workload;
        n.cause = PreemptCause::kMaxRuntime;
        // Noticed on time, it ends exactly at its max runtime; noticed late
        // (the clock jumped), it still gets its full grace.
        n.grace_deadline = now < stop_at ? stop_at : now + options_.default_grace;
        n.lost_gpu_seconds = LostGpuSeconds(w, *a, now, n.grace_deadline - now);
        n.requeue = false;
        out.push_back(std::move(n));
        break;
      }
      case TimerKind::kIdle: {
        const Workload* w = state.workload(t.workload);
        // Busy again, or idle again since (a newer reclaim time): stale.
        if (w == nullptr || a->terminating || state.idle_reclaim_at(t.workload) != t.armed_for) break;
        NoticeEdit n;
        n.workload = t.workload;
        n.cause = PreemptCause::kIdle;
        n.grace_deadline = now + options_.default_grace;
        n.lost_gpu_seconds = LostGpuSeconds(w, *a, now, options_.default_grace);
        n.requeue = false;
        out.push_back(std::move(n));
        break;
      }
      case TimerKind::kLease:
      case TimerKind::kScaleUp:
      case TimerKind::kDrain:
        break;  // handled above
    }
  }
  return out;
}

}  // namespace tidal::state
