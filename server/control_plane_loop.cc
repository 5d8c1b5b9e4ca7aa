// The scheduling pass: leases and grace deadlines, then co-location and the
// engine on a copy of the state, then their decisions applied and journaled.
#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "core/colocation/batch_admission.h"
#include "core/priority/priority_deriver.h"
#include "protocol/journal_record.h"
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

// Why a run ended, for its history: a timer's typed cause, else the reason
// the request applying the edit gave, else the cause of the notice that
// stopped it (`stop`, when it counts), else `fallback`.
std::string EndReason(state::EndCause cause, const std::string& applying_reason, const StopNotice* stop,
                      std::string_view fallback) {
  if (cause != state::EndCause::kReported) return std::string(state::EndCauseName(cause));
  if (!applying_reason.empty()) return applying_reason;
  if (stop != nullptr) return stop->cause;
  return std::string(fallback);
}

}  // namespace

Snapshot ControlPlane::RecoveredSnapshot(Time now) const {
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
  return s;
}

void ControlPlane::ReactNodeLost(NodeId n, Time now) {
  const Node& node = config_.catalog.cluster.nodes[n.value()];
  NodeRuntime& rt = node_rt_[n.value()];
  rt.lost = true;
  metrics_.Inc("tidal_nodes_lost_total", {});
  // The lifecycle's requeues of the node's work follow this edit, so the
  // index still lists its victims.
  std::vector<uint64_t> victims(node_workloads_[n.value()].begin(), node_workloads_[n.value()].end());
  AddAudit(*applying_.m, "scheduler", "node_lost", nullptr,
           {{"node", node.name}, {"last_heartbeat_ms", rt.last_heartbeat_ms}, {"victims", victims}}, now);
}

void ControlPlane::EvictPods(NodeId n) {
  std::vector<uint64_t> victims(node_workloads_[n.value()].begin(), node_workloads_[n.value()].end());
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
      std::vector<PodPlacement> gone;
      for (const PodPlacement& p : pods) {
        if (p.node == n) gone.push_back(p);
      }
      for (const PodPlacement& p : gone) (void)ApplyEdit(state::PodExitEdit{r->w.id, p});
      continue;
    }
    // The pods are gone with the node: the whole gang restarts elsewhere.
    EndStopped(*r);
  }
}

void ControlPlane::EndStopped(WorkloadRecord& r) {
  const bool cancel = r.stop && !r.stop->requeue;
  if (cancel) {
    (void)ApplyEdit(state::ReleaseEdit{r.w.id, WorkloadState::kCancelled});
  } else {
    (void)ApplyEdit(state::RequeueEdit{r.w.id});
  }
}

void ControlPlane::RenewLeases(Time now) {
  for (size_t i = 0; i < node_rt_.size(); ++i) {
    const NodeRuntime& rt = node_rt_[i];
    const NodeId n(static_cast<uint32_t>(i));
    if (!rt.registered || rt.lost) continue;
    // Not due yet: the applied lease still holds, whatever came since.
    if (machine_->state().lease_until(n) >= now) continue;
    const Time until = TimeFromMillis(rt.last_heartbeat_ms) + config_.node_lease;
    // No heartbeat within a lease: the lifecycle declares the node lost.
    if (until < now) continue;
    (void)ApplyEdit(state::LeaseEdit{n, until});
  }
}

void ControlPlane::ReportUtilization(WorkloadRecord& r, Time now) {
  if (r.w.kind != WorkloadKind::kDebug || !r.allocation || r.stop || r.utilization < 0) return;
  const bool idle = r.utilization < config_.idle_utilization;
  const bool was_idle = machine_->state().idle_reclaim_at(r.w.id) != kInfiniteFuture;
  if (idle == was_idle) return;
  (void)ApplyEdit(state::IdleEdit{r.w.id, idle ? now + config_.debug_idle_limit : kInfiniteFuture});
}

