// The trace-driven simulator: a discrete-event loop that drives the same
// co-location controller and engine the server runs, on a simulated clock.
//
// Loop: events pop from a heap in (time, kind rank, insertion) order.
// Arrivals add pending workloads; finishes and victim exits free GPUs; each of
// those asks for a scheduling pass (at most one per `min_pass_gap`), and a
// pass also runs every `pass_interval`. A pass: refresh checkpoints, derive
// priorities (budget state changes), ColocationController::Prepare on the live
// snapshot, Scheduler::Schedule, then apply both decision sets (preempts,
// resizes, places). Every `load_step` the load of each service is observed,
// and the previous step is scored per service from the latency model over the
// replicas that were ready during the whole step. The snapshot is kept live
// between passes (workloads in id order, allocations updated in place), never
// rebuilt. All randomness comes from one seeded Rng, so the same inputs give
// byte-identical events and summary (wall-clock figures aside; see
// SimOptions::wall_times).
#ifndef TIDAL_SIM_SIMULATOR_H_
#define TIDAL_SIM_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "core/colocation/loan_calendar.h"
#include "core/common/status.h"
#include "core/common/time.h"
#include "core/model/policy.h"
#include "core/model/workload.h"
#include "sim/load_profile.h"
#include "sim/sim_progress.h"
#include "sim/summary.h"

namespace tidal::sim {

// A workload and when it arrives, in seconds from the simulation start. The
// simulator assigns ids 1..N in input order; `workload.submit_time` is set
// from submit_s.
struct SimWorkload {
  Workload workload;
  double submit_s = 0;
  // A debug session's GPUs go idle this long after each start (the
  // lifecycle then reclaims it after SimOptions::debug_idle_limit);
  // negative = never idle.
  double idle_after_s = -1;
};

// A node's agent stops at `at_s` (it crashed, the node lost power): its last
// lease runs SimOptions::node_lease from then, and the lifecycle declares the
// node lost once it ran out, as the server's does.
struct NodeLoss {
  std::string node;
  double at_s = 0;
};

// A GPU of a node reports a fatal error (an Xid, an uncorrectable ECC
// error) at `at_s`, as an agent's heartbeat does: the node is cordoned and
// degraded, and the lifecycle drains it, as the server's does.
struct GpuFault {
  std::string node;
  int gpu = 0;
  double at_s = 0;
};

struct SimOptions {
  uint64_t seed = 1;
  Duration pass_interval = seconds(10);
  Duration min_pass_gap = seconds(1);  // arrivals/exits trigger a pass at most this often
  Duration load_step = minutes(1);     // one scored "service-minute"
  Duration checkpoint_save = seconds(30);  // a checkpointing victim's shutdown time
  // As the server's node_lease_s and debug_idle_limit_s (defaults alike).
  Duration node_lease = seconds(30);
  Duration debug_idle_limit = minutes(30);
  // Stop here; 0 = when all finite work is done and the load curve ended
  // (capped at the last arrival + load end + 7 days).
  double end_s = 0;
  Duration sample_interval = minutes(1);  // report time series
  // How often a pass asks the engine why work waits (ScheduleOptions::
  // explain_waits), for the long-wait diagnosis: the reason of one explained
  // pass is charged until the next (core/diagnosis/wait_diagnosis.h). The
  // decisions are the same either way; only the explanations cost.
  Duration wait_explain_interval = minutes(5);
  // False: wall-clock figures (sim_wall_s, cycle_*_ms) are written as 0, so
  // two runs give byte-identical files.
  bool wall_times = true;
  std::optional<ColocationMode> colocation;  // overrides the policy's mode
  std::string policy_name = "default";
  // Each step's load is multiplied by 1 + load_noise x U(-1, 1), drawn from the
  // seeded Rng; 0 = the load curve exactly.
  double load_noise = 0;
  // Called about every progress_interval_s of wall-clock time while the run
  // goes, and once at its end; empty = no reports. It never changes the run.
  std::function<void(const SimProgress&)> on_progress;
  double progress_interval_s = 0.5;
};

struct SimInput {
  config::ClusterConfig cluster;
  PolicyConfig policy;
  std::vector<SimWorkload> workloads;
  std::vector<NodeLoss> node_losses;
  std::vector<GpuFault> gpu_faults;
  LoadProfile load;
  // Load observed before the run (--load-history): fed to the forecaster
  // before t = 0, ending at the start (see HistoryShiftS).
  LoadProfile load_history;
  Summary::Traces traces;  // what the trace loaders kept and left out
};

// Sampled every SimOptions::sample_interval, for the report.
struct TimeSeries {
  std::vector<double> t_s;
  // GPUs held (running or terminating) by kind: training, inference, batch, debug.
  std::vector<double> gpus_by_kind[4];
  std::vector<double> lent_gpus;
  std::vector<double> lent_nodes;
  std::vector<double> loans;    // nodes newly lent since the previous sample
  std::vector<double> returns;  // nodes returned since the previous sample
  std::vector<double> training_queue;  // pending training jobs
  struct Service {
    std::string name;
    double target_p99_ms = 0;
    std::vector<double> rps;
    std::vector<double> capacity_rps;  // ready replicas x replica capacity
    std::vector<double> p99_ms;        // modelled; -1 when unserved
    std::vector<double> ready;
    std::vector<double> desired;
    std::vector<double> slo_miss;      // 1 when the step missed
    std::vector<double> cold_start_miss;  // 1 when it missed while replicas were starting
  };
  std::vector<Service> services;
  int total_gpus = 0;
};

struct SimResult {
  Summary summary;
  TimeSeries series;
  // The loan calendar planned at the start of each simulated day (at the
  // first pass from midnight on), in reactive and predictive co-location:
  // the report sets each against the loans that happened.
  std::vector<LoanCalendar> calendars;
};

// Runs the simulation. `events` (may be null) receives one JSON object per
// line for every submit, place, resize, preempt, exit, finish, reject,
// scale-up, replica-ready, loan and return.
StatusOr<SimResult> RunSimulation(const SimInput& input, const SimOptions& options,
                                  std::ostream* events);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_SIMULATOR_H_
