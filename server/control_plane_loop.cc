// The scheduling pass: leases and grace deadlines, then co-location and the
// engine on a copy of the state, then their decisions applied and journaled.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/colocation/batch_admission.h"
#include "core/priority/priority_deriver.h"
#include "server/control_plane.h"
#include "server/workload_codec.h"

namespace tidal::server {

using nlohmann::json;

namespace {

json PodsJson(const std::vector<PodPlacement>& pods, const Catalog& cat) {
  json out = json::array();
  for (const PodPlacement& p : pods) {
    out.push_back({{"node", cat.cluster.nodes[p.node.value()].name}, {"gpus", MaskToIndices(p.gpus)}});
  }
  return out;
}

int PodsGpus(const std::vector<PodPlacement>& pods) {
  int n = 0;
  for (const PodPlacement& p : pods) n += std::popcount(p.gpus);
  return n;
}

}  // namespace

Snapshot ControlPlane::BuildSnapshot(Time now) const {
  Snapshot s;
  s.now = now;
  s.cluster = config_.catalog.cluster;
  s.queues = config_.catalog.queues;
  s.projects = config_.catalog.projects;
  s.workloads.reserve(active_.size());
  for (uint64_t id : active_) {
    const WorkloadRecord& r = records_.at(id);
    s.workloads.push_back(r.w);
    if (r.allocation) s.allocations.push_back(*r.allocation);
  }
  s.lent_nodes = lent_nodes_;
  return s;
}

// The budget layer of a derived priority goes stale as the queue fills and
// the project spends: re-derive each pass, but only where an input moved
// (the budget state, or the clock for deadline bonuses), and audit only a
// changed value. A pass costs O(active) cheap checks.
void ControlPlane::RefreshPriorities(Time now, Mutation& m) {
  const int64_t now_ms = ToMillis(now);
  std::vector<double> used_s = project_closed_gpu_s_;
  used_s.resize(config_.catalog.projects.size(), 0);
  for (uint64_t id : allocated_) {
    const WorkloadRecord& r = records_.at(id);
    for (const RunInterval& run : r.runs) {
      if (run.end_ms == 0 && r.w.project.value() < used_s.size()) {
        used_s[r.w.project.value()] += std::max<int64_t>(0, now_ms - run.start_ms) / 1000.0 * run.gpus;
      }
    }
  }
  // Spent = what the config says was spent before + what ran here.
  std::vector<char> over_budget(used_s.size(), 0);
  for (size_t i = 0; i < used_s.size(); ++i) {
    Project& p = config_.catalog.projects[i];
    p.used_gpu_hours = (i < project_base_used_h_.size() ? project_base_used_h_[i] : 0) + used_s[i] / 3600.0;
    over_budget[i] = p.budget_gpu_hours > 0 && p.used_gpu_hours >= p.budget_gpu_hours;
  }
  // Budget states move only with queue usage and budgets running out; when
  // neither moved, only changed records and deadline bonuses need a look.
  const bool inputs_moved = queue_used_gpus_ != refreshed_queue_used_ || over_budget != refreshed_over_budget_;
  refreshed_queue_used_ = queue_used_gpus_;
  refreshed_over_budget_ = std::move(over_budget);
  std::vector<uint64_t> ids;
  if (inputs_moved) {
    ids.assign(active_.begin(), active_.end());
  } else {
    std::set_union(dirty_.begin(), dirty_.end(), timed_.begin(), timed_.end(), std::back_inserter(ids));
  }
  for (uint64_t id : ids) {
    WorkloadRecord* rp = Find(id);
    if (!rp || !rp->active()) continue;
    WorkloadRecord& r = *rp;
    Workload& w = r.w;
    if (w.state == WorkloadState::kAwaitingApproval || w.state == WorkloadState::kTerminating) continue;
    const Project& project = config_.catalog.project(w.project);
    const int requested = r.allocation ? 0 : w.min_gpus();
    const BudgetState budget =
        ComputeBudgetState(project, config_.catalog.queue(w.queue), QueueUsedGpus(w.queue), requested);
    const bool timed = w.batch.deadline != kInfiniteFuture;
    if (r.derived_budget == budget && !timed) continue;
    auto derived = [&] {
      if (!r.approved) return DerivePriority(config_.policy.templates, w, project, budget, now);
      Project approved = project;
      approved.top_tier_approved = true;
      return DerivePriority(config_.policy.templates, w, approved, budget, now);
    }();
    if (!derived.ok() || derived->awaiting_approval) continue;
    r.derived_budget = budget;
    if (derived->value == w.priority.value && derived->preemptibility == w.priority.preemptibility) {
      continue;
    }
    const int previous = w.priority.value;
    w.priority = *std::move(derived);
    AddAudit(m, "scheduler", "priority", &r,
             {{"value", w.priority.value},
              {"previous_value", previous},
              {"template", w.priority.template_name},
              {"derivation", w.priority.derivation},
              {"awaiting_approval", false}},
             now);
    Persist(m, r);
  }
}

void ControlPlane::SyncSnapshot(Time now) {
  snap_.now = now;
  if (cluster_dirty_) {
    snap_.cluster = config_.catalog.cluster;
    // Lets the engine keep its node classes while the nodes stay the same.
    snap_.cluster_version = ++cluster_version_;
    cluster_dirty_ = false;
  }
  snap_.queues = config_.catalog.queues;
  snap_.projects = config_.catalog.projects;
  snap_.lent_nodes = lent_nodes_;
  bool removed = false;
  for (uint64_t id : dirty_) {
    auto slot = snap_index_.find(id);
    const WorkloadRecord* r = Find(id);
    if (!r || !r->active()) {
      if (slot != snap_index_.end()) {
        snap_.workloads[slot->second].id = WorkloadId();  // compacted below
        snap_index_.erase(slot);
        removed = true;
      }
      continue;
    }
    if (slot != snap_index_.end()) {
      snap_.workloads[slot->second] = r->w;
    } else {
      // Ids only grow, so appending keeps the workloads in id order.
      snap_index_[id] = snap_.workloads.size();
      snap_.workloads.push_back(r->w);
    }
  }
  if (removed) {
    std::erase_if(snap_.workloads, [](const Workload& w) { return !w.id.valid(); });
    snap_index_.clear();
    for (size_t i = 0; i < snap_.workloads.size(); ++i) snap_index_[snap_.workloads[i].id.value()] = i;
  }
  // Allocations are few (one per running workload): rebuilt when any changed.
  bool allocations_changed = removed;
  for (auto it = dirty_.begin(); it != dirty_.end() && !allocations_changed; ++it) {
    const WorkloadRecord* r = Find(*it);
    allocations_changed = (r && r->allocation) || snap_allocated_.count(*it) != 0;
  }
  if (allocations_changed) {
    snap_.allocations.clear();
    snap_allocated_.clear();
    for (const Workload& w : snap_.workloads) {
      const WorkloadRecord& r = records_.at(w.id.value());
      if (!r.allocation) continue;
      snap_.allocations.push_back(*r.allocation);
      snap_allocated_.insert(w.id.value());
    }
  }
  dirty_.clear();
}

void ControlPlane::MarkNodeLost(NodeId n, Time now, Mutation& m) {
  Node& node = config_.catalog.cluster.nodes[n.value()];
  NodeRuntime& rt = node_rt_[n.value()];
  rt.lost = true;
  node.health = Health::kFailed;
  cluster_dirty_ = true;
  metrics_.Inc("tidal_nodes_lost_total", {});
  PersistNode(n, m);
  std::vector<uint64_t> victims(node_workloads_[n.value()].begin(), node_workloads_[n.value()].end());
  AddAudit(m, "scheduler", "node_lost", nullptr,
           {{"node", node.name}, {"last_heartbeat_ms", rt.last_heartbeat_ms}, {"victims", victims}}, now);
  for (uint64_t id : victims) {
    WorkloadRecord* r = Find(id);
    if (!r || !r->allocation) continue;
    const auto& pods = r->allocation->pods;
    const auto& leaving = r->allocation->leaving;
    const bool only_leaving = std::all_of(pods.begin(), pods.end(), [&](const PodPlacement& p) {
      return p.node != n || std::find(leaving.begin(), leaving.end(), p) != leaving.end();
    });
    if (only_leaving && !r->stop) {
      // Only pods a shrink was removing were there: they are gone early.
      IndexAllocation(*r, false);
      for (int rank = static_cast<int>(pods.size()) - 1; rank >= 0; --rank) {
        if (pods[rank].node == n) RemoveRank(*r, rank);
      }
      if (leaving.empty()) r->shrink_notice.reset();
      IndexAllocation(*r, true);
      Persist(m, *r);
      continue;
    }
    // The pods are gone with the node: the whole gang restarts elsewhere.
    const bool cancel = r->stop && !r->stop->requeue;
    Release(*r, cancel ? WorkloadState::kCancelled : WorkloadState::kPending, "node_lost", now, m,
            "scheduler");
  }
}

void ControlPlane::ExpireAndReap(Time now, Mutation& m) {
  const int64_t now_ms = ToMillis(now);
  for (size_t i = 0; i < node_rt_.size(); ++i) {
    NodeRuntime& rt = node_rt_[i];
    if (rt.registered && !rt.lost &&
        now_ms - rt.last_heartbeat_ms > config_.node_lease.count()) {
      MarkNodeLost(NodeId(i), now, m);
    }
  }
  // Victims past their grace deadline are gone: the agent SIGKILLs them then.
  // Only workloads holding GPUs can have any of the deadlines below.
  std::vector<uint64_t> ids(allocated_.begin(), allocated_.end());
  for (uint64_t id : ids) {
    WorkloadRecord& r = records_.at(id);
    if (r.stop && r.allocation && now_ms >= r.stop->grace_deadline_ms + 1000) {
      Release(r, r.stop->requeue ? WorkloadState::kPending : WorkloadState::kCancelled,
              "grace_expired", now, m, "scheduler");
    } else if (r.shrink_notice && now_ms >= r.shrink_notice->grace_deadline_ms + 1000) {
      DropLeaving(r);
      Persist(m, r);
    }
    // A scale-up that has not reached capacity in time failed: the same
    // bound the simulator scores by.
    if (!r.scale_ups.empty()) {
      ScaleUp& su = r.scale_ups.back();
      if (su.ready_ms == 0 && !su.failed &&
          now_ms - su.requested_ms > config_.policy.colocation.scale_up_timeout.count()) {
        su.failed = true;
        metrics_.Inc("tidal_scale_ups_total", {{"result", "failed"}});
        AddAudit(m, "autoscaler", "scale_up_failed", &r,
                 {{"from", su.from_pods}, {"to", su.to_pods}, {"requested_ms", su.requested_ms}}, now);
        Persist(m, r);
      }
    }
    // Debug sessions idle past the limit are reclaimed.
    if (r.w.kind == WorkloadKind::kDebug && r.allocation && !r.stop && r.utilization >= 0 &&
        r.utilization < config_.idle_utilization && r.pod_started_ms > 0 &&
        now_ms - r.pod_started_ms > config_.debug_idle_limit.count()) {
      GiveNotice(r, "idle", now, now + config_.policy.preemption.default_grace);
      metrics_.Inc("tidal_preemptions_total", {{"cause", "idle"}, {"kind", "debug"}});
      AddAudit(m, "scheduler", "preempt", &r,
               {{"cause", "idle"}, {"utilization", r.utilization}, {"lost_gpu_seconds", 0}}, now);
      Persist(m, r);
    }
  }
}

void ControlPlane::RunPass() {
  std::lock_guard pass_lock(pass_mu_);
  const auto started = std::chrono::steady_clock::now();
  Snapshot& snap = snap_;
  Time now;
  uint64_t seq = 0;
  std::vector<std::tuple<WorkloadId, Time, double>> load;
  {
    std::lock_guard lock(mu_);
    if (!ready_) return;
    // A failed store cannot persist decisions, so the pass changes nothing:
    // memory must not run ahead of what a restart would recover.
    if (!Writable().ok()) return;
    now = clock_.Now();
    Mutation m;
    ExpireAndReap(now, m);
    RefreshPriorities(now, m);
    SyncSnapshot(now);
    load.swap(observed_load_);
    seq = Enqueue(std::move(m));
  }
  for (const auto& [id, t, rps] : load) colocation_.ObserveLoad(id, t, rps);
  // Co-location's plan is committed first, then the engine runs on the
  // snapshot that shows it (new targets and loans, victims terminating,
  // shrunk pods leaving), as the simulator's StateMachine::ApplyPlan does.
  ColocationPlan plan = colocation_.Prepare(snap);
  // Debug sessions get notice one grace before their max runtime (the
  // simulator's Lifecycle owns this timer; the server calls the same rule).
  for (PreemptDecision& stop : DebugMaxRuntimeStops(snap, config_.policy.preemption.default_grace)) {
    const bool noticed = std::any_of(plan.decisions.preempts.begin(), plan.decisions.preempts.end(),
                                     [&](const PreemptDecision& p) { return p.victim == stop.victim; });
    if (!noticed) plan.decisions.preempts.push_back(std::move(stop));
  }
  {
    std::lock_guard lock(mu_);
    if (!Writable().ok()) return;  // failed while co-location ran
    Mutation m;
    const ColocationStatus& cs = colocation_.status();
    for (NodeId n : cs.newly_lent) {
      AddAudit(m, "colocation", "loan", nullptr,
               {{"node", config_.catalog.cluster.nodes[n.value()].name}, {"mode", ColocationModeName(cs.mode)}}, now);
    }
    for (NodeId n : cs.returned) {
      AddAudit(m, "colocation", "return", nullptr,
               {{"node", config_.catalog.cluster.nodes[n.value()].name}, {"mode", ColocationModeName(cs.mode)}}, now);
    }
    lent_nodes_ = plan.lent_nodes;
    // Autoscaled targets flow into the records.
    for (const auto& [id, pods] : plan.targets) {
      WorkloadRecord* r = Find(id.value());
      if (!r || r->w.pods == pods || !r->active()) continue;
      const int current = r->allocation ? static_cast<int>(r->allocation->pods.size()) : 0;
      if (pods > r->w.pods && r->allocation) {
        bool open = !r->scale_ups.empty() && r->scale_ups.back().ready_ms == 0 && !r->scale_ups.back().failed;
        if (!open) r->scale_ups.push_back({ToMillis(now), current, pods, 0, 0, 0, false});
        else r->scale_ups.back().to_pods = std::max(r->scale_ups.back().to_pods, pods);
      }
      AddAudit(m, "autoscaler", "scale", r, {{"from", r->w.pods}, {"to", pods}}, now);
      r->w.pods = pods;
      Persist(m, *r);
    }
    ApplyDecisions(plan.decisions, snap, now, m);
    SyncSnapshot(now);
    seq = Enqueue(std::move(m));
  }
  Decisions eng = scheduler_.Schedule(snap);
  {
    std::lock_guard lock(mu_);
    if (!Writable().ok()) return;  // failed while the engine ran
    Mutation m;
    ApplyDecisions(eng, snap, now, m);
    seq = Enqueue(std::move(m));
    last_pass_ms_ = ToMillis(now);
  }
  // No reply waits on a pass, but a failed write is the store's sticky
  // error (logged by the store, shown as tidal_store_healthy 0); the next
  // pass sees it and applies nothing.
  if (Status durable = store_->WaitDurable(seq); !durable.ok()) return;
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.Observe("tidal_scheduling_pass_seconds", {}, took);
  std::lock_guard lock(mu_);
  last_pass_s_ = took;
}

void ControlPlane::ApplyDecisions(const Decisions& d, const Snapshot& snap, Time now, Mutation& m) {
  const Catalog& cat = config_.catalog;
  (void)snap;
  for (const PreemptDecision& p : d.preempts) {
    WorkloadRecord* v = Find(p.victim.value());
    if (!v || !v->allocation || v->stop) continue;
    const std::string cause(PreemptCauseName(p.cause));
    GiveNotice(*v, cause, now, p.grace_deadline);
    PreemptionRecord rec;
    rec.time_ms = ToMillis(now);
    rec.audit_seq = next_audit_seq_;
    rec.cause = cause;
    rec.preemptor = p.preemptor.value();
    rec.lost_gpu_seconds = p.lost_gpu_seconds;
    v->preemptions.push_back(rec);
    const bool reclaim = p.cause == PreemptCause::kReclaim || p.cause == PreemptCause::kInferenceReturn;
    json detail = {{"cause", cause},
                   {"preemptor", p.preemptor.value()},
                   {"victims", json::array({p.victim.value()})},
                   {"pods", PodsJson(v->allocation->pods, cat)},
                   {"lost_gpu_seconds", p.lost_gpu_seconds},
                   {"grace_deadline_ms", ToMillis(p.grace_deadline)},
                   {"reason", p.detail}};
    if (WorkloadRecord* by = Find(p.preemptor.value())) {
      // An inference scale-up that waits on victims: the grace is its cost.
      if (by->w.kind == WorkloadKind::kInference && !by->scale_ups.empty() &&
          by->scale_ups.back().ready_ms == 0 && !by->scale_ups.back().failed) {
        by->scale_ups.back().victims_grace_s =
            std::max(by->scale_ups.back().victims_grace_s, ToSeconds(p.grace_deadline - now));
      }
      detail["preemptor_tenant"] = by->w.tenant;
      detail["preemptor_project"] = cat.ProjectName(by->w.project);
      detail["preemptor_priority"] = by->w.priority.value;
    }
    AddAudit(m, "scheduler", reclaim ? "reclaim" : "preempt", v, detail, now);
    metrics_.Inc("tidal_preemptions_total", {{"cause", cause}, {"kind", std::string(WorkloadKindName(v->w.kind))}});
    if (reclaim) metrics_.Inc("tidal_reclaims_total", {{"queue", cat.QueueName(v->w.queue)}, {"cause", cause}});
    Persist(m, *v);
  }
  for (const ResizeDecision& rz : d.resizes) {
    WorkloadRecord* r = Find(rz.workload.value());
    if (!r || !r->allocation || r->stop) continue;
    IndexAllocation(*r, false);
    auto& pods = r->allocation->pods;
    auto& leaving = r->allocation->leaving;
    // Removed pods stay in `pods` (and on their GPUs) as `leaving` until
    // they exit or the grace deadline passes, as the engine expects.
    bool removed_any = false;
    for (const PodPlacement& gone : rz.removed) {
      if (std::find(pods.begin(), pods.end(), gone) == pods.end()) continue;
      if (std::find(leaving.begin(), leaving.end(), gone) != leaving.end()) continue;
      leaving.push_back(gone);
      removed_any = true;
    }
    if (removed_any) {
      const int64_t deadline_ms = ToMillis(rz.grace_deadline);
      r->shrink_notice = StopNotice{"shrink", ToMillis(now),
                                    r->shrink_notice ? std::max(r->shrink_notice->grace_deadline_ms, deadline_ms)
                                                     : deadline_ms,
                                    true};
    }
    bool fits = true;
    for (const PodPlacement& add : rz.added) {
      if (add.node.value() >= cat.cluster.nodes.size() || (UsedGpus(add.node) & add.gpus) != 0) fits = false;
    }
    if (fits) {
      for (const PodPlacement& add : rz.added) pods.push_back(add);
    }
    IndexAllocation(*r, true);
    const int64_t now_ms = ToMillis(now);
    CloseRuns(*r, now_ms, "resized");
    r->runs.push_back({now_ms, 0, r->allocation->gpu_count(), r->allocation->borrowed, "",
                       pods.empty() ? "" : cat.cluster.nodes[pods[0].node.value()].gpu_model});
    const int staying = static_cast<int>(pods.size() - leaving.size());
    if (!r->scale_ups.empty() && r->scale_ups.back().placed_ms == 0 &&
        staying >= r->scale_ups.back().to_pods) {
      r->scale_ups.back().placed_ms = now_ms;
    }
    AddAudit(m, "scheduler", "resize", r,
             {{"from_pods", rz.from_pods}, {"to_pods", rz.to_pods},
              {"added", PodsJson(fits ? rz.added : std::vector<PodPlacement>{}, cat)},
              {"removed", PodsJson(rz.removed, cat)},
              {"beneficiary", rz.beneficiary.value()},
              {"reason", rz.detail}},
             now);
    Persist(m, *r);
  }
  for (const PlaceDecision& pl : d.places) {
    WorkloadRecord* r = Find(pl.workload.value());
    if (!r || r->allocation || r->w.state != WorkloadState::kPending || pl.pods.empty()) continue;
    bool ok = true;
    for (const PodPlacement& p : pl.pods) {
      if (p.node.value() >= cat.cluster.nodes.size() ||
          cat.cluster.nodes[p.node.value()].health == Health::kFailed ||
          (UsedGpus(p.node) & p.gpus) != 0) {
        ok = false;
      }
    }
    if (!ok) continue;  // the world moved since the snapshot; next pass decides again
    Allocation a;
    a.workload = r->w.id;
    a.pods = pl.pods;
    a.start_time = now;
    a.last_checkpoint = now;
    a.borrowed = pl.borrowed;
    r->allocation = a;
    r->w.state = WorkloadState::kRunning;
    r->last_wait.reset();
    r->exited_ranks.clear();
    r->ready_ranks.clear();
    r->pod_started_ms = 0;
    ++r->attempt;
    const int64_t now_ms = ToMillis(now);
    if (r->first_start_ms == 0) r->first_start_ms = now_ms;
    r->runs.push_back({now_ms, 0, a.gpu_count(), a.borrowed, "",
                       cat.cluster.nodes[a.pods[0].node.value()].gpu_model});
    IndexAllocation(*r, true);
    const double wait_s = std::max<double>(0, ToSeconds(now - r->w.submit_time));
    metrics_.Observe("tidal_queue_wait_seconds",
                     {{"queue", cat.QueueName(r->w.queue)}, {"kind", std::string(WorkloadKindName(r->w.kind))}},
                     wait_s);
    metrics_.Inc("tidal_placements_total",
                 {{"queue", cat.QueueName(r->w.queue)},
                  {"kind", std::string(WorkloadKindName(r->w.kind))},
                  {"borrowed", pl.borrowed ? "true" : "false"}});
    json detail = {{"pods", PodsJson(pl.pods, cat)}, {"borrowed", pl.borrowed}, {"attempt", r->attempt},
                   {"gpus", PodsGpus(pl.pods)}, {"wait_s", wait_s},
                   {"priority", r->w.priority.value}};
    AddAudit(m, "scheduler", "place", r, detail, now);
    if (!r->preemptions.empty() && r->preemptions.back().recovery_s < 0) {
      PreemptionRecord& pr = r->preemptions.back();
      pr.recovery_s = (now_ms - pr.time_ms) / 1000.0;
      metrics_.Observe("tidal_recovery_seconds", {}, pr.recovery_s);
      AddAudit(m, "scheduler", "recovery", r,
               {{"preemption_seq", pr.audit_seq}, {"recovery_s", pr.recovery_s}, {"cause", pr.cause}},
               now);
    }
    Persist(m, *r);
  }
  for (const WaitDecision& w : d.waits) {
    WorkloadRecord* r = Find(w.workload.value());
    if (r && r->active()) r->last_wait = w;  // memory only: explanations, not history
  }
  for (const RejectDecision& rj : d.rejects) {
    WorkloadRecord* r = Find(rj.workload.value());
    if (!r || r->allocation || !r->active()) continue;
    r->rejected = rj;
    AddAudit(m, "scheduler", "reject", r,
             {{"reason", ReasonCodeName(rj.reason)}, {"detail", rj.detail}}, now);
    Release(*r, WorkloadState::kFailed, "rejected", now, m, "scheduler");
  }
}

}  // namespace tidal::server