// The lifecycle judged a scale-up: the record, the metrics and the audit
// show that one judgment (the simulator's summary reads the same edit).
void ControlPlane::ReactScaleUpEnd(WorkloadRecord& r, const state::ScaleUpEndEdit& e, Time now) {
  const int64_t requested_ms = ToMillis(e.requested_at);
  ScaleUp* su = nullptr;
  for (ScaleUp& s : r.scale_ups) {
    if (s.requested_ms == requested_ms) su = &s;
  }
  if (su == nullptr) {
    r.scale_ups.push_back({requested_ms, e.from, e.to, 0, 0, 0, false});
    su = &r.scale_ups.back();
  }
  su->to_pods = e.to;
  // Where its time went (core/diagnosis), as the simulator counts it.
  const diagnosis::ScaleUpDiagnosis why = slo_diag_.TakeScaleUp(machine_->state(), e);
  su->cause = std::string(diagnosis::MissCauseName(why.cause));
  su->detail = why.detail;
  su->slow = why.slow;
  if (why.slow) metrics_.Inc("tidal_slow_scale_ups_total", {{"cause", su->cause}});
  if (e.result == state::ScaleUpResult::kReady) {
    su->ready_ms = ToMillis(e.ready_at);
    if (su->placed_ms == 0) su->placed_ms = su->ready_ms;
    metrics_.Inc("tidal_scale_ups_total", {{"result", "ok"}});
    metrics_.Observe("tidal_scale_up_time_to_capacity_seconds", {}, ToSeconds(e.ready_at - e.requested_at));
  } else {
    su->failed = true;
    metrics_.Inc("tidal_scale_ups_total", {{"result", "failed"}});
    AddAudit(*applying_.m, "autoscaler", "scale_up_failed", &r,
             {{"from", e.from},
              {"to", e.to},
              {"requested_ms", requested_ms},
              {"result", std::string(state::ScaleUpResultName(e.result))},
              {"cause", su->cause},
              {"detail", su->detail}},
             now);
  }
  MarkChanged(r);
}

void ControlPlane::JournalMarker(protocol::PassPhase phase) {
  journal_.push_back(protocol::JournalRecordToText(protocol::PassMarker{machine_->state().now(), phase}));
}

