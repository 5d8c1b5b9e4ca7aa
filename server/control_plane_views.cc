// Read-only views: explain, dry run, queues, nodes, audit and /metrics.
#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "core/colocation/loan_calendar.h"
#include "core/state/state_machine.h"
#include "protocol/loan_calendar.h"
#include "server/control_plane.h"
#include "server/workload_codec.h"

namespace tidal::server {

using nlohmann::json;

namespace {

struct QueueUsage {
  int allocated = 0;
  int borrowed = 0;
  int lent = 0;
  int pending = 0;
  int running = 0;
};

}  // namespace

// Usage per queue. Lent GPUs: the borrowed total is attributed to queues
// with idle guarantee (within their lending limit), in queue order; the
// engine does not record which lender a loan came from.
static std::vector<QueueUsage> ComputeQueueUsage(const Catalog& cat,
                                                 const std::map<uint64_t, WorkloadRecord>& records,
                                                 const std::set<uint64_t>& active) {
  std::vector<QueueUsage> u(cat.queues.size());
  int borrowed_total = 0;
  for (uint64_t id : active) {
    const WorkloadRecord& r = records.at(id);
    if (!r.w.queue.valid() || r.w.queue.value() >= u.size()) continue;
    QueueUsage& q = u[r.w.queue.value()];
    if (r.allocation) {
      const int g = r.allocation->gpu_count();
      q.allocated += g;
      ++q.running;
      if (r.allocation->borrowed) {
        q.borrowed += g;
        borrowed_total += g;
      }
    } else {
      ++q.pending;
    }
  }
  for (size_t i = 0; i < cat.queues.size() && borrowed_total > 0; ++i) {
    const Queue& q = cat.queues[i];
    int idle = std::max(0, q.guaranteed_gpus - u[i].allocated);
    if (q.lending_limit_gpus != kUnlimited) idle = std::min(idle, q.lending_limit_gpus);
    const int lent = std::min(idle, borrowed_total);
    u[i].lent = lent;
    borrowed_total -= lent;
  }
  return u;
}

StatusOr<json> ControlPlane::Explain(const Principal& who, uint64_t id) const {
  json out;
  {
    std::lock_guard lock(mu_);
    const WorkloadRecord* r = Find(id);
    if (!r) return NotFound(fmt::format("workload {} not found", id));
    TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, r->w.tenant));
    const Catalog& cat = config_.catalog;
    out["id"] = id;
    out["name"] = r->w.name;
    out["state"] = WorkloadStateName(r->w.state);
    out["priority"] = PriorityToJson(r->w.priority);
    if (r->w.state == WorkloadState::kAwaitingApproval) {
      out["reason"] = "awaiting_approval";
      out["detail"] = fmt::format("tier \"{}\" of project \"{}\" needs an admin's approval "
                                  "(POST /v1/workloads/{}/approve)",
                                  cat.project(r->w.project).tier, cat.ProjectName(r->w.project), id);
      out["estimated_start_ms"] = nullptr;
    } else if (const WaitDecision* wait = LastWait(*r)) {
      json w = WaitToJson(*wait);
      out["reason"] = w["reason"];
      out["detail"] = w["detail"];
      out["estimated_start_ms"] = w["estimated_start_ms"];
    } else if (r->rejected) {
      out["reason"] = ReasonCodeName(r->rejected->reason);
      out["detail"] = r->rejected->detail;
      out["estimated_start_ms"] = nullptr;
    } else if (r->allocation) {
      out["reason"] = r->stop ? "terminating" : "running";
      out["detail"] = r->stop ? fmt::format("stopping ({}), grace until {}", r->stop->cause, r->stop->grace_deadline_ms)
                              : fmt::format("running on {} GPUs since {}", r->allocation->gpu_count(),
                                            ToMillis(r->allocation->start_time));
      out["estimated_start_ms"] = ToMillis(r->allocation->start_time);
    } else if (r->w.state == WorkloadState::kPending) {
      out["reason"] = "not_yet_scheduled";
      out["detail"] = "no scheduling pass has looked at it yet";
      out["estimated_start_ms"] = nullptr;
    } else {
      // Finished: what ended it, in the words a tenant asking "where did my
      // session go" needs. When its end closed a run, the run's end reason,
      // or the cause of the preemption that ended that run (however the
      // victim then left: its own exit, or killed at the grace deadline).
      // Ended while waiting (cancelled after a requeue, or never run): its
      // state.
      std::string how(WorkloadStateName(r->w.state));
      if (!r->runs.empty() && r->runs.back().end_ms >= r->finish_time_ms && !r->runs.back().end_reason.empty()) {
        how = r->runs.back().end_reason;
        if (!r->preemptions.empty() && r->preemptions.back().time_ms >= r->runs.back().start_ms) {
          how = r->preemptions.back().cause;
        }
      }
      std::string ended = fmt::format("ended ({})", how);
      if (how == PreemptCauseName(PreemptCause::kIdle)) {
        ended = fmt::format("ended by idle debug reclaim: its GPUs stayed below {:.0f}% busy for {:.0f} s",
                            config_.idle_utilization * 100, ToSeconds(config_.debug_idle_limit));
      } else if (how == PreemptCauseName(PreemptCause::kMaxRuntime)) {
        ended = fmt::format("ended at its max runtime ({:.0f} s)", ToSeconds(r->w.debug.max_runtime));
      }
      out["reason"] = WorkloadStateName(r->w.state);
      out["detail"] = r->finish_time_ms > 0 ? fmt::format("{} at {}", ended, r->finish_time_ms) : ended;
      out["estimated_start_ms"] = nullptr;
    }
    const auto usage = ComputeQueueUsage(cat, records_, active_);
    const Queue& q = cat.queue(r->w.queue);
    const QueueUsage& qu = usage[r->w.queue.value()];
    out["queue"] = {{"name", q.name},
                    {"guaranteed_gpus", q.guaranteed_gpus},
                    {"allocated_gpus", qu.allocated},
                    {"borrowing_limit_gpus", q.borrowing_limit_gpus},
                    {"borrowed_gpus", qu.borrowed},
                    {"requested_gpus", r->w.min_gpus()}};
    out["preemptions"] = RecordToJson(*r, cat, /*wait=*/nullptr)["preemptions"];
    // Diagnosis (core/diagnosis), of this workload only: why a training
    // job waits so far, and why a service missed its SLO.
    if (r->w.kind == WorkloadKind::kTraining && r->w.state == WorkloadState::kPending && machine_) {
      auto tally = wait_tallies_.find(id);
      diagnosis::WaitTally t = tally != wait_tallies_.end() ? tally->second : diagnosis::WaitTally();
      const Time now = clock_.Now();
      t.ChargeTo(now);
      const diagnosis::WaitDiagnosis why =
          diagnosis::DiagnoseWait(machine_->state().snapshot(), r->w, t, milliseconds(ToMillis(now) - r->queued_ms));
      out["wait_cause"] = {{"cause", diagnosis::WaitCauseName(why.cause)},
                           {"waited_s", why.waited_s},
                           {"long", why.waited_s >= ToSeconds(diagnosis::kLongWait)},
                           {"detail", why.detail}};
    }
    if (r->w.kind == WorkloadKind::kInference) {
      json missed = json::object();
      for (diagnosis::MissCause c : diagnosis::AllMissCauses()) {
        const double s = r->slo_miss_s_by_cause[static_cast<int>(c)];
        if (s > 0) missed[std::string(diagnosis::MissCauseName(c))] = s;
      }
      json slo = {{"miss_s_by_cause", missed}, {"last_miss", nullptr}};
      if (r->last_miss) {
        slo["last_miss"] = {{"time_ms", r->last_miss_ms},
                            {"cause", diagnosis::MissCauseName(r->last_miss->cause)},
                            {"needed", r->last_miss->needed},
                            {"ready", r->last_miss->ready},
                            {"target", r->last_miss->target},
                            {"detail", r->last_miss->detail}};
      }
      out["slo"] = std::move(slo);
    }
  }
  AuditQuery q;
  q.workload = id;
  q.limit = 200;
  TIDAL_ASSIGN_OR_RETURN(std::vector<AuditRow> rows, store_->QueryAudit(q));
  out["history"] = json::array();
  for (const AuditRow& row : rows) {
    out["history"].push_back({{"seq", row.seq}, {"time_ms", row.time_ms}, {"actor", row.actor},
                              {"action", row.action}, {"detail", json::parse(row.detail_json, nullptr, false)}});
  }
  return out;
}

