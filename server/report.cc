#include "server/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "server/control_plane.h"
#include "server/workload_codec.h"

namespace tidal::server {

using nlohmann::json;

double OverlapGpuSeconds(int64_t start_ms, int64_t end_ms, int gpus, int64_t from_ms, int64_t to_ms) {
  const int64_t a = std::max(start_ms, from_ms);
  const int64_t b = std::min(end_ms, to_ms);
  return b > a ? static_cast<double>(b - a) / 1000.0 * gpus : 0.0;
}

namespace {

struct Row {
  std::string tenant, project;
  std::map<std::string, double> gpu_s_by_kind;
  double cost = 0;
  int high_count = 0;
  double high_gpu_s = 0;
  int caused = 0, suffered = 0;
  double lost_gpu_s = 0;
  std::vector<double> recovery_s;
  // How preempted victims stopped (agents' exit reports).
  int stops_checkpointed = 0, stops_killed = 0;
  std::vector<double> stop_s;  // notice to last pod gone
  double borrowed_gpu_s = 0, lent_gpu_s = 0;
  std::vector<double> waits_s;
  int gang_ok = 0, gang_failed = 0;
  std::vector<double> p95, p99;
  int64_t slo_samples = 0, slo_met = 0;
  int scale_ups = 0, scale_ups_ok = 0;
  std::vector<double> time_to_capacity_s;
  std::array<double, diagnosis::kMissCauseCount> slo_miss_s{};
  std::map<std::string, int> slow_scale_ups;  // by cause
};

double Hours(double gpu_s) { return gpu_s / 3600.0; }

// {cause: seconds}, the causes with any (core/diagnosis names).
json SloMissJson(const std::array<double, diagnosis::kMissCauseCount>& s) {
  json out = json::object();
  for (diagnosis::MissCause c : diagnosis::AllMissCauses()) {
    if (s[static_cast<int>(c)] > 0) out[std::string(diagnosis::MissCauseName(c))] = s[static_cast<int>(c)];
  }
  return out;
}

}  // namespace

std::string ReportToCsv(const json& report) {
  std::string out =
      "tenant,project,gpu_hours_training,gpu_hours_inference,gpu_hours_batch_inference,"
      "gpu_hours_debug,cost,high_priority_count,high_priority_gpu_hours,preemptions_caused,"
      "preemptions_suffered,lost_gpu_hours,recovery_p50_s,recovery_p95_s,borrowed_gpu_hours,"
      "lent_gpu_hours,queue_wait_p50_s,queue_wait_p95_s,queue_wait_p99_s,gang_starts_ok,"
      "gang_starts_failed,inference_p95_ms,inference_p99_ms,slo_attainment,scale_ups,"
      "scale_up_success,time_to_capacity_p50_s,stops_checkpointed_in_time,stops_killed_at_deadline,"
      "stop_p95_s\n";
  auto q = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string e = "\"";
    for (char c : s) e += c == '"' ? std::string("\"\"") : std::string(1, c);
    return e + "\"";
  };
  for (const json& r : report.at("rows")) {
    const json& g = r.at("gpu_hours");
    const json& inf = r.at("inference");
    out += fmt::format("{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.2f},{},{:.4f},{},{},{:.4f},{:.1f},{:.1f},{:.4f},{:.4f},{:.1f},{:.1f},{:.1f},{},{},{:.1f},{:.1f},{:.4f},{},{:.4f},{:.1f},{},{},{:.1f}\n",
                       q(r.at("tenant")), q(r.at("project")), g.value("training", 0.0),
                       g.value("inference", 0.0), g.value("batch_inference", 0.0),
                       g.value("debug", 0.0), r.at("cost").get<double>(),
                       r.at("high_priority").at("count").get<int>(),
                       r.at("high_priority").at("gpu_hours").get<double>(),
                       r.at("preemptions_caused").get<int>(), r.at("preemptions_suffered").get<int>(),
                       r.at("lost_gpu_hours").get<double>(), r.at("recovery_s").at("p50").get<double>(),
                       r.at("recovery_s").at("p95").get<double>(), r.at("borrowed_gpu_hours").get<double>(),
                       r.at("lent_gpu_hours").get<double>(), r.at("queue_wait_s").at("p50").get<double>(),
                       r.at("queue_wait_s").at("p95").get<double>(), r.at("queue_wait_s").at("p99").get<double>(),
                       r.at("gang_starts").at("ok").get<int>(), r.at("gang_starts").at("failed").get<int>(),
                       inf.at("p95_ms").get<double>(), inf.at("p99_ms").get<double>(),
                       inf.at("slo_attainment").get<double>(), inf.at("scale_ups").get<int>(),
                       inf.at("scale_up_success").get<double>(), inf.at("time_to_capacity_s").get<double>(),
                       r.at("stops").at("checkpointed_in_time").get<int>(),
                       r.at("stops").at("killed_at_deadline").get<int>(),
                       r.at("stops").at("stop_s").at("p95").get<double>());
  }
  return out;
}