void ControlPlane::RunPass() {
  std::lock_guard pass_lock(pass_mu_);
  const auto started = std::chrono::steady_clock::now();
  uint64_t seq = 0;
  {
    // The pass runs on the machine's live snapshot, under the state lock: a
    // copy of 50,000 workloads would cost more than the engine itself, and
    // nothing changes between the snapshot a step reads and the apply.
    std::lock_guard lock(mu_);
    if (!ready_) return;
    // A failed store cannot persist decisions, so the pass changes nothing:
    // memory must not run ahead of what a restart would recover.
    if (!Writable().ok()) return;
    const Time now = clock_.Now();
    machine_->AdvanceTo(now);
    Mutation m;
    {
      ApplyScope scope(*this, m, "scheduler");
      // The lifecycle's inputs first (world edits, before the tick marker),
      // then its timers: grace deadlines, leaving pods, max runtime, node
      // leases, idle debug sessions, scale-ups ready or timed out.
      RenewLeases(now);
      JournalMarker(protocol::PassPhase::kTick);
      machine_->Tick();
      // A derivation fails only for a stored workload that the policy no
      // longer covers (a template removed before a restart): it keeps the
      // priority it has, and the others are refreshed.
      (void)machine_->RefreshPriorities();
    }
    for (const auto& [id, t, rps] : observed_load_) {
      journal_.push_back(protocol::JournalRecordToText(protocol::LoadSample{t, id, rps}));
      colocation_.ObserveLoad(id, t, rps);
    }
    observed_load_.clear();
    // Co-location's plan is committed first, then the engine runs on the
    // state that shows it (new targets and loans, victims terminating,
    // shrunk pods leaving), as in the simulator.
    {
      ApplyScope scope(*this, m, "colocation");
      JournalMarker(protocol::PassPhase::kPlanSnapshot);
      const ColocationPlan plan = colocation_.Prepare(machine_->state().snapshot());
      applying_.decisions = &plan.decisions;
      JournalMarker(protocol::PassPhase::kPlanApply);
      machine_->ApplyPlan(plan);
    }
    {
      ApplyScope scope(*this, m, "scheduler");
      JournalMarker(protocol::PassPhase::kEngineSnapshot);
      Decisions decisions = scheduler_.Schedule(machine_->state().snapshot());
      JournalMarker(protocol::PassPhase::kEngineApply);
      ApplyDecisions(std::move(decisions));
    }
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

void ControlPlane::ApplyDecisions(Decisions d) {
  applying_.decisions = &d;
  const state::ApplyOutcome out = machine_->ApplyDecisions(d);
  // A refused decision: the world moved since the snapshot (a cancel, an
  // exit); the next pass decides again.
  for (const state::RefusedDecision& no : out.refused) {
    metrics_.Inc("tidal_refused_decisions_total", {{"kind", std::string(no.kind)}});
  }
  applying_.decisions = nullptr;
  // Explanations, not history: kept in memory as the engine gave them, and
  // indexed only when read (LastWait). Thousands of waits per pass over a
  // deep backlog would otherwise cost a record lookup each under the lock.
  // The long-wait diagnosis charges each training wait to the engine's
  // reason (core/diagnosis/wait_diagnosis.h); a tally ends at placement.
  const Time now = machine_->state().now();
  for (const WaitDecision& w : d.waits) {
    const Workload* wl = machine_->state().workload(w.workload);
    if (wl == nullptr || wl->kind != WorkloadKind::kTraining) continue;
    wait_tallies_[w.workload.value()].Explain(now, w.reason);
  }
  last_waits_ = std::move(d.waits);
  last_waits_indexed_ = false;
}

// ---- the record side of each applied edit ----

void ControlPlane::SyncRecord(WorkloadRecord& r) {
  IndexAllocation(r, false);
  // The pods before this edit, whose ranks the ones that stay keep (moved
  // out: the record takes the state's allocation anew below).
  std::vector<PodPlacement> before;
  if (KeepsRanks(r.w.kind) && r.allocation) before = std::move(r.allocation->pods);
  if (const Workload* w = machine_->state().workload(r.w.id)) {
    r.w = *w;
    const Allocation* a = machine_->state().allocation(r.w.id);
    r.allocation = a ? std::optional<Allocation>(*a) : std::nullopt;
  } else {
    r.allocation.reset();
  }
  if (KeepsRanks(r.w.kind) && r.allocation) {
    r.pod_ranks = RankPods(before, r.pod_ranks, r.allocation->pods, &r.next_rank);
  } else {
    r.pod_ranks.clear();
    r.next_rank = 0;
  }
  IndexAllocation(r, true);
  MarkChanged(r);
}

void ControlPlane::OnApplied(Time at, state::EditOrigin origin, const state::Edit& edit) {
  journal_.push_back(protocol::JournalEntryText(at, origin, edit));
  slo_diag_.Observe(machine_->state(), edit);
  React(origin, edit);
}

void ControlPlane::React(state::EditOrigin origin, const state::Edit& edit) {
  const Time now = machine_->state().now();
  const Catalog& cat = config_.catalog;
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, state::LendEdit> || std::is_same_v<E, state::ReturnEdit>) {
          constexpr bool lend = std::is_same_v<E, state::LendEdit>;
          CountLoan(e.node, lend, now);
          AddAudit(*applying_.m, "colocation", lend ? "loan" : "return", nullptr,
                   {{"node", cat.cluster.nodes[e.node.value()].name},
                    {"mode", ColocationModeName(colocation_.status().mode)}},
                   now);
        } else if constexpr (std::is_same_v<E, state::RegisterNodeEdit>) {
          ReactNode(e.node.id);
        } else if constexpr (std::is_same_v<E, state::NodeHealthEdit>) {
          // The lifecycle makes a node not ready only when its lease ran out.
          if (origin == state::EditOrigin::kLifecycle && e.health == Health::kNotReady) ReactNodeLost(e.node, now);
          ReactNode(e.node);
        } else if constexpr (std::is_same_v<E, state::GpuFaultEdit> || std::is_same_v<E, state::CordonEdit>) {
          ReactNode(e.node);
        } else if constexpr (std::is_same_v<E, state::LeaseEdit>) {
          // Memory has the heartbeat already; the edit is the lifecycle's input.
        } else if constexpr (std::is_same_v<E, state::SubmitEdit>) {
          // The record exists already (Submit makes it, then the edit).
        } else {
          WorkloadRecord* r = Find(e.workload.value());
          if (r == nullptr) return;
          if constexpr (std::is_same_v<E, state::PlaceEdit>) {
            ReactPlace(*r, e);
          } else if constexpr (std::is_same_v<E, state::NoticeEdit>) {
            ReactNotice(*r, origin, e);
          } else if constexpr (std::is_same_v<E, state::GrowEdit> || std::is_same_v<E, state::ShrinkEdit>) {
            // The lifecycle shrinks only to drain a faulty node.
            if constexpr (std::is_same_v<E, state::ShrinkEdit>) {
              if (origin == state::EditOrigin::kLifecycle) {
                AddAudit(*applying_.m, "scheduler", "resize", r,
                         {{"from_pods", r->allocation->pods.size()},
                          {"to_pods", r->allocation->pods.size() - r->allocation->leaving.size()},
                          {"removed", PodsJson(e.pods, cat)},
                          {"reason", "drain: a GPU of the node failed"}},
                         now);
              }
            }
            ReactResize(*r, edit);
          } else if constexpr (std::is_same_v<E, state::PodExitEdit>) {
            auto& pods = r->allocation->pods;
            const size_t pod = std::find(pods.begin(), pods.end(), e.pod) - pods.begin();
            if (machine_->state().allocation(e.workload) == nullptr) {
              // Its last pod: the workload waits again.
              ReleaseView(*r, WorkloadState::kPending, "replica_exited", now);
            } else {
              if (pod < pods.size()) RemovePod(*r, pod);
              if (r->allocation->leaving.empty()) r->shrink_notice.reset();
            }
            SyncRecord(*r);
          } else if constexpr (std::is_same_v<E, state::RequeueEdit>) {
            const bool cancel_after = r->stop && !r->stop->requeue;
            ReleaseView(*r, WorkloadState::kPending,
                        EndReason(e.cause, applying_.reason, r->stop ? &*r->stop : nullptr, "requeued"), now);
            SyncRecord(*r);
            // Cancelled during its notice (the machine's notice still said
            // requeue): it ends now instead of waiting again.
            if (cancel_after) (void)ApplyEdit(state::ReleaseEdit{e.workload, WorkloadState::kCancelled});
          } else if constexpr (std::is_same_v<E, state::ReleaseEdit>) {
            // A failed end that no cause or request explains is a rejection,
            // whatever notice the workload had.
            const bool rejected = e.final_state == WorkloadState::kFailed;
            std::string reason = EndReason(e.cause, applying_.reason, rejected || !r->stop ? nullptr : &*r->stop,
                                           rejected ? "rejected" : WorkloadStateName(e.final_state));
            if (origin == state::EditOrigin::kEngine && applying_.decisions != nullptr) {
              for (const RejectDecision& rj : applying_.decisions->rejects) {
                if (rj.workload != e.workload) continue;
                r->rejected = rj;
                AddAudit(*applying_.m, "scheduler", "reject", r,
                         {{"reason", ReasonCodeName(rj.reason)}, {"detail", rj.detail}}, now);
              }
            }
            ReleaseView(*r, e.final_state, std::move(reason), now);
            wait_tallies_.erase(e.workload.value());
            SyncRecord(*r);
          } else if constexpr (std::is_same_v<E, state::SetTargetEdit>) {
            if (origin == state::EditOrigin::kColocation) {
              AddAudit(*applying_.m, "autoscaler", "scale", r,
                       {{"from", r->w.pods}, {"to", e.pods}, {"spares", e.spare_pods}}, now);
            }
            // The state opened a scale-up (or, twice in one instant, raised
            // its goal): the record follows it, for the scale-up diagnosis
            // and reports. It keeps the newest kMaxScaleUpHistory, so a
            // service that runs for months does not grow its record without
            // bound.
            if (const state::PendingScaleUp* su = machine_->state().scale_up(e.workload)) {
              const int64_t requested_ms = ToMillis(su->requested_at);
              if (r->scale_ups.empty() || r->scale_ups.back().requested_ms != requested_ms) {
                r->scale_ups.push_back({requested_ms, su->from, su->to, 0, 0, 0, false});
                if (r->scale_ups.size() > kMaxScaleUpHistory) r->scale_ups.erase(r->scale_ups.begin());
              } else {
                r->scale_ups.back().to_pods = su->to;
              }
            }
            SyncRecord(*r);
          } else if constexpr (std::is_same_v<E, state::ScaleUpEndEdit>) {
            ReactScaleUpEnd(*r, e, now);
          } else if constexpr (std::is_same_v<E, state::ReplicaReadyEdit>) {
            // The lifecycle's input; the record's ready ranks came with the event.
          } else if constexpr (std::is_same_v<E, state::IdleEdit>) {
            // The lifecycle's input; the records show the utilization itself.
          } else if constexpr (std::is_same_v<E, state::SetPriorityEdit>) {
            const int previous = r->w.priority.value;
            SyncRecord(*r);
            AddAudit(*applying_.m, origin == state::EditOrigin::kPriority ? "scheduler" : applying_.actor,
                     "priority", r,
                     {{"value", r->w.priority.value},
                      {"previous_value", previous},
                      {"template", r->w.priority.template_name},
                      {"derivation", r->w.priority.derivation},
                      {"awaiting_approval", r->w.priority.awaiting_approval}},
                     now);
          } else {
            // Approve, Checkpoint: the machine's copy is the truth.
            SyncRecord(*r);
          }
        }
      },
      edit);
}