StatusOr<json> ControlPlane::DryRun(const Principal& who, const json& body) const {
  std::optional<state::State> copy;
  WorkloadRecord probe;
  // The co-location controller keeps state between passes (loans, load
  // history): the dry run prepares its snapshot with a copy, so the answer
  // matches what a real pass would decide, and the real one is untouched.
  std::optional<ColocationController> colocation;
  {
    std::lock_guard pass_lock(pass_mu_);
    std::lock_guard lock(mu_);
    colocation.emplace(colocation_);
    const Time now = clock_.Now();
    TIDAL_ASSIGN_OR_RETURN(Admitted a, Admit(who, body, now, /*check_feasible=*/false));
    // What a submit would refuse can never start: the answer is "never",
    // which is what a dry run is asked for (`tidal dry-run` exits 3).
    if (Status feasible = CheckFeasible(a.record.w); !feasible.ok()) {
      const std::string& msg = feasible.message();
      return json{{"would_start", false},
                  {"reason", msg.starts_with("gpu_models") || msg.starts_with("node_selector") ? "constraints" : "capacity"},
                  {"detail", "rejected: " + msg},
                  {"field", msg.substr(0, msg.find(':'))},
                  {"estimated_start_ms", nullptr},
                  {"placement", json::array()},
                  {"preempts", json::array()},
                  {"priority", PriorityToJson(a.record.w.priority)},
                  {"state", "rejected"}};
    }
    probe = std::move(a.record);
    probe.w.id = WorkloadId(next_id_ + (uint64_t{1} << 40));  // never a real id
    copy.emplace(machine_->state());
    copy->set_observer(nullptr);
    copy->AdvanceTo(now);
  }
  json out = {{"priority", PriorityToJson(probe.w.priority)},
              {"state", WorkloadStateName(probe.w.state)}};
  if (probe.w.state == WorkloadState::kAwaitingApproval) {
    out["would_start"] = false;
    out["reason"] = "awaiting_approval";
    out["detail"] = "its tier needs an admin's approval first";
    out["estimated_start_ms"] = nullptr;
    return out;
  }
  // A pass on a copy of the state changes nothing real: co-location's plan
  // is committed to the copy, as a real pass commits it, then the engine runs.
  state::StateMachine machine(*std::move(copy),
                              state::ServerLifecycleOptions(config_.policy));
  TIDAL_RETURN_IF_ERROR(machine.Apply(state::SubmitEdit{probe.w}));
  (void)machine.ApplyPlan(colocation->Prepare(machine.state().snapshot()));
  const Decisions d = scheduler_.Schedule(machine.state().snapshot());
  out["would_start"] = false;
  out["reason"] = nullptr;
  out["detail"] = nullptr;
  out["estimated_start_ms"] = nullptr;
  out["placement"] = json::array();
  out["preempts"] = json::array();
  std::lock_guard lock(mu_);
  for (const PlaceDecision& p : d.places) {
    if (p.workload != probe.w.id) continue;
    out["would_start"] = true;
    out["borrowed"] = p.borrowed;
    for (const PodPlacement& pod : p.pods) {
      out["placement"].push_back({{"node", config_.catalog.cluster.nodes[pod.node.value()].name},
                                  {"gpus", MaskToIndices(pod.gpus)}});
    }
  }
  for (const PreemptDecision& p : d.preempts) {
    if (p.preemptor != probe.w.id) continue;
    out["preempts"].push_back({{"victim", p.victim.value()}, {"cause", PreemptCauseName(p.cause)},
                               {"lost_gpu_seconds", p.lost_gpu_seconds}, {"detail", p.detail}});
  }
  for (const WaitDecision& w : d.waits) {
    if (w.workload != probe.w.id) continue;
    json j = WaitToJson(w);
    out["reason"] = j["reason"];
    out["detail"] = j["detail"];
    out["estimated_start_ms"] = j["estimated_start_ms"];
  }
  for (const RejectDecision& rj : d.rejects) {
    if (rj.workload != probe.w.id) continue;
    out["reason"] = ReasonCodeName(rj.reason);
    out["detail"] = "rejected: " + rj.detail;
  }
  return out;
}

