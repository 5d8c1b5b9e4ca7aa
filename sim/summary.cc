#include "sim/summary.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tidal::sim {

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

std::string FormatRate(const std::optional<double>& v) {
  return v.has_value() ? fmt::format("{:.4f}", *v) : "n/a";
}

namespace {
// Rounds to a fixed number of decimals so that the JSON text is stable and
// readable (1e-6 s resolution is far below anything simulated).
double R(double v, int decimals = 6) {
  if (!std::isfinite(v)) return v;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}
nlohmann::ordered_json R(const std::optional<double>& v, int decimals = 6) {
  if (!v.has_value()) return nullptr;
  return R(*v, decimals);
}
}  // namespace

nlohmann::ordered_json Summary::ToJson() const {
  nlohmann::ordered_json j;
  j["policy"] = policy;
  j["colocation"] = colocation;
  j["sim_wall_s"] = R(sim_wall_s, 3);
  j["sim_duration_s"] = R(sim_duration_s);
  j["seed"] = seed;
  j["training"] = {
      {"jobs", training.jobs},
      {"completed", training.completed},
      {"started", training.started},
      {"queue_wait_mean_s", R(training.queue_wait_mean_s)},
      {"queue_wait_p50_s", R(training.queue_wait_p50_s)},
      {"queue_wait_p95_s", R(training.queue_wait_p95_s)},
      {"queue_wait_p99_s", R(training.queue_wait_p99_s)},
      {"jct_mean_s", R(training.jct_mean_s)},
      {"gang_partial_starts", training.gang_partial_starts},
      {"gang_start_success_rate", R(training.gang_start_success_rate)},
      {"preemptions", training.preemptions},
      {"lost_gpu_hours", R(training.lost_gpu_hours)},
      {"recovery_time_p50_s", R(training.recovery_time_p50_s)},
      {"recovery_time_p95_s", R(training.recovery_time_p95_s)},
  };
  nlohmann::json by_cause = nlohmann::json::object();
  for (const auto& [cause, r] : training.recovery_by_cause) {
    by_cause[cause] = {{"count", r.count}, {"p50_s", R(r.p50_s)}, {"p95_s", R(r.p95_s)}};
  }
  j["training"]["recovery_by_cause"] = std::move(by_cause);
  j["inference"] = {
      {"services", inference.services},
      {"service_minutes", inference.service_minutes},
      {"slo_miss_minutes", inference.slo_miss_minutes},
      {"slo_attainment", R(inference.slo_attainment)},
      {"minute_p99_p95_ms", R(inference.minute_p99_p95_ms, 3)},
      {"latency_p99_ms", R(inference.latency_p99_ms, 3)},
      {"scale_ups", inference.scale_ups},
      {"scale_up_success_rate", R(inference.scale_up_success_rate)},
      {"time_to_capacity_p50_s", R(inference.time_to_capacity_p50_s)},
      {"time_to_capacity_p99_s", R(inference.time_to_capacity_p99_s)},
      {"load_history_samples", inference.load_history_samples},
      {"forecast_error_mape", R(inference.forecast_error_mape)},
      {"return_leads", inference.return_leads},
      {"return_lead_p50_s", R(inference.return_lead_p50_s)},
      {"return_lead_p95_s", R(inference.return_lead_p95_s)},
  };
  j["batch_inference"] = {
      {"jobs", batch_inference.jobs},
      {"completed", batch_inference.completed},
      {"deadline_met_rate", R(batch_inference.deadline_met_rate)},
  };
  j["debug"] = {{"jobs", debug.jobs}, {"queue_wait_p95_s", R(debug.queue_wait_p95_s)}};
  {
    namespace dg = ::tidal::diagnosis;
    nlohmann::ordered_json misses, slow, waits;
    for (dg::MissCause c : dg::AllMissCauses()) {
      misses[std::string(dg::MissCauseName(c))] = diagnosis.slo_miss_minutes_by_cause[static_cast<int>(c)];
      slow[std::string(dg::MissCauseName(c))] = diagnosis.slow_scale_ups_by_cause[static_cast<int>(c)];
    }
    for (dg::WaitCause c : dg::AllWaitCauses()) {
      waits[std::string(dg::WaitCauseName(c))] = diagnosis.long_training_waits_by_cause[static_cast<int>(c)];
    }
    j["diagnosis"] = {
        {"slo_miss_minutes_by_cause", misses},
        {"slow_scale_ups", diagnosis.slow_scale_ups},
        {"slow_scale_ups_by_cause", slow},
        {"long_training_wait_s", static_cast<int>(ToSeconds(dg::kLongWait))},
        {"long_training_waits", diagnosis.long_training_waits},
        {"long_training_waits_by_cause", waits},
    };
  }
  j["cluster"] = {
      {"gpus", cluster.gpus},
      {"gpu_allocation_ratio", R(cluster.gpu_allocation_ratio)},
      {"borrowed_gpu_hours", R(cluster.borrowed_gpu_hours)},
      {"training_gpu_hours", R(cluster.training_gpu_hours)},
      {"inference_gpu_hours", R(cluster.inference_gpu_hours)},
      {"batch_gpu_hours", R(cluster.batch_gpu_hours)},
      {"debug_gpu_hours", R(cluster.debug_gpu_hours)},
      {"reclaims", cluster.reclaims},
      {"reclaim_latency_p95_s", R(cluster.reclaim_latency_p95_s)},
  };
  j["traces"] = {
      {"jobs", traces.jobs},
      {"skipped_cpu_only", traces.skipped_cpu_only},
      {"skipped_never_ran", traces.skipped_never_ran},
  };
  j["scheduler"] = {
      {"cycles", scheduler.cycles},
      {"cycle_p50_ms", R(scheduler.cycle_p50_ms, 3)},
      {"cycle_p99_ms", R(scheduler.cycle_p99_ms, 3)},
      {"invalid_decisions", scheduler.invalid_decisions},
  };
  return j;
}

}  // namespace tidal::sim