void ControlPlane::ReactNode(NodeId n) {
  // The catalog keeps the names the API shows; the machine's node is the
  // truth for health, failed GPUs and cordons.
  Node& node = config_.catalog.cluster.nodes[n.value()];
  const Node& truth = machine_->state().snapshot().cluster.node(n);
  ZeroNodeSeries(node.name);
  node.health = truth.health;
  node.failed_gpus = truth.failed_gpus;
  node.cordoned = truth.cordoned;
  PersistNode(n, *applying_.m);
}

void ControlPlane::ReactPlace(WorkloadRecord& r, const state::PlaceEdit& pl) {
  const Catalog& cat = config_.catalog;
  const Time now = machine_->state().now();
  SyncRecord(r);
  r.exited_ranks.clear();
  r.ready_ranks.clear();
  r.pod_started_ms = 0;
  ++r.attempt;
  const int64_t now_ms = ToMillis(now);
  if (r.first_start_ms == 0) r.first_start_ms = now_ms;
  r.runs.push_back({now_ms, 0, r.allocation->gpu_count(), pl.borrowed, "",
                    cat.cluster.nodes[pl.pods[0].node.value()].gpu_model});
  const double wait_s = std::max<double>(0, (now_ms - r.queued_ms) / 1000.0);
  metrics_.Observe("tidal_queue_wait_seconds",
                   {{"queue", cat.QueueName(r.w.queue)}, {"kind", std::string(WorkloadKindName(r.w.kind))}},
                   wait_s);
  if (r.w.kind == WorkloadKind::kTraining) {
    // A long wait is counted under its cause (core/diagnosis), as the
    // simulator counts it.
    auto tally = wait_tallies_.find(r.w.id.value());
    if (wait_s >= ToSeconds(diagnosis::kLongWait)) {
      diagnosis::WaitTally none;
      diagnosis::WaitTally& t = tally != wait_tallies_.end() ? tally->second : none;
      t.ChargeTo(now);
      const diagnosis::WaitDiagnosis why = diagnosis::DiagnoseWait(
          machine_->state().snapshot(), r.w, t, milliseconds(now_ms - r.queued_ms));
      metrics_.Inc("tidal_long_waits_total", {{"cause", std::string(diagnosis::WaitCauseName(why.cause))}});
    }
    if (tally != wait_tallies_.end()) wait_tallies_.erase(tally);
  }
  metrics_.Inc("tidal_placements_total",
               {{"queue", cat.QueueName(r.w.queue)},
                {"kind", std::string(WorkloadKindName(r.w.kind))},
                {"borrowed", pl.borrowed ? "true" : "false"}});
  json detail = {{"pods", PodsJson(pl.pods, cat)}, {"borrowed", pl.borrowed}, {"attempt", r.attempt},
                 {"gpus", PodsGpus(pl.pods)}, {"wait_s", wait_s},
                 {"priority", r.w.priority.value}};
  AddAudit(*applying_.m, "scheduler", "place", &r, detail, now);
  if (!r.preemptions.empty() && r.preemptions.back().recovery_s < 0) {
    PreemptionRecord& pr = r.preemptions.back();
    pr.recovery_s = (now_ms - pr.time_ms) / 1000.0;
    metrics_.Observe("tidal_recovery_seconds", {}, pr.recovery_s);
    AddAudit(*applying_.m, "scheduler", "recovery", &r,
             {{"preemption_seq", pr.audit_seq}, {"recovery_s", pr.recovery_s}, {"cause", pr.cause}},
             now);
  }
  MarkChanged(r);
}