StatusOr<json> ControlPlane::Queues(const Principal& who) const {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kUser, Role::kAdmin}));
  std::lock_guard lock(mu_);
  const Catalog& cat = config_.catalog;
  const auto usage = ComputeQueueUsage(cat, records_, active_);
  json out = json::array();
  for (size_t i = 0; i < cat.queues.size(); ++i) {
    const Queue& q = cat.queues[i];
    json pools = json::array();
    for (PoolId p : q.pools) pools.push_back(cat.cluster.pools[p.value()].name);
    out.push_back({{"name", q.name},
                   {"parent", cat.QueueName(q.parent)},
                   {"guaranteed_gpus", q.guaranteed_gpus},
                   {"lending_limit_gpus", q.lending_limit_gpus},
                   {"borrowing_limit_gpus", q.borrowing_limit_gpus},
                   {"weight", q.weight},
                   {"pools", pools},
                   {"allocated_gpus", usage[i].allocated},
                   {"borrowed_gpus", usage[i].borrowed},
                   {"lent_gpus", usage[i].lent},
                   {"pending", usage[i].pending},
                   {"running", usage[i].running}});
  }
  return json{{"queues", out}};
}

json ControlPlane::NodeToJsonLocked(NodeId n) const {
  const Catalog& cat = config_.catalog;
  const Node& node = cat.cluster.nodes[n.value()];
  const NodeRuntime& rt = node_rt_[n.value()];
  json gpus = json::array();
  for (int g = 0; g < node.gpu_count; ++g) {
    json used_by = nullptr;
    for (uint64_t wid : node_workloads_[n.value()]) {
      const WorkloadRecord* r = Find(wid);
      if (!r) continue;
      auto holds = [&](const std::vector<PodPlacement>& pods) {
        for (const PodPlacement& p : pods) {
          if (p.node == n && (p.gpus >> g) & 1) return true;
        }
        return false;
      };
      if (r->allocation && holds(r->allocation->pods)) used_by = wid;
    }
    gpus.push_back({{"index", g},
                    {"used_by", used_by},
                    {"failed", ((node.failed_gpus >> g) & 1) != 0},
                    {"utilization", g < static_cast<int>(rt.gpu_utilization.size()) && rt.gpu_utilization[g] >= 0
                                        ? json(rt.gpu_utilization[g]) : json(nullptr)},
                    {"memory_used_gib", g < static_cast<int>(rt.gpu_memory_used_gib.size()) ? rt.gpu_memory_used_gib[g] : 0.0}});
  }
  const std::string_view health = HealthName(node.health);
  json labels = node.labels;
  return {{"name", node.name},
          {"pool", cat.cluster.pools[node.pool.value()].name},
          {"rack", node.rack.valid() && node.rack.value() < cat.cluster.racks.size() ? cat.cluster.racks[node.rack.value()].name : ""},
          {"zone", node.zone.valid() && node.zone.value() < cat.cluster.zones.size() ? cat.cluster.zones[node.zone.value()].name : ""},
          {"gpu_model", node.gpu_model},
          {"gpu_count", node.gpu_count},
          {"gpu_memory_gib", node.gpu_memory_gib},
          {"health", health},
          {"cordoned", node.cordoned},
          {"lent", IsLent(n)},
          {"registered", rt.registered},
          {"lost", rt.lost},
          {"last_heartbeat_ms", rt.last_heartbeat_ms},
          {"free_gpus", std::popcount(node.all_gpus() & ~UsedGpus(n) & ~node.failed_gpus)},
          {"failed_gpus", MaskToIndices(node.failed_gpus)},
          {"labels", labels},
          {"gpus", gpus}};
}

