#include "sim/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tidal::sim {
namespace {

constexpr int kWidth = 900;
constexpr int kHeight = 220;
constexpr int kLeft = 60;
constexpr int kRight = 20;
constexpr int kTop = 28;
constexpr int kBottom = 30;
constexpr size_t kMaxPoints = 900;

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Bucketed to at most kMaxPoints, keeping each bucket's maximum so that short
// peaks (and missed minutes) stay visible.
std::vector<double> Reduce(const std::vector<double>& v, size_t buckets) {
  if (v.size() <= buckets) return v;
  std::vector<double> out(buckets, -std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t b = i * buckets / v.size();
    out[b] = std::max(out[b], v[i]);
  }
  return out;
}

struct Line {
  std::string label;
  std::string color;
  const std::vector<double>* values;
  bool dashed = false;
  bool area = false;  // stacked on the previous area lines
};

std::string FormatHours(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.1f} d", s / 86400);
  if (s >= 3 * 3600) return fmt::format("{:.0f} h", s / 3600);
  return fmt::format("{:.0f} min", s / 60);
}

std::string FormatValue(double v) {
  if (std::abs(v) >= 1e6) return fmt::format("{:.1f}M", v / 1e6);
  if (std::abs(v) >= 1e4) return fmt::format("{:.0f}k", v / 1e3);
  if (std::abs(v) >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

// A line chart over x = time in seconds. Marks (0/1 per point) shade columns.
std::string Chart(const std::string& title, const std::vector<double>& t_s, std::vector<Line> lines,
                  const std::string& y_label,
                  const std::vector<std::pair<const std::vector<double>*, std::string>>& marks = {}) {
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\"><title>{}</title>",
      kWidth, kHeight, kWidth, kHeight, Escape(title));
  svg += fmt::format("<text x=\"{}\" y=\"16\" class=\"t\">{}</text>", kLeft, Escape(title));
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  if (t_s.empty()) return svg + "<text x=\"60\" y=\"100\">no samples</text></svg>";
  const size_t n = std::min(t_s.size(), kMaxPoints);
  const std::vector<double> t = Reduce(t_s, n);
  // Stack area lines.
  std::vector<std::vector<double>> values;
  std::vector<double> base(n, 0.0);
  std::vector<std::vector<double>> bases;
  for (const Line& l : lines) {
    std::vector<double> v = Reduce(*l.values, n);
    v.resize(n, 0.0);
    bases.push_back(l.area ? base : std::vector<double>(n, 0.0));
    if (l.area)
      for (size_t i = 0; i < n; ++i) v[i] += base[i];
    if (l.area) base = v;
    values.push_back(std::move(v));
  }
  double y_max = 1;
  for (const auto& v : values)
    for (double x : v)
      if (std::isfinite(x)) y_max = std::max(y_max, x);
  y_max *= 1.05;
  const double t0 = t.front();
  const double t1 = std::max(t.back(), t0 + 1);
  auto X = [&](size_t i) { return kLeft + plot_w * (t[i] - t0) / (t1 - t0); };
  auto Y = [&](double v) { return kTop + plot_h * (1 - std::clamp(v, 0.0, y_max) / y_max); };
  // Marks first, under the lines.
  for (const auto& [flags, color] : marks) {
    const std::vector<double> f = Reduce(*flags, n);
    const double w = std::max(1.0, plot_w / static_cast<double>(n));
    for (size_t i = 0; i < f.size(); ++i)
      if (f[i] > 0)
        svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\" "
                           "opacity=\"0.35\"/>",
                           X(i), kTop, w, plot_h, color);
  }
  // Axes and grid.
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"ax\"/>", kLeft,
                     kTop + plot_h, kWidth - kRight, kTop + plot_h);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"ax\"/>", kLeft, kTop,
                     kLeft, kTop + plot_h);
  for (int k = 0; k <= 4; ++k) {
    const double v = y_max * k / 4;
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" class=\"g\"/>", kLeft,
                       Y(v), kWidth - kRight, Y(v));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"yl\">{}</text>", kLeft - 4, Y(v) + 4,
                       FormatValue(v));
  }
  for (int k = 0; k <= 6; ++k) {
    const double tv = t0 + (t1 - t0) * k / 6;
    const double x = kLeft + plot_w * k / 6;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"xl\">{}</text>", x, kHeight - 10,
                       FormatHours(tv));
  }
  svg += fmt::format("<text x=\"12\" y=\"{}\" class=\"yt\" transform=\"rotate(-90 12 {})\">{}</text>",
                     kTop + plot_h / 2, kTop + plot_h / 2, Escape(y_label));
  // Areas, then lines.
  for (size_t li = 0; li < lines.size(); ++li) {
    const Line& l = lines[li];
    const auto& v = values[li];
    std::string pts;
    for (size_t i = 0; i < n; ++i)
      pts += fmt::format("{:.1f},{:.1f} ", X(i), Y(std::isfinite(v[i]) ? v[i] : y_max));
    if (l.area) {
      std::string poly = pts;
      for (size_t i = n; i-- > 0;) poly += fmt::format("{:.1f},{:.1f} ", X(i), Y(bases[li][i]));
      svg += fmt::format("<polygon points=\"{}\" fill=\"{}\" opacity=\"0.75\"/>", poly, l.color);
    } else {
      svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{}/>",
                         pts, l.color, l.dashed ? " stroke-dasharray=\"5 3\"" : "");
    }
  }
  // Legend.
  double lx = kLeft + 260;
  for (const Line& l : lines) {
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"7\" width=\"10\" height=\"10\" fill=\"{}\"/>", lx, l.color);
    svg += fmt::format("<text x=\"{:.0f}\" y=\"16\" class=\"lg\">{}</text>", lx + 13, Escape(l.label));
    lx += 20 + 7.0 * static_cast<double>(l.label.size());
  }
  for (const auto& [flags, color] : marks) {
    (void)flags;
    const std::string label = color == "#d62728" ? "SLO miss" : "miss while scaling up (cold start)";
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"7\" width=\"10\" height=\"10\" fill=\"{}\" opacity=\"0.5\"/>",
                       lx, color);
    svg += fmt::format("<text x=\"{:.0f}\" y=\"16\" class=\"lg\">{}</text>", lx + 13, label);
    lx += 20 + 7.0 * static_cast<double>(label.size());
  }
  return svg + "</svg>\n";
}

