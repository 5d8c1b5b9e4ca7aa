// The page writer of report.html and compare.html (sim/report.h): the data
// JSON a bundle draws, its escaping, the "no loans" state, and the SVG
// fallback's ticks, time axis, clipping and comparison axis.
#include "sim/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "sim/report_bundle.h"
#include "tests/support/agent_fixtures.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

// A synthetic 3-day run, one sample a minute: training GPUs ramp to 551
// (the old report ticked that at 551 x 1.05 / 4 = 145, 289, 434), a service
// whose P99 sits at 40 ms with one 6300 ms start-up spike, and loans when
// `lend` (else none, as in static mode).
SimResult ThreeDayRun(bool lend, const std::string& colocation = "reactive") {
  SimResult r;
  r.summary.colocation = colocation;
  r.summary.policy = "default";
  r.summary.sim_duration_s = 3 * 86400;
  TimeSeries& s = r.series;
  s.total_gpus = 600;
  const int n = 3 * 1440 + 1;
  TimeSeries::Service sv;
  sv.name = "chat";
  sv.target_p99_ms = 50;
  for (int i = 0; i < n; ++i) {
    s.t_s.push_back(60.0 * i);
    s.gpus_by_kind[0].push_back(551.0 * i / (n - 1));
    for (int k = 1; k < 4; ++k) s.gpus_by_kind[k].push_back(0);
    s.lent_gpus.push_back(lend && i > 100 && i < 200 ? 8 : 0);
    s.loans.push_back(lend && i == 101 ? 1 : 0);
    s.returns.push_back(lend && i == 200 ? 1 : 0);
    s.training_queue.push_back(i % 7);
    sv.rps.push_back(10 + i % 13);
    sv.capacity_rps.push_back(30);
    sv.p99_ms.push_back(i == 500 ? 6300 : 40);
    sv.ready.push_back(3);
    sv.desired.push_back(3);
    sv.slo_miss.push_back(i == 500 ? 1 : 0);
    sv.cold_start_miss.push_back(i == 500 ? 1 : 0);
  }
  s.services.push_back(sv);
  return r;
}

// Every substring between `open` and the next `close` (std::regex is far
// too slow on pages this size).
std::vector<std::string> Between(const std::string& html, const std::string& open, const std::string& close) {
  std::vector<std::string> out;
  for (size_t at = html.find(open); at != std::string::npos; at = html.find(open, at)) {
    at += open.size();
    const size_t end = html.find(close, at);
    if (end == std::string::npos) break;
    out.push_back(html.substr(at, end - at));
    at = end + close.size();
  }
  return out;
}

size_t Count(const std::string& html, const std::string& what) {
  size_t n = 0;
  for (size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + what.size())) ++n;
  return n;
}

// True when `step` is 1, 2 or 5 times a power of ten.
bool IsNiceStep(double step) {
  if (!(step > 0)) return false;
  const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  return std::abs(m - 1) < 1e-6 || std::abs(m - 2) < 1e-6 || std::abs(m - 5) < 1e-6;
}

// ---------- the page (these use only the old API, so they ran against the
// old renderer too, and failed there) ----------

TEST(ReportPageTest, FallbackYTicksAreRoundedSteps) {
  const std::string html = RenderReport(ThreeDayRun(true), "t");
  bool saw_gpu_chart = false;
  // Each SVG's y labels: equal 1-2-5 steps from 0.
  for (const std::string& svg : Between(html, "<svg", "</svg>")) {
    std::vector<double> ticks;
    for (const std::string& t : Between(svg, "class=\"yl\">", "<")) ticks.push_back(std::stod(t));
    if (ticks.size() < 2) continue;
    EXPECT_EQ(ticks.front(), 0) << svg.substr(0, 200);
    const double step = ticks[1] - ticks[0];
    EXPECT_TRUE(IsNiceStep(step)) << "step " << step << " in " << svg.substr(0, 200);
    for (size_t i = 1; i < ticks.size(); ++i) EXPECT_NEAR(ticks[i] - ticks[i - 1], step, 1e-9);
    // 551 GPUs: 551 / 4 = 138 -> step 200, top 600 (old: 145, 289, 434).
    if (svg.find("GPUs held") != std::string::npos) {
      saw_gpu_chart = true;
      EXPECT_EQ(ticks.back(), 600);
    }
  }
  EXPECT_TRUE(saw_gpu_chart);
}

