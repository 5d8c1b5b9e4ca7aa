// SenseTime Helios job logs (HeliosData `cluster_log.csv` of Venus, Earth,
// Saturn or Uranus; Hu et al., SC'21; CC BY 4.0). The logs are not in
// /work/shared/data (data.zip is 36 MB); this reads them once downloaded.
#ifndef TIDAL_SIM_HELIOS_TRACE_LOADER_H_
#define TIDAL_SIM_HELIOS_TRACE_LOADER_H_

#include <string>

#include "core/common/status.h"
#include "sim/trace_loader.h"

namespace tidal::sim {

// job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,
// end_time,duration,queue; times are "YYYY-MM-DD HH:MM:SS". A job of gpu_num
// GPUs over node_num nodes becomes node_num pods of gpu_num/node_num GPUs
// (SplitIntoPods when that does not divide); it runs `duration` seconds.
// Group: vc. CPU jobs (gpu_num 0) are counted in skipped_cpu_only; jobs with
// no start_time (cancelled while queued) in skipped_never_ran.
StatusOr<TraceJobs> LoadHeliosTrace(const std::string& path, const TraceOptions& options);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_HELIOS_TRACE_LOADER_H_