const char* kStyle =
    "<style>body{font-family:sans-serif;margin:24px;color:#222;max-width:960px}"
    "table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
    "svg{display:block;margin:8px 0 18px}.t{font-size:13px;font-weight:bold}.ax{stroke:#444}"
    ".g{stroke:#ddd}.yl{font-size:10px;text-anchor:end}.xl{font-size:10px;text-anchor:middle}"
    ".yt{font-size:11px;text-anchor:middle}.lg{font-size:11px}.bad{color:#b00}</style>";

std::string JsonValueText(const nlohmann::json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::floor(d) && std::abs(d) < 1e12) return fmt::format("{:.0f}", d);
    return fmt::format("{:.4g}", d);
  }
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string SummaryTables(const nlohmann::ordered_json& j) {
  std::string html;
  html += "<table><tr><th>run</th><th></th></tr>";
  for (const char* k : {"policy", "colocation", "sim_duration_s", "sim_wall_s", "seed"})
    html += fmt::format("<tr><td>{}</td><td>{}</td></tr>", k, Escape(JsonValueText(j[k])));
  html += "</table>";
  for (const char* section :
       {"training", "inference", "batch_inference", "debug", "cluster", "scheduler"}) {
    html += fmt::format("<table><tr><th>{}</th><th></th></tr>", section);
    for (const auto& [k, v] : j[section].items())
      html += fmt::format("<tr><td>{}</td><td>{}</td></tr>", k, Escape(JsonValueText(v)));
    html += "</table>";
  }
  return html;
}

}  // namespace