TEST(ReportPageTest, FallbackTimeAxisHasOneUnit) {
  const std::string html = RenderReport(ThreeDayRun(true), "t");
  // 3 days: every axis ticks in days, 0 1 2 3, and says so once.
  const auto units = Between(html, "time since start (", ")");
  ASSERT_FALSE(units.empty());
  for (const std::string& u : units) EXPECT_EQ(u, "d");
  const std::string first_svg = Between(html, "<svg", "</svg>").at(0);
  EXPECT_EQ(Between(first_svg, "class=\"xl\">", "<"), (std::vector<std::string>{"0", "1", "2", "3"}));
}

TEST(ReportPageTest, FallbackClipsTheLatencySpikeAndSaysSo) {
  const std::string html = RenderReport(ThreeDayRun(true), "t");
  // P99 40 ms with one 6300 ms sample; with the 50 ms target the 0.95
  // quantile is 50, 6300 > 2 x 50: the top is 50 x 1.25 = 62.5 -> step
  // NiceStep(62.5 / 4) = 20 -> 80 ms.
  EXPECT_NE(html.find("y axis clipped at 80 ms"), std::string::npos);
  EXPECT_NE(html.find("class=\"clip\""), std::string::npos);
}

TEST(ReportPageTest, FallbackIsFluid) {
  const std::string html = RenderReport(ThreeDayRun(true), "t");
  EXPECT_EQ(html.find("width=\"900\""), std::string::npos);
  EXPECT_NE(html.find("viewBox=\"0 0 900"), std::string::npos);
}

TEST(ReportPageTest, StaticRunSaysNoLoans) {
  const std::string html = RenderReport(ThreeDayRun(false, "static"), "t");
  EXPECT_NE(html.find("No loans"), std::string::npos);
  EXPECT_EQ(html.find("Shared-pool GPUs lent to training"), std::string::npos);
  // With loans the charts are there.
  const std::string lent = RenderReport(ThreeDayRun(true), "t");
  EXPECT_EQ(lent.find("No loans"), std::string::npos);
  EXPECT_NE(lent.find("Shared-pool GPUs lent to training"), std::string::npos);
}

TEST(ComparePageTest, FallbackAxisDoesNotStartAtZeroForCloseValues) {
  std::vector<ComparedRun> runs = {{"reactive", {{"inference", {{"slo_attainment", 0.9934}}}}},
                                   {"predictive", {{"inference", {{"slo_attainment", 0.9997}}}}}};
  const std::string html = RenderComparisonHtml(runs);
  // Spread 0.0063, step NiceStep(0.0063 x 1.3 / 4) = 0.005: the axis runs
  // 0.99 .. 1.005, so the bars differ by 0.0063 / 0.015 = 42% of the width.
  EXPECT_NE(html.find("axis from 0.99, not 0"), std::string::npos) << html;
}

TEST(ComparePageTest, SaysWhichWayIsBetterAndMarksTheBestRun) {
  // Lost GPU-hours: lower is better, so predictive's 11.2 is the best of
  // 28.2 and 11.2; SLO attainment: higher is better, 0.9997 > 0.9934.
  std::vector<ComparedRun> runs = {
      {"reactive", {{"inference", {{"slo_attainment", 0.9934}}}, {"training", {{"lost_gpu_hours", 28.2}}}}},
      {"predictive", {{"inference", {{"slo_attainment", 0.9997}}}, {"training", {{"lost_gpu_hours", 11.2}}}}}};
  const std::string html = RenderComparisonHtml(runs);
  EXPECT_NE(html.find("<td>training.lost_gpu_hours</td><td>lower</td><td>28.2</td>"
                      "<td class=\"best\"><strong>11.2</strong></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>inference.slo_attainment</td><td>higher</td><td>0.9934</td>"
                      "<td class=\"best\"><strong>0.9997</strong></td>"),
            std::string::npos);
  EXPECT_NE(html.find("<span>lower is better</span>"), std::string::npos);
  const nlohmann::json d = ComparisonData(runs);
  ASSERT_EQ(d["metrics"].size(), 2u);
  EXPECT_EQ(d["metrics"][0]["better"], "higher");
  EXPECT_EQ(d["metrics"][1]["better"], "lower");
}

