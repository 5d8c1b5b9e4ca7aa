// Loaders for public cluster traces (see /work/shared/data/README.md for the
// schemas): Philly training jobs, Alibaba openb pods, Azure LLM request
// arrivals and Alibaba GenAI serving QPS. Each returns plain records in trace
// time (seconds from the first record) after the caller's scaling options;
// a malformed line is an error naming file, line and field, never skipped.
#ifndef TIDAL_SIM_TRACE_LOADER_H_
#define TIDAL_SIM_TRACE_LOADER_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/common/status.h"
#include "core/model/workload.h"

namespace tidal::sim {

struct TraceOptions {
  // Arrival offsets are multiplied by time_scale (0.5 replays twice as fast);
  // load traces stretch their time axis by it (24 turns one hour into a day).
  double time_scale = 1.0;
  double duration_scale = 1.0;  // job run times are multiplied by it
  double load_scale = 1.0;      // requests/s are multiplied by it
  double start_s = 0;           // drop records before this trace offset (unscaled)
  double span_s = 0;            // keep only this much trace time after start_s; 0 = all
  size_t limit = 0;             // keep at most this many jobs; 0 = all
  int node_gpus = 8;            // GPUs per node: bigger jobs become multi-node gangs
  double window_s = 60;         // load traces: bucket width before time_scale
  // Run time of every job of a trace that has none (Pollux workloads), in
  // trace seconds before duration_scale; 0 = not set.
  double job_duration_s = 0;
};

// One job or pod from a trace, ready to become a Workload.
struct TraceJob {
  std::string name;
  double submit_s = 0;    // from the first kept record, scaled
  double duration_s = 0;  // at full size, scaled
  int gpus_per_pod = 1;
  int pods = 1;           // a rigid gang of `pods` pods
  WorkloadKind kind = WorkloadKind::kTraining;
  std::string group;      // Philly virtual cluster, openb QoS class
  int line = 0;           // source line, for messages
};

// Philly (philly-pollux/philly.csv): timestamp,duration,num_gpus,gpu_time,cluster.
// Rows are sorted by timestamp (ties by line). A job of num_gpus GPUs becomes
// pods of the largest divisor of num_gpus that fits one node.
StatusOr<std::vector<TraceJob>> LoadPhillyTrace(const std::string& path, const TraceOptions& options);

// Alibaba openb pod list (full schema). LS, Guaranteed and Burstable pods
// become inference replicas; BE pods become preemptible training. A
// fractional GPU (gpu_milli < 1000) rounds up to one whole GPU. CPU-only pods
// are counted in `skipped_cpu_only` (they need no GPU scheduling); GPU pods
// with no scheduled_time never ran, so they have no run time to replay, and
// are counted in `skipped_never_ran` (861 in openb_pod_list_default.csv).
struct TraceJobs {
  std::vector<TraceJob> jobs;
  size_t skipped_cpu_only = 0;   // records that ask for no GPU
  size_t skipped_never_ran = 0;  // records that never started (no run time to replay)
};
using OpenbResult = TraceJobs;
StatusOr<OpenbResult> LoadOpenbPods(const std::string& path, const TraceOptions& options);

// A load curve: requests/s per step, starting at trace offset 0.
struct LoadSeries {
  double step_s = 60;
  std::vector<double> rps;
};

// Azure LLM inference (TIMESTAMP,ContextTokens,GeneratedTokens): arrivals are
// counted per window_s and divided by it.
StatusOr<LoadSeries> LoadAzureLlmTrace(const std::string& path, const TraceOptions& options);

// Alibaba GenAI serving QPS (qps.csv or qps.csv.gz:
// timestamp_anon,value,container_ip,request_type): values are summed per window.
StatusOr<LoadSeries> LoadGenaiQps(const std::string& path, const TraceOptions& options);

// Shared by the loaders (one file per format: sim/*_trace_loader.h).
// Checks the scales and bounds of `options`; errors name `path`.
Status CheckTraceOptions(const std::string& path, const TraceOptions& options);
// Sorts by arrival (stable on line), keeps options' window and limit, rebases
// to the first kept arrival and applies the scales.
void FinishTraceJobs(std::vector<TraceJob>& jobs, const TraceOptions& options);
// One timed sample of a load trace: its time (s, any origin), its value, and
// the line it came from (for errors).
struct LoadTraceSample {
  double time_s = 0;
  double value = 0;
  int line = 0;
};
// The most windows a load curve holds (a year of one-minute windows is
// 525,600): one timestamp far from the others would otherwise allocate a
// window for every step up to it.
inline constexpr size_t kMaxLoadWindows = size_t{1} << 22;
// Samples into a load curve of options.window_s steps, summed, or counted
// per second when divide_by_window. A sample more than kMaxLoadWindows
// windows after the first is an error naming its line and `time_field`.
StatusOr<LoadSeries> BucketLoadSamples(const std::string& path, std::string_view time_field,
                                       const std::vector<LoadTraceSample>& samples,
                                       const TraceOptions& options, bool divide_by_window);

// Splits `gpus` into identical pods: the largest divisor of gpus that is at
// most node_gpus. 12 GPUs on 8-GPU nodes -> 2 pods x 6 GPUs.
void SplitIntoPods(int gpus, int node_gpus, int& pods, int& gpus_per_pod);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_TRACE_LOADER_H_
