// The control plane's metric families and the series they export at 0.
// Every figure is still counted where the control plane reacts to an applied
// edit (control_plane_loop.cc, control_plane_agent.cc); this file only
// defines the families, names the label sets known before their first event,
// and keeps the loan bookkeeping the loan counters need.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "server/control_plane.h"

namespace tidal::server {
namespace {

constexpr WorkloadKind kKinds[] = {WorkloadKind::kTraining, WorkloadKind::kInference,
                                   WorkloadKind::kBatchInference, WorkloadKind::kDebug};
// Cancel is not a preemption (ReactNotice counts none for it).
constexpr PreemptCause kCauses[] = {PreemptCause::kPriority, PreemptCause::kReclaim,
                                    PreemptCause::kInferenceReturn, PreemptCause::kMaxRuntime,
                                    PreemptCause::kIdle, PreemptCause::kDrain};
// The `kind` of tidal_gpu_errors_total (control_plane_agent.cc).
constexpr const char* kGpuErrorKinds[] = {"xid", "ecc_or_unhealthy"};

std::vector<Labels> Results() { return {{{"result", "ok"}}, {{"result", "failed"}}}; }

}  // namespace

void ControlPlane::DefineMetrics() {
  const std::vector<double> seconds_buckets = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400};
  const std::vector<double> fast_buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  std::vector<Labels> by_cause, refused;
  for (PreemptCause c : kCauses) by_cause.push_back({{"cause", std::string(PreemptCauseName(c))}});
  for (const char* k : {"preempt", "resize", "place", "reject"}) refused.push_back({{"kind", k}});
  metrics_.DefineHistogram("tidal_queue_wait_seconds", "Time from submission (or requeue) to start, by queue and kind.", seconds_buckets);
  metrics_.DefineCounter("tidal_gang_starts_total", "Gang (multi-pod) starts by result: ok, or failed when a pod exited non-zero before the gang was up.", Results());
  metrics_.DefineCounter("tidal_preemptions_total", "Preemptions by cause (priority, reclaim, inference_return, max_runtime, idle, drain) and victim kind.");
  metrics_.DefineHistogram("tidal_preemption_latency_seconds", "From notice to the victim's GPUs being free, by cause.", seconds_buckets, by_cause);
  metrics_.DefineCounter("tidal_reclaims_total", "Guarantee reclaims (preemptions with cause reclaim or inference_return), by queue of the victim.");
  metrics_.DefineCounter("tidal_scale_ups_total", "Inference scale-ups by result (ok, failed).", Results());
  metrics_.DefineHistogram("tidal_scale_up_time_to_capacity_seconds", "From the wanted replica count rising to all replicas ready.", seconds_buckets, {{}});
  metrics_.DefineHistogram("tidal_recovery_seconds", "From a preemption to the victim running again.", seconds_buckets, {{}});
  metrics_.DefineHistogram("tidal_scheduling_pass_seconds", "Duration of one scheduling pass (co-location + engine + apply).", fast_buckets, {{}});
  DefineApiMetrics(metrics_);
  metrics_.DefineCounter("tidal_workloads_submitted_total", "Admitted workloads by queue and kind.");
  metrics_.DefineCounter("tidal_gpu_errors_total", "GPU faults (XID, uncorrectable ECC, unhealthy) reported by agents, by node.");
  metrics_.DefineCounter("tidal_nodes_lost_total", "Nodes whose lease expired.", {{}});
  metrics_.DefineCounter("tidal_journal_snapshots_total",
                         "Journal snapshots written (each compacts the journal it covers).", {{}});
  metrics_.DefineHistogram("tidal_journal_snapshot_copy_seconds",
                           "Time to copy the live state for one journal snapshot, under the state lock.", fast_buckets,
                           {{}});
  metrics_.DefineHistogram("tidal_journal_snapshot_encode_seconds",
                           "Time to encode one journal snapshot, on the snapshot writer's thread (off the state lock).",
                           fast_buckets, {{}});
  metrics_.DefineCounter("tidal_placements_total", "Placements by queue, kind and whether borrowed.");
  metrics_.DefineCounter("tidal_refused_decisions_total", "Engine decisions the state refused because the world moved since the pass's snapshot, by kind.", refused);
  std::vector<Labels> miss_causes, wait_causes;
  for (diagnosis::MissCause c : diagnosis::AllMissCauses()) miss_causes.push_back({{"cause", std::string(diagnosis::MissCauseName(c))}});
  for (diagnosis::WaitCause c : diagnosis::AllWaitCauses()) wait_causes.push_back({{"cause", std::string(diagnosis::WaitCauseName(c))}});
  metrics_.DefineCounter("tidal_slo_miss_seconds_total",
                         "Seconds an inference service missed its P99 target, by dominant cause (core/diagnosis: "
                         "node_lost, gpu_fault, replica_crash, loan_not_returned, victims_in_grace, cold_start, "
                         "forecast_under_predicted, max_replicas_reached, capacity_short).",
                         miss_causes);
  metrics_.DefineCounter("tidal_slow_scale_ups_total",
                         "Inference scale-ups that timed out or took over max(60 s, 2 x cold start), by dominant cause "
                         "(the causes of tidal_slo_miss_seconds_total).",
                         miss_causes);
  metrics_.DefineCounter("tidal_long_waits_total",
                         "Training workloads that waited 30 min or more before a start, by cause (job_too_big, quota, "
                         "priority_imbalance, awaiting_approval, capacity_short).",
                         wait_causes);
  metrics_.DefineCounter("tidal_loans_total", "Shared nodes the co-location controller lent to training, by pool.");
  metrics_.DefineCounter("tidal_returns_total", "Lent nodes given back to inference, by pool.");
  ZeroKnownSeries();
}