StatusOr<json> ControlPlane::Nodes(const Principal& who) const {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kUser, Role::kAdmin}));
  std::lock_guard lock(mu_);
  json out = json::array();
  for (size_t i = 0; i < config_.catalog.cluster.nodes.size(); ++i) out.push_back(NodeToJsonLocked(NodeId(i)));
  return json{{"nodes", out}};
}

StatusOr<json> ControlPlane::Loans(const Principal& who, const LoanCalendarOptions& options) const {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kUser, Role::kAdmin}));
  // The controller and the snapshot are copied (pass_mu_ first, as RunPass
  // takes them) and the packing runs on the copies with no lock held: a
  // week of 5-minute slots must not hold up the scheduling pass or the API.
  std::optional<ColocationController> controller;
  Snapshot snapshot;
  Time now;
  {
    std::lock_guard pass_lock(pass_mu_);
    std::lock_guard lock(mu_);
    if (!ready_) return Unavailable("the server is recovering its state");
    now = clock_.Now();
    controller.emplace(colocation_);
    snapshot = machine_->state().snapshot();
  }
  // Slots start on whole multiples of the slot length, so calendars asked
  // for a minute apart line up.
  const int64_t slot_ms = options.slot.count();
  const Time from = TimeFromMillis(ToMillis(now) / slot_ms * slot_ms);
  LoanCalendar calendar = PlanLoanCalendar(*controller, snapshot, from, options);
  if (who.role == Role::kUser) {
    std::erase_if(calendar.services, [&](const ServiceLoadPlan& s) {
      const auto it = std::find_if(snapshot.workloads.begin(), snapshot.workloads.end(),
                                   [&](const Workload& w) { return w.id == s.service; });
      return it == snapshot.workloads.end() || it->tenant != who.tenant;
    });
  }
  return protocol::LoanCalendarToJson(calendar);
}

