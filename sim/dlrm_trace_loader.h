// Alibaba GPU-disaggregated DLRM inference instances
// (alibaba-dlrm-inference-v2025/disaggregated_DLRM_trace.csv; Yang et al.,
// NSDI'25): a month of inference replicas of 156 services, created and
// deleted as the services scaled.
#ifndef TIDAL_SIM_DLRM_TRACE_LOADER_H_
#define TIDAL_SIM_DLRM_TRACE_LOADER_H_

#include <string>

#include "core/common/status.h"
#include "sim/trace_loader.h"

namespace tidal::sim {

// instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,
// rdma_request,rdma_limit,memory_request,memory_limit,disk_request,disk_limit,
// max_instance_per_node,creation_time,scheduled_time,deletion_time. Each GPU
// instance (role HN) becomes one inference replica of gpu_request GPUs, group
// app_name. Times are seconds from the trace start; an empty creation or
// scheduled time means the instance existed before the trace (it arrives at
// 0), an empty deletion time that it outlived the trace (it runs to the
// latest time in the file). CPU instances (role CN, gpu_request 0) are
// counted in skipped_cpu_only.
StatusOr<TraceJobs> LoadDlrmInstances(const std::string& path, const TraceOptions& options);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_DLRM_TRACE_LOADER_H_