StatusOr<json> ControlPlane::Report(const Principal& who, const ReportQuery& query) const {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kUser, Role::kAdmin}));
  std::string tenant = query.tenant;
  if (who.role == Role::kUser) {
    if (!tenant.empty()) TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, tenant));
    tenant = who.tenant;
  }
  if (query.from_ms > query.to_ms) return InvalidArgument("from_ms: after to_ms");
  // Queue waits come from the audit log's placements.
  AuditQuery aq;
  aq.from_ms = query.from_ms;
  aq.to_ms = query.to_ms;
  aq.tenant = tenant;
  aq.action = "place";
  aq.limit = 1000000;
  TIDAL_ASSIGN_OR_RETURN(std::vector<AuditRow> places, store_->QueryAudit(aq));

  std::lock_guard lock(mu_);
  const Catalog& cat = config_.catalog;
  const int64_t now_ms = ToMillis(clock_.Now());
  const int64_t from = query.from_ms, to = std::min(query.to_ms, now_ms);
  auto in_range = [&](int64_t t) { return t >= from && t <= to; };
  std::map<std::pair<std::string, std::string>, Row> rows;
  auto row_of = [&](const WorkloadRecord& r) -> Row* {
    const std::string project = cat.ProjectName(r.w.project);
    if (!tenant.empty() && r.w.tenant != tenant) return nullptr;
    if (!query.project.empty() && project != query.project) return nullptr;
    Row& row = rows[{r.w.tenant, project}];
    row.tenant = r.w.tenant;
    row.project = project;
    return &row;
  };
  double mean_price = 0;
  for (const auto& [m, p] : config_.gpu_price_per_hour) mean_price += p / config_.gpu_price_per_hour.size();
  // High priority: a class that is never preempted (critical tiers, inference).
  json scale_up_diag = json::array();
  for (const auto& [id, r] : records_) {
    // Preemptions caused count toward the preemptor's row.
    for (const PreemptionRecord& p : r.preemptions) {
      if (!in_range(p.time_ms) || p.preemptor == 0) continue;
      const WorkloadRecord* by = Find(p.preemptor);
      if (!by) continue;
      if (Row* row = row_of(*by)) ++row->caused;
    }
    Row* row = row_of(r);
    if (!row) continue;
    const std::string kind(WorkloadKindName(r.w.kind));
    const bool high = r.w.priority.preemptibility == PreemptibilityClass::kNever;
    double gpu_s = 0;
    for (const RunInterval& run : r.runs) {
      const double s = OverlapGpuSeconds(run.start_ms, run.end_ms ? run.end_ms : now_ms, run.gpus, from, to);
      gpu_s += s;
      row->gpu_s_by_kind[kind] += s;
      if (run.borrowed) row->borrowed_gpu_s += s;
      auto price = config_.gpu_price_per_hour.find(run.gpu_model);
      row->cost += Hours(s) * (price != config_.gpu_price_per_hour.end() ? price->second : mean_price);
      if (r.w.is_gang() && in_range(run.start_ms)) ++row->gang_ok;
    }
    if (high && gpu_s > 0) {
      ++row->high_count;
      row->high_gpu_s += gpu_s;
    }
    row->gang_ok = std::max(0, row->gang_ok - r.gang_start_failures);
    row->gang_failed += r.gang_start_failures;
    for (const PreemptionRecord& p : r.preemptions) {
      if (!in_range(p.time_ms)) continue;
      ++row->suffered;
      row->lost_gpu_s += p.lost_gpu_seconds;
      if (p.recovery_s >= 0) row->recovery_s.push_back(p.recovery_s);
      if (p.exit_ms > 0) {
        row->stops_checkpointed += p.checkpointed_in_time ? 1 : 0;
        row->stops_killed += p.killed_at_deadline ? 1 : 0;
        row->stop_s.push_back(std::max<int64_t>(0, p.exit_ms - p.time_ms) / 1000.0);
      }
    }
    if (r.w.kind == WorkloadKind::kInference) {
      if (r.p95_ms > 0) row->p95.push_back(r.p95_ms);
      if (r.p99_ms > 0) row->p99.push_back(r.p99_ms);
      row->slo_samples += r.slo_samples;
      row->slo_met += r.slo_met;
      for (int c = 0; c < diagnosis::kMissCauseCount; ++c) row->slo_miss_s[c] += r.slo_miss_s_by_cause[c];
      for (const ScaleUp& s : r.scale_ups) {
        if (!in_range(s.requested_ms)) continue;
        ++row->scale_ups;
        // The lifecycle's judgment (ScaleUpEndEdit): ready within the
        // timeout. One still open, or timed out, did not succeed.
        const bool done = s.ready_ms > 0 && !s.failed;
        if (done) {
          ++row->scale_ups_ok;
          row->time_to_capacity_s.push_back((s.ready_ms - s.requested_ms) / 1000.0);
        }
        // Diagnosis (core/diagnosis, judged with the scale-up): its
        // dominant cause and where its time went. One still open has none.
        scale_up_diag.push_back({{"workload", id}, {"name", r.w.name}, {"from", s.from_pods}, {"to", s.to_pods},
                                 {"requested_ms", s.requested_ms}, {"succeeded", done},
                                 {"judged", !s.cause.empty()}, {"slow", s.slow},
                                 {"cause", s.cause.empty() ? "open" : s.cause}, {"detail", s.detail}});
        if (s.slow && !s.cause.empty()) ++row->slow_scale_ups[s.cause];
      }
    }
  }
  for (const AuditRow& a : places) {
    const WorkloadRecord* r = Find(a.workload);
    if (!r) continue;
    Row* row = row_of(*r);
    if (!row) continue;
    json d = json::parse(a.detail_json, nullptr, false);
    if (d.is_object() && d.contains("wait_s")) row->waits_s.push_back(d["wait_s"].get<double>());
  }
  // Lent GPU-hours: all borrowed hours, attributed to lending queues in
  // proportion to what each may lend, then to their projects evenly. The
  // engine does not record which lender a borrowed GPU came from.
  double borrowed_total = 0;
  for (const auto& [id, r] : records_) {
    for (const RunInterval& run : r.runs) {
      if (run.borrowed) borrowed_total += OverlapGpuSeconds(run.start_ms, run.end_ms ? run.end_ms : now_ms, run.gpus, from, to);
    }
  }
  double lend_capacity = 0;
  std::vector<double> may_lend(cat.queues.size());
  for (size_t i = 0; i < cat.queues.size(); ++i) {
    const Queue& q = cat.queues[i];
    may_lend[i] = q.lending_limit_gpus == kUnlimited ? q.guaranteed_gpus : std::min(q.lending_limit_gpus, q.guaranteed_gpus);
    lend_capacity += may_lend[i];
  }
  if (lend_capacity > 0 && borrowed_total > 0) {
    for (size_t i = 0; i < cat.queues.size(); ++i) {
      std::vector<const Project*> ps;
      for (const Project& p : cat.projects) {
        if (p.default_queue == QueueId(i) && (tenant.empty() || p.tenant == tenant) &&
            (query.project.empty() || p.name == query.project)) ps.push_back(&p);
      }
      for (const Project* p : ps) {
        Row& row = rows[{p->tenant, p->name}];
        row.tenant = p->tenant;
        row.project = p->name;
        row.lent_gpu_s += borrowed_total * may_lend[i] / lend_capacity / ps.size();
      }
    }
  }
  json out_rows = json::array();
  for (auto& [key, row] : rows) {
    json g = json::object();
    for (const char* k : {"training", "inference", "batch_inference", "debug"}) g[k] = Hours(row.gpu_s_by_kind[k]);
    out_rows.push_back({
        {"tenant", row.tenant}, {"project", row.project}, {"gpu_hours", g}, {"cost", row.cost},
        {"high_priority", {{"count", row.high_count}, {"gpu_hours", Hours(row.high_gpu_s)}}},
        {"preemptions_caused", row.caused}, {"preemptions_suffered", row.suffered},
        {"lost_gpu_hours", Hours(row.lost_gpu_s)},
        {"recovery_s", {{"p50", Percentile(row.recovery_s, 0.50)}, {"p95", Percentile(row.recovery_s, 0.95)}}},
        {"stops", {{"count", row.stop_s.size()},
                   {"checkpointed_in_time", row.stops_checkpointed},
                   {"killed_at_deadline", row.stops_killed},
                   {"stop_s", {{"p50", Percentile(row.stop_s, 0.50)}, {"p95", Percentile(row.stop_s, 0.95)}}}}},
        {"borrowed_gpu_hours", Hours(row.borrowed_gpu_s)}, {"lent_gpu_hours", Hours(row.lent_gpu_s)},
        {"queue_wait_s", {{"p50", Percentile(row.waits_s, 0.50)}, {"p95", Percentile(row.waits_s, 0.95)},
                          {"p99", Percentile(row.waits_s, 0.99)}, {"count", row.waits_s.size()}}},
        {"gang_starts", {{"ok", row.gang_ok}, {"failed", row.gang_failed}}},
        {"inference", {{"p95_ms", Percentile(row.p95, 0.50)}, {"p99_ms", Percentile(row.p99, 0.50)},
                       {"slo_attainment", row.slo_samples ? static_cast<double>(row.slo_met) / row.slo_samples : 1.0},
                       {"scale_ups", row.scale_ups},
                       {"scale_up_success", row.scale_ups ? static_cast<double>(row.scale_ups_ok) / row.scale_ups : 1.0},
                       {"time_to_capacity_s", Percentile(row.time_to_capacity_s, 0.50)},
                       {"slo_miss_s_by_cause", SloMissJson(row.slo_miss_s)},
                       {"slow_scale_ups_by_cause", row.slow_scale_ups}}}});
  }

  // Governance findings (about the present state, for the tenant's view).
  json findings = json::array();
  std::vector<int> allocated(cat.queues.size()), pending_n(cat.queues.size());
  std::vector<int64_t> oldest_wait_ms(cat.queues.size());
  // Waiting workloads by the cause core/diagnosis gives their wait.
  std::vector<std::array<int, diagnosis::kWaitCauseCount>> causes(cat.queues.size());
  int cluster_gpus = 0, cluster_used = 0;
  for (const Node& n : cat.cluster.nodes) {
    cluster_gpus += n.gpu_count;
    cluster_used += std::popcount(UsedGpus(n.id));
  }
  for (uint64_t id : active_) {
    const WorkloadRecord& r = records_.at(id);
    const size_t q = r.w.queue.value();
    if (r.allocation) {
      allocated[q] += r.allocation->gpu_count();
      // Asks more GPUs than it uses.
      if (r.utilization >= 0 && r.utilization < 0.3 && (tenant.empty() || r.w.tenant == tenant)) {
        findings.push_back({{"kind", "overasking"}, {"subject", r.w.name}, {"workload", id},
                            {"message", fmt::format("{} holds {} GPUs but uses {:.0f}% of them on average",
                                                    r.w.name, r.allocation->gpu_count(), r.utilization * 100)}});
      }
    } else if (r.w.state == WorkloadState::kPending) {
      ++pending_n[q];
      oldest_wait_ms[q] = std::max(oldest_wait_ms[q], now_ms - ToMillis(r.w.submit_time));
      if (machine_) {
        auto tally = wait_tallies_.find(id);
        diagnosis::WaitTally t = tally != wait_tallies_.end() ? tally->second : diagnosis::WaitTally();
        t.ChargeTo(clock_.Now());
        const diagnosis::WaitDiagnosis why =
            diagnosis::DiagnoseWait(machine_->state().snapshot(), r.w, t, milliseconds(now_ms - r.queued_ms));
        ++causes[q][static_cast<int>(why.cause)];
      }
    }
  }
  const bool admin_view = tenant.empty();
  for (size_t i = 0; i < cat.queues.size() && admin_view; ++i) {
    const Queue& q = cat.queues[i];
    const int idle = q.guaranteed_gpus - allocated[i];
    const int lendable = q.lending_limit_gpus == kUnlimited ? idle : std::min(idle, q.lending_limit_gpus);
    int others_pending = 0;
    for (size_t j = 0; j < cat.queues.size(); ++j) if (j != i) others_pending += pending_n[j];
    if (idle > 0 && lendable < idle && others_pending > 0) {
      findings.push_back({{"kind", "idle_guarantee"}, {"subject", q.name},
                          {"message", fmt::format("queue {} has {} idle guaranteed GPUs but its lending limit lets only {} be borrowed while {} workloads wait elsewhere",
                                                  q.name, idle, std::max(0, lendable), others_pending)}});
    }
    if (pending_n[i] > 0 && allocated[i] < q.guaranteed_gpus && oldest_wait_ms[i] > 10 * 60 * 1000) {
      findings.push_back({{"kind", "starving_queue"}, {"subject", q.name},
                          {"message", fmt::format("queue {} is below its guarantee ({} of {} GPUs) yet {} workloads wait, the oldest for {:.0f} min",
                                                  q.name, allocated[i], q.guaranteed_gpus, pending_n[i], oldest_wait_ms[i] / 60000.0)}});
    }
    if (pending_n[i] >= 3 || oldest_wait_ms[i] > 30 * 60 * 1000) {
      // Congestion: name the cause most of its waiting workloads wait for
      // (ties to the cause listed first in WaitCause).
      int best = static_cast<int>(diagnosis::WaitCause::kCapacityShort), best_n = 0;
      for (int c = 0; c < diagnosis::kWaitCauseCount; ++c) {
        if (causes[i][c] > best_n) {
          best = c;
          best_n = causes[i][c];
        }
      }
      const auto cause_code = static_cast<diagnosis::WaitCause>(best);
      std::string cause = std::string(diagnosis::WaitCauseName(cause_code));
      if (cause_code == diagnosis::WaitCause::kCapacityShort && cluster_gpus > 0) {
        cause += fmt::format(" (the cluster is {:.0f}% allocated)", 100.0 * cluster_used / cluster_gpus);
      }
      findings.push_back({{"kind", "congested_queue"}, {"subject", q.name},
                          {"cause", diagnosis::WaitCauseName(cause_code)},
                          {"message", fmt::format("queue {} has {} waiting workloads (oldest {:.0f} min); cause: {}",
                                                  q.name, pending_n[i], oldest_wait_ms[i] / 60000.0, cause)}});
    }
  }
  for (const json& r : out_rows) {
    const double total = r["gpu_hours"]["training"].get<double>() + r["gpu_hours"]["inference"].get<double>() +
                         r["gpu_hours"]["batch_inference"].get<double>() + r["gpu_hours"]["debug"].get<double>();
    const double high = r["high_priority"]["gpu_hours"].get<double>();
    if (total > 0 && high / total > 0.5 && r["preemptions_caused"].get<int>() > 0) {
      findings.push_back({{"kind", "heavy_high_priority"}, {"subject", r["project"]},
                          {"message", fmt::format("project {} ran {:.0f}% of its {:.1f} GPU-hours at never-preempted priority and caused {} preemptions",
                                                  r["project"].get<std::string>(), 100 * high / total, total,
                                                  r["preemptions_caused"].get<int>())}});
    }
  }
  return json{{"range", {{"from_ms", from}, {"to_ms", to}}},
              {"tenant", tenant},
              {"rows", out_rows},
              {"findings", findings},
              {"scale_ups", scale_up_diag}};
}

}  // namespace tidal::server
