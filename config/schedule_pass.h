// One scheduling pass over loaded files, as `tidal schedule` and `tidal demo`
// run it: every workload of the workload file is submitted (at its
// submit_at_s), priorities are derived at the latest submit time, and the
// engine runs once on the resulting snapshot. No shared-pool node is lent in
// a single pass (there is no load history for the co-location planner), so
// training waits rather than borrows there.
#ifndef TIDAL_CONFIG_SCHEDULE_PASS_H_
#define TIDAL_CONFIG_SCHEDULE_PASS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "config/json_codec.h"
#include "core/common/status.h"
#include "core/model/decision.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"

namespace tidal::config {

struct SchedulePassResult {
  Snapshot snapshot;  // with derived priorities, as the engine saw it
  Decisions decisions;
};

// Errors: a workload no priority template applies to, or whose tier the
// template lacks.
StatusOr<SchedulePassResult> RunSchedulePass(const ClusterConfig& cluster, const PolicyConfig& policy,
                                             const std::vector<WorkloadSpec>& workloads);

// Readable tables: placements, preemptions, resizes, then every waiting or
// rejected workload with its reason, detail and estimated start, then each
// workload's priority derivation.
std::string RenderScheduleText(const SchedulePassResult& result);

// {"now_ms", "workloads": [...], "decisions": {...}}.
nlohmann::json ScheduleToJson(const SchedulePassResult& result);

// "inf-1:0-3,6 trn-rack-a-1:0-7": nodes with their GPU index ranges.
std::string FormatPods(const std::vector<PodPlacement>& pods, const Cluster& cluster);

// A delay as "now", "+45s", "+12m", "+3h05m" or "+2d04h".
std::string FormatDelay(Duration d);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_SCHEDULE_PASS_H_