void ControlPlane::ReactNotice(WorkloadRecord& r, state::EditOrigin origin, const state::NoticeEdit& n) {
  const Catalog& cat = config_.catalog;
  const Time now = machine_->state().now();
  const std::string cause(PreemptCauseName(n.cause));
  r.stop = StopNotice{cause, ToMillis(now), ToMillis(n.grace_deadline), n.requeue};
  SyncRecord(r);
  if (n.cause == PreemptCause::kCancel) return;  // the cancel is audited by its request
  PreemptionRecord rec;
  rec.time_ms = ToMillis(now);
  rec.audit_seq = next_audit_seq_;
  rec.cause = cause;
  rec.preemptor = n.preemptor.value();
  rec.lost_gpu_seconds = n.lost_gpu_seconds;
  r.preemptions.push_back(rec);
  const bool reclaim = n.cause == PreemptCause::kReclaim || n.cause == PreemptCause::kInferenceReturn;
  json detail = {{"cause", cause},
                 {"preemptor", n.preemptor.value()},
                 {"victims", json::array({r.w.id.value()})},
                 {"pods", PodsJson(r.allocation->pods, cat)},
                 {"lost_gpu_seconds", n.lost_gpu_seconds},
                 {"grace_deadline_ms", ToMillis(n.grace_deadline)}};
  if (applying_.decisions != nullptr &&
      (origin == state::EditOrigin::kEngine || origin == state::EditOrigin::kColocation)) {
    for (const PreemptDecision& p : applying_.decisions->preempts) {
      if (p.victim == n.workload) detail["reason"] = p.detail;
    }
  }
  if (n.cause == PreemptCause::kIdle) detail["utilization"] = r.utilization;
  if (WorkloadRecord* by = n.preemptor.valid() ? Find(n.preemptor.value()) : nullptr) {
    // An inference scale-up that waits on victims: the grace is its cost.
    if (by->w.kind == WorkloadKind::kInference && !by->scale_ups.empty() &&
        by->scale_ups.back().ready_ms == 0 && !by->scale_ups.back().failed) {
      by->scale_ups.back().victims_grace_s =
          std::max(by->scale_ups.back().victims_grace_s, ToSeconds(n.grace_deadline - now));
    }
    detail["preemptor_tenant"] = by->w.tenant;
    detail["preemptor_project"] = cat.ProjectName(by->w.project);
    detail["preemptor_priority"] = by->w.priority.value;
  }
  AddAudit(*applying_.m, "scheduler", reclaim ? "reclaim" : "preempt", &r, detail, now);
  metrics_.Inc("tidal_preemptions_total", {{"cause", cause}, {"kind", std::string(WorkloadKindName(r.w.kind))}});
  if (reclaim) metrics_.Inc("tidal_reclaims_total", {{"queue", cat.QueueName(r.w.queue)}, {"cause", cause}});
  MarkChanged(r);
}