// The label sets the catalog names: every queue by kind, every pool, every
// node. Called at start and at each scrape, which adds queues and nodes that
// joined since (a registering node also calls ZeroNodeSeries at once).
void ControlPlane::ZeroKnownSeries() const {
  const Catalog& cat = config_.catalog;
  for (const Queue& q : cat.queues) {
    for (WorkloadKind k : kKinds) {
      const std::string kind(WorkloadKindName(k));
      metrics_.Zero("tidal_workloads_submitted_total", {{"queue", q.name}, {"kind", kind}});
      metrics_.Zero("tidal_queue_wait_seconds", {{"queue", q.name}, {"kind", kind}});
      for (const char* borrowed : {"false", "true"}) {
        metrics_.Zero("tidal_placements_total", {{"queue", q.name}, {"kind", kind}, {"borrowed", borrowed}});
      }
    }
    for (PreemptCause c : {PreemptCause::kReclaim, PreemptCause::kInferenceReturn}) {
      metrics_.Zero("tidal_reclaims_total", {{"queue", q.name}, {"cause", std::string(PreemptCauseName(c))}});
    }
  }
  for (WorkloadKind k : kKinds) {
    for (PreemptCause c : kCauses) {
      metrics_.Zero("tidal_preemptions_total",
                    {{"cause", std::string(PreemptCauseName(c))}, {"kind", std::string(WorkloadKindName(k))}});
    }
  }
  for (const Pool& p : cat.cluster.pools) {
    for (const char* name : {"tidal_loans_total", "tidal_returns_total"}) metrics_.Zero(name, {{"pool", p.name}});
  }
  for (const Node& n : cat.cluster.nodes) ZeroNodeSeries(n.name);
}

void ControlPlane::ZeroNodeSeries(const std::string& node) const {
  for (const char* kind : kGpuErrorKinds) metrics_.Zero("tidal_gpu_errors_total", {{"node", node}, {"kind", kind}});
}

// Counted where the server reacts to the plan's LendEdit / ReturnEdit: a
// loan opens at the lend and closes at the return. A node lent before a
// restart has no open loan here, so its return counts no GPU-hours.
void ControlPlane::CountLoan(NodeId node, bool lend, Time now) {
  const Catalog& cat = config_.catalog;
  const Node& n = cat.cluster.nodes[node.value()];
  const Labels pool = {{"pool", cat.cluster.pools[n.pool.value()].name}};
  metrics_.Inc(lend ? "tidal_loans_total" : "tidal_returns_total", pool);
  if (lend) {
    lent_since_ms_[node.value()] = ToMillis(now);
    return;
  }
  auto it = lent_since_ms_.find(node.value());
  if (it == lent_since_ms_.end()) return;
  returned_gpu_hours_[pool[0].second] += n.gpu_count * std::max<int64_t>(0, ToMillis(now) - it->second) / 3.6e6;
  lent_since_ms_.erase(it);
}

// GPU-hours lent grow while a loan is open, so they are summed at scrape
// time: the ended loans plus the open ones so far. Both only grow: a counter.
void ControlPlane::LoanGauges(GaugeWriter& g, Time now) const {
  const Catalog& cat = config_.catalog;
  std::map<std::string, double> lent = returned_gpu_hours_;
  for (const auto& [node, since_ms] : lent_since_ms_) {
    const Node& n = cat.cluster.nodes[node];
    lent[cat.cluster.pools[n.pool.value()].name] +=
        n.gpu_count * std::max<int64_t>(0, ToMillis(now) - since_ms) / 3.6e6;
  }
  g.Family("tidal_lent_gpu_hours_total", "GPU-hours of shared nodes lent to training, open loans included, by pool.",
           prometheus::MetricType::Counter);
  g.Family("tidal_returned_gpu_hours_total", "GPU-hours of the loans that ended (were returned), by pool.",
           prometheus::MetricType::Counter);
  for (const Pool& p : cat.cluster.pools) {
    const auto l = lent.find(p.name);
    const auto r = returned_gpu_hours_.find(p.name);
    g.Sample("tidal_lent_gpu_hours_total", {{"pool", p.name}}, l == lent.end() ? 0 : l->second);
    g.Sample("tidal_returned_gpu_hours_total", {{"pool", p.name}}, r == returned_gpu_hours_.end() ? 0 : r->second);
  }
}

}  // namespace tidal::server