std::string RenderReport(const SimResult& result, const std::string& title) {
  const TimeSeries& s = result.series;
  const nlohmann::ordered_json j = result.summary.ToJson();
  std::string html = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>" + Escape(title) +
                     "</title>" + kStyle + "</head><body>";
  html += "<h1>" + Escape(title) + "</h1>";
  html += fmt::format(
      "<p>Co-location mode <b>{}</b>, policy <b>{}</b>: {} simulated over {} GPUs. "
      "SLO attainment {:.4f}, scale-up success {:.4f}, GPU allocation ratio {:.3f}, training mean "
      "queue wait {:.0f} s.</p>",
      Escape(result.summary.colocation), Escape(result.summary.policy),
      FormatHours(result.summary.sim_duration_s), s.total_gpus, result.summary.inference.slo_attainment,
      result.summary.inference.scale_up_success_rate, result.summary.cluster.gpu_allocation_ratio,
      result.summary.training.queue_wait_mean_s);

  std::vector<double> total(s.t_s.size(), static_cast<double>(s.total_gpus));
  html += "<h2>GPUs by workload kind</h2>";
  html += Chart("GPUs held (running or terminating)", s.t_s,
                {{"training", "#1f77b4", &s.gpus_by_kind[0], false, true},
                 {"inference", "#2ca02c", &s.gpus_by_kind[1], false, true},
                 {"batch", "#9467bd", &s.gpus_by_kind[2], false, true},
                 {"debug", "#ff7f0e", &s.gpus_by_kind[3], false, true},
                 {"cluster", "#444", &total, true, false}},
                "GPUs");
  html += "<h2>Loans and returns of the shared pool</h2>";
  html += Chart("Shared-pool GPUs lent to training", s.t_s, {{"lent GPUs", "#17becf", &s.lent_gpus}},
                "GPUs");
  html += Chart("Nodes lent and returned per sample", s.t_s,
                {{"lent", "#17becf", &s.loans}, {"returned", "#d62728", &s.returns}}, "nodes");
  html += "<h2>Inference: load against capacity, P99 against target</h2>";
  html += "<p>Red columns: minutes whose modelled P99 missed the target (or whose load was not "
          "served). Orange: misses while a scale-up was still starting replicas, i.e. minutes lost "
          "to cold starts.</p>";
  for (const TimeSeries::Service& sv : s.services) {
    html += Chart(sv.name + ": load and ready capacity", s.t_s,
                  {{"load (req/s)", "#1f77b4", &sv.rps}, {"capacity (req/s)", "#2ca02c", &sv.capacity_rps}},
                  "req/s", {{&sv.slo_miss, "#d62728"}, {&sv.cold_start_miss, "#ff7f0e"}});
    std::vector<double> target(sv.p99_ms.size(), sv.target_p99_ms);
    std::vector<double> p99 = sv.p99_ms;
    const double cap = sv.target_p99_ms > 0 ? sv.target_p99_ms * 3 : 1000;
    for (double& v : p99)
      if (v < 0 || v > cap) v = cap;  // unserved or off the scale: drawn at the top
    html += Chart(sv.name + ": modelled P99 (ms), capped at 3x target", s.t_s,
                  {{"P99", "#9467bd", &p99}, {"target", "#d62728", &target, true}}, "ms",
                  {{&sv.cold_start_miss, "#ff7f0e"}});
  }
  html += "<h2>Training queue</h2>";
  html += Chart("Pending training jobs", s.t_s, {{"queued", "#8c564b", &s.training_queue}}, "jobs");
  html += "<h2>Summary</h2>" + SummaryTables(j);
  html += "</body></html>\n";
  return html;
}

const std::vector<std::pair<std::string, std::string>>& ComparedMetrics() {
  static const std::vector<std::pair<std::string, std::string>> kMetrics = {
      {"", "colocation"},
      {"inference", "slo_attainment"},
      {"inference", "scale_up_success_rate"},
      {"inference", "latency_p99_ms"},
      {"inference", "scale_ups"},
      {"inference", "time_to_capacity_p99_s"},
      {"training", "jobs"},
      {"training", "completed"},
      {"training", "queue_wait_mean_s"},
      {"training", "queue_wait_p95_s"},
      {"training", "jct_mean_s"},
      {"training", "gang_partial_starts"},
      {"training", "preemptions"},
      {"training", "lost_gpu_hours"},
      {"training", "recovery_time_p95_s"},
      {"batch_inference", "deadline_met_rate"},
      {"debug", "queue_wait_p95_s"},
      {"cluster", "gpu_allocation_ratio"},
      {"cluster", "borrowed_gpu_hours"},
      {"cluster", "reclaims"},
      {"cluster", "reclaim_latency_p95_s"},
      {"scheduler", "cycles"},
      {"scheduler", "cycle_p99_ms"},
  };
  return kMetrics;
}