TEST(ComparePageTest, BestRunsNeedTwoDifferentNumbersAndADirection) {
  const double nan = std::nan("");
  EXPECT_EQ(BestRuns(Better::kLower, {3, 1, 1}), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(BestRuns(Better::kHigher, {3, 1, nan}), (std::vector<bool>{true, false, false}));
  // Nothing to beat: one number, equal numbers, or no direction.
  EXPECT_EQ(BestRuns(Better::kHigher, {3, nan}), (std::vector<bool>{false, false}));
  EXPECT_EQ(BestRuns(Better::kLower, {2, 2}), (std::vector<bool>{false, false}));
  EXPECT_EQ(BestRuns(Better::kNeither, {3, 1}), (std::vector<bool>{false, false}));
}

// ---------- the arithmetic ----------

TEST(ChartMathTest, NiceTicks) {
  EXPECT_EQ(NiceStep(138), 200);
  EXPECT_EQ(NiceStep(0.0625), 0.1);
  EXPECT_EQ(NiceTicks(0, 600, 5), (std::vector<double>{0, 200, 400, 600}));
  EXPECT_EQ(NiceTicks(0, 25, 6), (std::vector<double>{0, 5, 10, 15, 20, 25}));
  // 0 .. 1.05 at 6 ticks: 1.05 / 5 = 0.21 -> 0.5: 0, 0.5, 1 (not 0.2625).
  EXPECT_EQ(NiceTicks(0, 1.05, 6), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(NiceTicks(0, 2, 6, /*integer=*/true), (std::vector<double>{0, 1, 2}));
}

TEST(ChartMathTest, TickLabelsCarryTheDigitsOfTheirStep) {
  // Step 0.05: two decimals on every tick, so 29.95 does not read 29.9.
  EXPECT_EQ(FormatTicks({29.9, 29.95, 30, 30.05}), (std::vector<std::string>{"29.90", "29.95", "30.00", "30.05"}));
  EXPECT_EQ(FormatTicks({0, 200, 400}), (std::vector<std::string>{"0", "200", "400"}));
  EXPECT_EQ(FormatTicks({0, 5000, 10000, 15000}), (std::vector<std::string>{"0", "5k", "10k", "15k"}));
  EXPECT_EQ(FormatTicks({10000, 12500, 15000}), (std::vector<std::string>{"10.0k", "12.5k", "15.0k"}));
}

TEST(ChartMathTest, YRangeClipsSpikes) {
  std::vector<double> v(99, 40.0);
  v.push_back(6300);
  // 0.99 quantile (nearest rank) 40; 6300 > 80: top 40 x 1.25 = 50 -> 50.
  const YRange r = ComputeYRange({&v}, 0.99, false, 6);
  EXPECT_TRUE(r.clipped);
  EXPECT_EQ(r.max, 50);
  EXPECT_FALSE(ComputeYRange({&v}, 0, false, 6).clipped);
  // 551 at 5 ticks: 551 / 4 = 137.75 -> step 200 -> 600.
  std::vector<double> g = {0, 551};
  EXPECT_EQ(ComputeYRange({&g}, 0, true, 5).max, 600);
}

TEST(ChartMathTest, TimeTicksUseOneUnit) {
  EXPECT_EQ(TimeTicks(0, 3 * 86400, 8).unit, "d");
  EXPECT_EQ(TimeTicks(0, 10 * 3600, 8).unit, "h");
  // 10 h / 7 = 1.4 h -> 2 h steps.
  EXPECT_EQ(TimeTicks(0, 10 * 3600, 8).ticks_s, (std::vector<double>{0, 7200, 14400, 21600, 28800, 36000}));
  EXPECT_EQ(TimeTicks(0, 40 * 60, 8).unit, "min");
}

TEST(ChartMathTest, CompareRange) {
  const CompareAxis a = CompareRange({0.9934, 0.9997});
  EXPECT_DOUBLE_EQ(a.min, 0.99);
  EXPECT_DOUBLE_EQ(a.max, 1.005);
  EXPECT_EQ(CompareRange({0, 12, 30}).min, 0);
  // Equal values: nothing to compare, the bars stand on 0 (1716 x 1.15 =
  // 1973 -> step 500 -> 2000).
  EXPECT_EQ(CompareRange({1716, 1716}).min, 0);
  EXPECT_EQ(CompareRange({1716, 1716}).max, 2000);
}

// ---------- the data a bundle draws ----------

TEST(ReportDataTest, JsonInTheScriptIsEscaped) {
  SimResult r = ThreeDayRun(true);
  r.series.services[0].name = "</script><script>alert(1)</script>";
  const std::string html = RenderReport(r, "t", "/*bundle*/console.log('</script>')");
  // Two script elements (data, bundle): two closing tags, nothing else closes.
  EXPECT_EQ(Count(html, "</script>"), 2u);
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos);
  const size_t open = html.find("<script type=\"application/json\" id=\"tidal-data\">");
  ASSERT_NE(open, std::string::npos);
  const size_t body = html.find('>', open) + 1;
  const std::string text = html.substr(body, html.find("</script>", body) - body);
  const nlohmann::json d = nlohmann::json::parse(text);
  EXPECT_EQ(d["services"][0]["name"], "</script><script>alert(1)</script>");
  EXPECT_EQ(d["kind"], "report");
  // The bundle is in the page after the data, its "</script>" escaped.
  EXPECT_NE(html.find("<script>/*bundle*/console.log('<\\/script>')</script>"), std::string::npos);
  // A bundle page has no SVG charts: the bundle draws them.
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("id=\"charts\""), std::string::npos);
}