StatusOr<json> ControlPlane::Audit(const Principal& who, AuditQuery query) const {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kUser, Role::kAdmin}));
  if (who.role == Role::kUser) {
    if (!query.tenant.empty() && query.tenant != who.tenant) {
      TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, query.tenant));
    }
    query.tenant = who.tenant;
  }
  // Every row queued before this request (a refusal just answered, say) is
  // in the reply: wait for the store to have it.
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    seq = last_seq_;
  }
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  TIDAL_ASSIGN_OR_RETURN(std::vector<AuditRow> rows, store_->QueryAudit(query));
  json out = json::array();
  for (const AuditRow& row : rows) {
    json detail = json::parse(row.detail_json, nullptr, false);
    json j = {{"seq", row.seq}, {"time_ms", row.time_ms}, {"actor", row.actor},
              {"action", row.action}, {"workload", row.workload}, {"tenant", row.tenant},
              {"project", row.project}, {"detail", detail}};
    if (detail.is_object()) {
      for (const char* k : {"reason", "victims", "lost_gpu_seconds", "recovery_s", "cause"}) {
        if (detail.contains(k)) j[k] = detail[k];
      }
    }
    out.push_back(std::move(j));
  }
  // Audit rows are append-only, so a preemption's row cannot be updated when
  // the victim exits or runs again: the reply joins what is known since
  // (the `preempt_exit` and `recovery` rows carry the same figures).
  std::lock_guard lock(mu_);
  for (json& j : out) {
    if (j["action"] != "preempt" && j["action"] != "reclaim") continue;
    const WorkloadRecord* r = Find(j["workload"].get<uint64_t>());
    if (!r) continue;
    for (const PreemptionRecord& p : r->preemptions) {
      if (p.audit_seq != j["seq"].get<int64_t>()) continue;
      j["recovery_s"] = p.recovery_s;
      j["outcome"] = {{"agent_notice_time_ms", p.agent_notice_ms},
                      {"exit_time_ms", p.exit_ms},
                      {"killed_at_deadline", p.killed_at_deadline},
                      {"checkpointed_in_time", p.checkpointed_in_time},
                      {"recovery_s", p.recovery_s}};
    }
  }
  return json{{"audit", out}};
}

