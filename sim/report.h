// The simulator's HTML pages, report.html and compare.html. Each is one
// offline file: with the report bundle (web/dist/report.js, see
// sim/report_bundle.h) the run's data goes into the page as JSON and the
// inlined bundle draws it with the dashboard's chart code (web/src/charts.js);
// without it the charts are inline SVG drawn here, by the same rules
// (web/src/chart_math.js): rounded 1-2-5 ticks, one time unit per axis,
// spikes clipped at a quantile with the clip marked, "no loans" instead of
// an empty loan chart, fluid width, and comparison axes that do not start at
// zero.
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
// misses set apart; training queue length). `bundle_js` is the text of
// web/dist/report.js; empty: the SVG charts.
std::string RenderReport(const SimResult& result, const std::string& title,
                         const std::string& bundle_js = "");

// What report.js draws for one run (kind "report"): the samples, per
// service the load, capacity, P99 (null when unserved) and miss flags, and
// `has_loans` (false when nothing was lent, e.g. static co-location).
nlohmann::json ReportData(const SimResult& result, const std::string& title);

// One run for `tidal sim compare`: its label (the directory) and summary.json.
struct ComparedRun {
  std::string label;
  nlohmann::json summary;
};

// Which way a compared metric is better. A count that is neither good nor
// bad in itself (jobs, scale-ups, GPU-hours borrowed) is kNeither: the
// comparison marks no winner there.
enum class Better { kHigher, kLower, kNeither };

// One metric compared side by side: a (section, key) pair of summary.json
// (section "" for a top-level key) and which way it is better.
struct ComparedMetric {
  std::string section;
  std::string key;
  Better better = Better::kNeither;
};
const std::vector<ComparedMetric>& ComparedMetrics();

// The runs holding a metric's best value ("higher" or "lower" per
// `better`); none for kNeither, when fewer than two runs have a number, or
// when every run has the same one (no run is better).
std::vector<bool> BestRuns(Better better, const std::vector<double>& values);

// A plain-text table, one row per metric, one column per run.
// Aligned columns: metric names left, then which way is better ("higher",
// "lower" or "-"), then values right-aligned under their run's label, every
// number through FormatNumber, the best run's marked "*", and "-" where a
// run has none.
std::string RenderComparisonText(const std::vector<ComparedRun>& runs);

// The one number format of the console and the summary tables: whole numbers
// in full (13920, never 1.392e+04), others fixed with 4 decimals below 1,
// 2 below 1000 and 1 above, trailing zeros dropped. Never an exponent.
std::string FormatNumber(double v);
// The same table as a self-contained HTML page with a bar chart per metric
// (drawn by `bundle_js` when given, else SVG).
std::string RenderComparisonHtml(const std::vector<ComparedRun>& runs,
                                 const std::string& bundle_js = "");
// What report.js draws for a comparison (kind "compare"): the run labels
// and, per numeric metric, one value per run (null where a run lacks it)
// and `better`: "higher", "lower" or null.
nlohmann::json ComparisonData(const std::vector<ComparedRun>& runs);

// JSON text that is safe inside <script>: every "</" is written "<\/" (the
// same string to a JSON parser), so a workload named "</script>" cannot end
// the element.
std::string ScriptSafeJson(const nlohmann::json& j);

// The chart arithmetic of the SVG pages; web/src/chart_math.js has the same.
// The smallest 1, 2 or 5 times a power of ten that is >= x.
double NiceStep(double x);
// Multiples of a 1-2-5 step in [min, max], at most `max_ticks` of them.
std::vector<double> NiceTicks(double min, double max, int max_ticks, bool integer = false);
// One axis's tick labels: the decimals the step needs, the same on every
// tick (29.90 29.95 30.00), in k or M from 10^4 or 10^6.
std::vector<std::string> FormatTicks(const std::vector<double>& ticks);
// Ticks over [min_s, max_s] in one unit: "d" when the span holds 3 days,
// else "h" for 3 hours, "min" for 3 minutes, else "s".
struct TimeTicksResult {
  std::string unit;
  double unit_s = 1;
  std::vector<double> ticks_s;
};
TimeTicksResult TimeTicks(double min_s, double max_s, int max_ticks);
// The y axis top: the max, or with `clip_quantile` > 0 the quantile x 1.25
// when the max is more than twice the quantile (`clipped`), rounded up to a
// tick.
struct YRange {
  double max = 1;
  bool clipped = false;
};
YRange ComputeYRange(const std::vector<const std::vector<double>*>& series, double clip_quantile,
                     bool integer, int max_ticks);
// A comparison's value axis: the values' span padded by 15% each side,
// rounded out to ticks, from 0 only when the values reach near it.
struct CompareAxis {
  double min = 0;
  double max = 1;
};
CompareAxis CompareRange(const std::vector<double>& values);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_REPORT_H_