TEST(ReportDataTest, StaticRunHasNoLoans) {
  // A real static run: the shared pool is never lent.
  SimInput in = testing::SmallSimInput(1, 1, 1);
  in.workloads.push_back(testing::SimService(in, "chat", 10, 16, milliseconds(1000), seconds(60)));
  in.workloads.push_back(testing::SimTraining(in, "t", 2, 8, 3600, 0, seconds(600)));
  auto load = ParseLoadCsv("time_s,service,rps\n0,chat,5\n", "load.csv");
  ASSERT_TRUE(load.ok());
  in.load = *load;
  SimOptions o;
  o.end_s = 3600;
  o.colocation = ColocationMode::kStatic;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json d = ReportData(*r, "t");
  EXPECT_EQ(d["colocation"], "static");
  EXPECT_EQ(d["has_loans"], false);
  EXPECT_EQ(d["services"][0]["name"], "chat");
  EXPECT_EQ(d["t_s"].size(), r->series.t_s.size());
  EXPECT_EQ(ReportData(ThreeDayRun(true), "t")["has_loans"], true);
}

TEST(ReportDataTest, UnservedP99IsNull) {
  SimResult r = ThreeDayRun(true);
  r.series.services[0].p99_ms[3] = -1;
  EXPECT_TRUE(ReportData(r, "t")["services"][0]["p99_ms"][3].is_null());
}