// A resize decision is a Grow and/or a Shrink: the record follows each, and
// the audit is written once, from the decision.
void ControlPlane::ReactResize(WorkloadRecord& r, const state::Edit& edit) {
  const Catalog& cat = config_.catalog;
  const Time now = machine_->state().now();
  const int64_t now_ms = ToMillis(now);
  if (const auto* shrink = std::get_if<state::ShrinkEdit>(&edit)) {
    const int64_t deadline_ms = ToMillis(shrink->grace_deadline);
    r.shrink_notice = StopNotice{"shrink", now_ms,
                                 r.shrink_notice ? std::max(r.shrink_notice->grace_deadline_ms, deadline_ms)
                                                 : deadline_ms,
                                 true};
  }
  SyncRecord(r);
  CloseRuns(r, now_ms, "resized");
  const auto& pods = r.allocation->pods;
  r.runs.push_back({now_ms, 0, r.allocation->gpu_count(), r.allocation->borrowed, "",
                    pods.empty() ? "" : cat.cluster.nodes[pods[0].node.value()].gpu_model});
  const int staying = static_cast<int>(pods.size() - r.allocation->leaving.size());
  if (!r.scale_ups.empty() && r.scale_ups.back().placed_ms == 0 && staying >= r.scale_ups.back().to_pods) {
    r.scale_ups.back().placed_ms = now_ms;
  }
  if (applying_.decisions != nullptr && applying_.resized.insert(r.w.id.value()).second) {
    for (const ResizeDecision& rz : applying_.decisions->resizes) {
      if (rz.workload != r.w.id) continue;
      AddAudit(*applying_.m, "scheduler", "resize", &r,
               {{"from_pods", rz.from_pods}, {"to_pods", rz.to_pods},
                {"added", PodsJson(rz.added, cat)},
                {"removed", PodsJson(rz.removed, cat)},
                {"beneficiary", rz.beneficiary.value()},
                {"reason", rz.detail}},
               now);
    }
  }
  MarkChanged(r);
}

}  // namespace tidal::server
