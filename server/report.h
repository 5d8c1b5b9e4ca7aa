// Usage and governance reports over a time range, per tenant and project,
// computed from the workload records (run intervals, preemptions, scale-ups)
// and the audit log (queue waits).
#ifndef TIDAL_SERVER_REPORT_H_
#define TIDAL_SERVER_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/percentile.h"

namespace tidal::server {

using ::tidal::Percentile;  // core/common/percentile.h: nearest rank, q in [0, 1]

// The report's rows as CSV: a header line and one line per row.
std::string ReportToCsv(const nlohmann::json& report);

// GPU-seconds of a run [start, end) that fall inside [from, to).
double OverlapGpuSeconds(int64_t start_ms, int64_t end_ms, int gpus, int64_t from_ms, int64_t to_ms);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_REPORT_H_