TEST(ReportDataTest, ComparisonDataHasNumericMetricsOnly) {
  std::vector<ComparedRun> runs = {
      {"static", {{"colocation", "static"}, {"inference", {{"slo_attainment", 0.9934}}}}},
      {"predictive", {{"colocation", "predictive"}}}};
  const nlohmann::json d = ComparisonData(runs);
  EXPECT_EQ(d["kind"], "compare");
  EXPECT_EQ(d["runs"], nlohmann::json({"static", "predictive"}));
  ASSERT_EQ(d["metrics"].size(), 1u);
  EXPECT_EQ(d["metrics"][0]["name"], "inference.slo_attainment");
  EXPECT_TRUE(d["metrics"][0]["values"][1].is_null());
  const std::string html = RenderComparisonHtml(runs, "/*bundle*/");
  EXPECT_NE(html.find("id=\"tidal-data\""), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
}

// ---------- finding the bundle ----------

TEST(ReportBundleTest, FoundInTheSourceTreeAboveTheBinaryOrByWebDir) {
  const std::filesystem::path dir = testing::FreshTempDir("tidal", "report_bundle");
  std::filesystem::create_directories(dir / "web" / "dist");
  std::filesystem::create_directories(dir / "build" / "dev");
  const std::string exe = (dir / "build" / "dev" / "tidal").string();
  std::string note;
  auto none = LoadReportBundle("", exe, &note);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
  EXPECT_NE(note.find("npm run build"), std::string::npos);
  EXPECT_EQ(LoadReportBundle((dir / "nowhere").string(), exe, nullptr).status().code(),
            StatusCode::kInvalidArgument);
  std::ofstream(dir / "web" / "dist" / "report.js") << "/*js*/";
  EXPECT_EQ(FindReportBundle("", exe), (dir / "web" / "dist" / "report.js").string());
  EXPECT_EQ(*LoadReportBundle("", exe, nullptr), "/*js*/");
  EXPECT_EQ(*LoadReportBundle((dir / "web" / "dist").string(), "", nullptr), "/*js*/");
  std::filesystem::remove_all(dir);
}

TEST(CompareTextTest, OneNumberFormatAndAlignedColumnsMatchTheGolden) {
  // Values as the old table printed them: 13920.4 as "1.392e+04" next to
  // "4021", and a long label pushed its values out from under the header.
  nlohmann::json a = {{"colocation", "static"},
                      {"inference", {{"slo_attainment", 0.99337}, {"latency_p99_ms", 13920.44},
                                     {"scale_ups", 4021}}},
                      {"training", {{"jobs", 512}, {"queue_wait_mean_s", 1234567.891}}},
                      {"cluster", {{"gpu_allocation_ratio", 0.5}}}};
  nlohmann::json b = {{"colocation", "predictive"},
                      {"inference", {{"slo_attainment", nullptr}, {"latency_p99_ms", 95.126},
                                     {"scale_ups", 0}}},
                      {"training", {{"jobs", 512}, {"queue_wait_mean_s", 25.5}}},
                      {"cluster", {{"gpu_allocation_ratio", 0.12345678}}}};
  const std::string text =
      RenderComparisonText({{"static", a}, {"predictive-with-a-long-label", b}});
  const std::string golden = testing::SourceDir() + "/tests/sim/golden/compare.txt";
  EXPECT_EQ(text, testing::ReadWholeFile(golden))
      << "to accept a deliberate change, write this to " << golden << ":\n" << text;
  EXPECT_EQ(text.find("e+"), std::string::npos);
  // Every row as wide as the header: the columns line up. The last line is
  // the footnote on the best-value mark.
  const std::string table = text.substr(0, text.rfind('\n', text.size() - 2) + 1);
  EXPECT_EQ(text.substr(table.size()), "* the best value where one way is better\n");
  size_t start = 0, width = table.find('\n');
  for (size_t end = table.find('\n'); end != std::string::npos; end = table.find('\n', start)) {
    EXPECT_EQ(end - start, width) << table.substr(start, end - start);
    start = end + 1;
  }
}

TEST(CompareTextTest, FormatNumberNeverUsesAnExponent) {
  EXPECT_EQ(FormatNumber(13920), "13920");
  EXPECT_EQ(FormatNumber(13920.44), "13920.4");
  EXPECT_EQ(FormatNumber(95.126), "95.13");  // 2 decimals from 1 to 1000
  EXPECT_EQ(FormatNumber(0.99337), "0.9934");
  EXPECT_EQ(FormatNumber(0.5), "0.5");
  EXPECT_EQ(FormatNumber(-0.00001), "0");
  EXPECT_EQ(FormatNumber(1e20), "100000000000000000000");
  EXPECT_EQ(FormatNumber(NAN), "-");
}

}  // namespace
}  // namespace tidal::sim