namespace {
nlohmann::json Lookup(const nlohmann::json& summary, const std::string& section,
                      const std::string& key) {
  const nlohmann::json* node = &summary;
  if (!section.empty()) {
    if (!node->contains(section)) return nullptr;
    node = &(*node)[section];
  }
  if (!node->contains(key)) return nullptr;
  return (*node)[key];
}
std::string MetricName(const std::pair<std::string, std::string>& m) {
  return m.first.empty() ? m.second : m.first + "." + m.second;
}
}  // namespace

std::string RenderComparisonText(const std::vector<ComparedRun>& runs) {
  size_t name_w = 6;
  for (const auto& m : ComparedMetrics()) name_w = std::max(name_w, MetricName(m).size());
  std::vector<size_t> col_w;
  for (const ComparedRun& r : runs) col_w.push_back(std::max<size_t>(12, r.label.size()));
  std::string out = fmt::format("{:<{}}", "metric", name_w);
  for (size_t i = 0; i < runs.size(); ++i) out += fmt::format("  {:>{}}", runs[i].label, col_w[i]);
  out += "\n";
  for (const auto& m : ComparedMetrics()) {
    out += fmt::format("{:<{}}", MetricName(m), name_w);
    for (size_t i = 0; i < runs.size(); ++i) {
      const nlohmann::json v = Lookup(runs[i].summary, m.first, m.second);
      out += fmt::format("  {:>{}}", v.is_null() ? "-" : JsonValueText(v), col_w[i]);
    }
    out += "\n";
  }
  return out;
}

std::string RenderComparisonHtml(const std::vector<ComparedRun>& runs) {
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
  std::string html = std::string("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Tidal "
                                 "simulation comparison</title>") +
                     kStyle + "</head><body><h1>Simulation comparison</h1><table><tr><th>metric</th>";
  for (const ComparedRun& r : runs) html += "<th>" + Escape(r.label) + "</th>";
  html += "</tr>";
  for (const auto& m : ComparedMetrics()) {
    html += "<tr><td>" + Escape(MetricName(m)) + "</td>";
    for (const ComparedRun& r : runs) {
      const nlohmann::json v = Lookup(r.summary, m.first, m.second);
      html += "<td>" + Escape(v.is_null() ? "-" : JsonValueText(v)) + "</td>";
    }
    html += "</tr>";
  }
  html += "</table>";
  // One small bar chart per numeric metric.
  for (const auto& m : ComparedMetrics()) {
    std::vector<double> values;
    for (const ComparedRun& r : runs) {
      const nlohmann::json v = Lookup(r.summary, m.first, m.second);
      values.push_back(v.is_number() ? v.get<double>() : std::nan(""));
    }
    if (std::all_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) continue;
    double vmax = 0;
    for (double v : values)
      if (std::isfinite(v)) vmax = std::max(vmax, std::abs(v));
    if (vmax <= 0) vmax = 1;
    const int bar_h = 16;
    const int h = 24 + static_cast<int>(runs.size()) * (bar_h + 4);
    html += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"620\" height=\"{}\">", h);
    html += fmt::format("<text x=\"0\" y=\"14\" class=\"t\">{}</text>", Escape(MetricName(m)));
    for (size_t i = 0; i < runs.size(); ++i) {
      const double v = std::isfinite(values[i]) ? values[i] : 0;
      const double w = 400 * std::abs(v) / vmax;
      const int y = 22 + static_cast<int>(i) * (bar_h + 4);
      html += fmt::format("<text x=\"0\" y=\"{}\" class=\"lg\">{}</text>", y + 12,
                          Escape(runs[i].label.substr(0, 22)));
      html += fmt::format("<rect x=\"150\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>", y, w,
                          bar_h, kColors[i % 6]);
      html += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"lg\">{}</text>", 155 + w, y + 12,
                          std::isfinite(values[i]) ? FormatValue(values[i]) : "-");
    }
    html += "</svg>\n";
  }
  html += "</body></html>\n";
  return html;
}

}  // namespace tidal::sim
