// Small fixed training workloads from the scheduling papers, for comparing
// against their published numbers: the Tiresias example trace
// (tiresias/60_job.csv, NSDI'19) and the Pollux workloads
// (philly-pollux/workloads/workload-N.csv, OSDI'21).
#ifndef TIDAL_SIM_TIRESIAS_TRACE_LOADER_H_
#define TIDAL_SIM_TIRESIAS_TRACE_LOADER_H_

#include <string>

#include "core/common/status.h"
#include "sim/trace_loader.h"

namespace tidal::sim {

// job_id,num_gpu,submit_time,iterations,model_name,duration,interval: rigid
// training gangs of num_gpu GPUs (split into pods as SplitIntoPods), arriving
// at submit_time (s), running `duration` seconds. Group: model_name.
StatusOr<std::vector<TraceJob>> LoadTiresiasTrace(const std::string& path,
                                                  const TraceOptions& options);

// name,time,application,num_replicas,batch_size: training gangs of
// num_replicas GPUs arriving at `time` (s). The files carry no run time
// (Pollux derives it from per-application throughput models), so every job
// runs options.job_duration_s, which must be set. Group: application.
StatusOr<std::vector<TraceJob>> LoadPolluxWorkload(const std::string& path,
                                                   const TraceOptions& options);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_TIRESIAS_TRACE_LOADER_H_
