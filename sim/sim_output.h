// Runs a simulation into an output directory: DIR/summary.json,
// DIR/events.jsonl, DIR/report.html and DIR/timeseries.csv (the report's
// samples, one row per sample interval). `report_bundle_js` is the text of
// web/dist/report.js (sim/report_bundle.h); empty: report.html has SVG charts.
#ifndef TIDAL_SIM_SIM_OUTPUT_H_
#define TIDAL_SIM_SIM_OUTPUT_H_

#include <string>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "sim/simulator.h"

namespace tidal::sim {

StatusOr<SimResult> RunToDirectory(const SimInput& input, const SimOptions& options,
                                   const std::string& out_dir, const std::string& report_bundle_js = "");

// DIR/summary.json, parsed.
StatusOr<nlohmann::json> ReadSummary(const std::string& dir);

std::string TimeSeriesCsv(const TimeSeries& series);

Status WriteFile(const std::string& path, const std::string& text);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_SIM_OUTPUT_H_
