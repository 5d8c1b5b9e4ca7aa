// Self-contained HTML reports: inline SVG charts drawn here, no scripts, no
// external fonts or styles, so a report opens offline.
#ifndef TIDAL_SIM_REPORT_H_
#define TIDAL_SIM_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simulator.h"

namespace tidal::sim {

// DIR/report.html of one run: the summary tables and the charts (GPUs by
// workload kind; loans and returns; per service load against capacity and
// modelled P99 against target, with missed minutes marked and cold-start
// misses set apart; training queue length).
std::string RenderReport(const SimResult& result, const std::string& title);

// One run for `tidal sim compare`: its label (the directory) and summary.json.
struct ComparedRun {
  std::string label;
  nlohmann::json summary;
};

// The metrics compared side by side, as (section, key) pairs of summary.json.
const std::vector<std::pair<std::string, std::string>>& ComparedMetrics();

// A plain-text table, one row per metric, one column per run.
std::string RenderComparisonText(const std::vector<ComparedRun>& runs);
// The same table as a self-contained HTML page with a bar chart per metric.
std::string RenderComparisonHtml(const std::vector<ComparedRun>& runs);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_REPORT_H_