std::string ControlPlane::MetricsText(int http_connections) const {
  GaugeWriter g;
  if (http_connections >= 0) {
    g.Family("tidal_http_open_connections", "Connections open to the API (idle keep-alive ones included).");
    g.Sample("tidal_http_open_connections", {}, http_connections);
  }
  g.Family("tidal_agent_pod_watches", "Agents' pod watches (long-polls) parked, waiting for a change.");
  g.Sample("tidal_agent_pod_watches", {}, static_cast<double>(pod_watch_.parked()));
  {
    std::lock_guard lock(mu_);
    const Catalog& cat = config_.catalog;
    ZeroKnownSeries();
    const auto usage = ComputeQueueUsage(cat, records_, active_);
    g.Family("tidal_queue_guaranteed_gpus", "GPUs guaranteed to the queue.");
    g.Family("tidal_queue_allocated_gpus", "GPUs the queue's running workloads hold.");
    g.Family("tidal_queue_borrowed_gpus", "GPUs the queue holds beyond its guarantee (borrowed).");
    g.Family("tidal_queue_lent_gpus", "Idle guaranteed GPUs of the queue that others borrow.");
    for (size_t i = 0; i < cat.queues.size(); ++i) {
      const Labels l = {{"queue", cat.queues[i].name}};
      g.Sample("tidal_queue_guaranteed_gpus", l, cat.queues[i].guaranteed_gpus);
      g.Sample("tidal_queue_allocated_gpus", l, usage[i].allocated);
      g.Sample("tidal_queue_borrowed_gpus", l, usage[i].borrowed);
      g.Sample("tidal_queue_lent_gpus", l, usage[i].lent);
    }
    // Pending by dominant reason, queue and kind.
    std::map<Labels, int> pending;
    std::map<Labels, int> states;
    for (uint64_t id : active_) {
      const WorkloadRecord& r = records_.at(id);
      const std::string kind(WorkloadKindName(r.w.kind));
      states[{{"state", std::string(WorkloadStateName(r.w.state))}, {"kind", kind}}]++;
      if (r.allocation) continue;
      std::string reason = r.w.state == WorkloadState::kAwaitingApproval ? "awaiting_approval"
                           : LastWait(r) ? std::string(ReasonCodeName(LastWait(r)->reason))
                                         : "not_yet_scheduled";
      pending[{{"queue", cat.QueueName(r.w.queue)}, {"tenant", r.w.tenant}, {"kind", kind}, {"reason", reason}}]++;
    }
    g.Family("tidal_pending_workloads", "Workloads waiting, by queue, tenant, kind and dominant reason.");
    for (const auto& [l, n] : pending) g.Sample("tidal_pending_workloads", l, n);
    g.Family("tidal_workloads", "Live workloads by state and kind.");
    for (const auto& [l, n] : states) g.Sample("tidal_workloads", l, n);
    // GPUs by project, with its tenant and queue: the dashboard's $tenant.
    g.Family("tidal_project_allocated_gpus", "GPUs the project's running workloads hold, by project, tenant and queue.");
    std::vector<int> project_gpus(cat.projects.size());
    for (uint64_t id : allocated_) {
      const WorkloadRecord& r = records_.at(id);
      if (r.allocation && r.w.project.valid() && r.w.project.value() < project_gpus.size()) {
        project_gpus[r.w.project.value()] += r.allocation->gpu_count();
      }
    }
    for (size_t i = 0; i < cat.projects.size(); ++i) {
      const Project& p = cat.projects[i];
      g.Sample("tidal_project_allocated_gpus",
               {{"project", p.name}, {"tenant", p.tenant}, {"queue", cat.QueueName(p.default_queue)}}, project_gpus[i]);
    }
    // Pool capacity.
    g.Family("tidal_pool_gpus", "GPUs per pool by state (total, allocated, failed, lent).");
    std::vector<int> total(cat.cluster.pools.size()), alloc(cat.cluster.pools.size()),
        failed(cat.cluster.pools.size()), lent(cat.cluster.pools.size());
    g.Family("tidal_node_up", "1 when the node is schedulable (healthy or degraded, not lost).");
    g.Family("tidal_node_failed_gpus", "GPUs of the node marked failed (XID, ECC, unhealthy).");
    g.Family("tidal_node_cordoned", "1 when the node is drained.");
    for (size_t i = 0; i < cat.cluster.nodes.size(); ++i) {
      const Node& n = cat.cluster.nodes[i];
      const size_t p = n.pool.value();
      total[p] += n.gpu_count;
      alloc[p] += std::popcount(UsedGpus(NodeId(i)));
      failed[p] += std::popcount(n.failed_gpus);
      if (IsLent(NodeId(i))) lent[p] += n.gpu_count;
      const Labels l = {{"node", n.name}, {"pool", cat.cluster.pools[p].name}};
      g.Sample("tidal_node_up", l, n.health == Health::kHealthy || n.health == Health::kDegraded ? 1 : 0);
      g.Sample("tidal_node_failed_gpus", l, std::popcount(n.failed_gpus));
      g.Sample("tidal_node_cordoned", l, n.cordoned ? 1 : 0);
    }
    for (size_t p = 0; p < cat.cluster.pools.size(); ++p) {
      const std::string name = cat.cluster.pools[p].name;
      g.Sample("tidal_pool_gpus", {{"pool", name}, {"state", "total"}}, total[p]);
      g.Sample("tidal_pool_gpus", {{"pool", name}, {"state", "allocated"}}, alloc[p]);
      g.Sample("tidal_pool_gpus", {{"pool", name}, {"state", "failed"}}, failed[p]);
      g.Sample("tidal_pool_gpus", {{"pool", name}, {"state", "lent"}}, lent[p]);
    }
    // Inference latency against target. A service that served no requests
    // has no latency: its P95 and P99 are left out, not exported as 0 (a 0
    // would read as "fast" and hide it from the latency panels).
    g.Family("tidal_inference_p95_seconds", "Latest P95 latency the service's replicas reported (absent while idle).");
    g.Family("tidal_inference_p99_seconds", "Latest P99 latency the service's replicas reported (absent while idle).");
    g.Family("tidal_inference_target_p99_seconds", "The service's P99 latency target.");
    g.Family("tidal_inference_replicas",
             "Replicas by state (desired: the demand; spare: predictive's spares on the reserved pool; running, ready).");
    for (uint64_t id : active_) {
      const WorkloadRecord& r = records_.at(id);
      if (r.w.kind != WorkloadKind::kInference) continue;
      const Labels l = {{"workload", r.w.name}, {"queue", cat.QueueName(r.w.queue)}, {"tenant", r.w.tenant}};
      const bool served = r.load_rps > 0;
      g.Sample("tidal_inference_p95_seconds", l, served ? r.p95_ms / 1000.0 : NAN);
      g.Sample("tidal_inference_p99_seconds", l, served ? r.p99_ms / 1000.0 : NAN);
      g.Sample("tidal_inference_target_p99_seconds", l, r.w.inference.target_p99.count() / 1000.0);
      Labels d = l, spare = l, run = l, ready = l;
      d.emplace_back("state", "desired");
      spare.emplace_back("state", "spare");
      run.emplace_back("state", "running");
      ready.emplace_back("state", "ready");
      g.Sample("tidal_inference_replicas", d, r.w.demand_pods());
      g.Sample("tidal_inference_replicas", spare, r.w.spare_pods);
      g.Sample("tidal_inference_replicas", run, r.allocation ? r.allocation->pods.size() : 0);
      g.Sample("tidal_inference_replicas", ready, r.ready_ranks.size());
    }
    g.Family("tidal_store_healthy", "1 while the store writes; 0 after a failed write (read-only until restart).");
    g.Sample("tidal_store_healthy", {}, store_->health().ok() ? 1 : 0);
    // The store keeps these counts; they only grow (since start): counters.
    g.Family("tidal_store_commits_total", "Store transactions committed (group commit).",
             prometheus::MetricType::Counter);
    g.Sample("tidal_store_commits_total", {}, store_->commits());
    g.Family("tidal_store_committed_mutations_total", "Changes committed; divided by commits = group size.",
             prometheus::MetricType::Counter);
    g.Sample("tidal_store_committed_mutations_total", {}, store_->committed_mutations());
    g.Family("tidal_last_pass_timestamp_seconds", "When the last scheduling pass ran.");
    g.Sample("tidal_last_pass_timestamp_seconds", {}, last_pass_ms_ / 1000.0);
    LoanGauges(g, clock_.Now());
  }
  std::vector<prometheus::MetricFamily> families = metrics_.Collect();
  for (prometheus::MetricFamily& f : g.Collect()) families.push_back(std::move(f));
  return RenderFamilies(families);
}

}  // namespace tidal::server
