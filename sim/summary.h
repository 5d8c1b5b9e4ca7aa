// The figures one simulation run reports (DIR/summary.json). Field names are
// part of the interface: `tidal sim compare`, the docs and the claims in
// docs/PERFORMANCE.md read them. Durations are in seconds unless the name
// says otherwise.
#ifndef TIDAL_SIM_SUMMARY_H_
#define TIDAL_SIM_SUMMARY_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/percentile.h"
#include "core/diagnosis/slo_diagnosis.h"
#include "core/diagnosis/wait_diagnosis.h"

namespace tidal::sim {

using ::tidal::Percentile;  // core/common/percentile.h: nearest rank, q in [0, 1]
double Mean(const std::vector<double>& values);
// "0.9934", or "n/a" for an empty figure: how the console prints a rate.
std::string FormatRate(const std::optional<double>& v);

struct Summary {
  std::string policy;      // the policy file's name (or "default")
  std::string colocation;  // static | reactive | predictive
  double sim_wall_s = 0;
  double sim_duration_s = 0;
  unsigned long long seed = 0;

  struct Training {
    int jobs = 0;
    int completed = 0;
    int started = 0;
    double queue_wait_mean_s = 0;
    double queue_wait_p50_s = 0;
    double queue_wait_p95_s = 0;
    double queue_wait_p99_s = 0;
    double jct_mean_s = 0;
    int gang_partial_starts = 0;
    double gang_start_success_rate = 1;
    int preemptions = 0;
    double lost_gpu_hours = 0;
    double recovery_time_p50_s = 0;
    double recovery_time_p95_s = 0;
    // Per cause of the requeue: a preemption notice's cause (priority,
    // reclaim, inference_return, drain) or node_lost. The two figures above
    // cover the notices only.
    struct Recovery {
      int count = 0;
      double p50_s = 0;
      double p95_s = 0;
    };
    std::map<std::string, Recovery> recovery_by_cause;
  } training;

  // Figures of things that did not happen are empty (JSON null, "n/a" on
  // the console): a run with no scored service-minute has no SLO attainment,
  // not a perfect one.
  struct Inference {
    int services = 0;
    int service_minutes = 0;
    int slo_miss_minutes = 0;
    std::optional<double> slo_attainment;  // 1 - missed/scored minutes
    // Over scored minutes, of each minute's modelled P99 latency: the P95
    // and the P99 of the per-minute P99s (not a P95 of requests).
    std::optional<double> minute_p99_p95_ms;
    std::optional<double> latency_p99_ms;
    int scale_ups = 0;
    std::optional<double> scale_up_success_rate;  // empty when no scale-up was judged
    double time_to_capacity_p50_s = 0;
    double time_to_capacity_p99_s = 0;
    // Load samples of --load-history fed to the forecaster before t = 0.
    int64_t load_history_samples = 0;
    // Mean absolute percentage error (a fraction: 0.25 = 25 %) of the
    // forecaster's expected rate one forecast_horizon ahead against the load
    // then observed, over every service's steps with load > 0; empty when
    // none was scored. In every mode (the forecaster runs in all three).
    std::optional<double> forecast_error_mape;
    // Returned shared nodes that inference then used, and the time from a
    // return's completion (its borrowers gone) to the first inference pod
    // placed on the node: how far ahead of need the GPUs came back (0 = just
    // in time, or a replica placed while the borrowers still left).
    int return_leads = 0;
    double return_lead_p50_s = 0;
    double return_lead_p95_s = 0;
  } inference;

  struct Batch {
    int jobs = 0;
    int completed = 0;
    double deadline_met_rate = 1;
  } batch_inference;

  struct Debug {
    int jobs = 0;
    double queue_wait_p95_s = 0;
  } debug;

  struct ClusterFigures {
    int gpus = 0;
    double gpu_allocation_ratio = 0;
    double borrowed_gpu_hours = 0;
    double training_gpu_hours = 0;  // held, running or terminating
    double inference_gpu_hours = 0;
    double batch_gpu_hours = 0;
    double debug_gpu_hours = 0;
    int reclaims = 0;
    double reclaim_latency_p95_s = 0;
  } cluster;

  // Why (core/diagnosis, docs/colocation.md "Diagnosis"): each missed
  // service-minute, each slow or failed scale-up and each long training wait
  // (kLongWait or more before its first start, or still waiting at the end),
  // counted once, under its one dominant cause. JSON: every cause's name
  // with its count, zeros included, in the enums' order.
  struct Diagnosis {
    std::array<int, ::tidal::diagnosis::kMissCauseCount> slo_miss_minutes_by_cause{};
    int slow_scale_ups = 0;
    std::array<int, ::tidal::diagnosis::kMissCauseCount> slow_scale_ups_by_cause{};
    int long_training_waits = 0;
    std::array<int, ::tidal::diagnosis::kWaitCauseCount> long_training_waits_by_cause{};
  } diagnosis;

  struct Scheduler {
    int cycles = 0;
    double cycle_p50_ms = 0;
    double cycle_p99_ms = 0;
    int invalid_decisions = 0;  // decisions the simulator refused (double-booked GPUs, ...)
  } scheduler;

  // What the trace loaders left out, so a reader knows what was replayed.
  struct Traces {
    int jobs = 0;               // trace records that became workloads
    int skipped_cpu_only = 0;   // openb pods without GPUs
    int skipped_never_ran = 0;  // openb pods never scheduled (no run time)
  } traces;

  nlohmann::ordered_json ToJson() const;
};

}  // namespace tidal::sim

#endif  // TIDAL_SIM_SUMMARY_H_
