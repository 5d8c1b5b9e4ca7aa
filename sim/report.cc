#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tidal::sim {

// ---------- chart arithmetic (the rules of web/src/chart_math.js) ----------

double NiceStep(double x) {
  if (!(x > 0) || !std::isfinite(x)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x * (1 - 1e-9)) return m * p;
  return 10 * p;
}

namespace {
// k * step without the float noise (0.30000000000000004 -> 0.3).
double Clean(double v, double step) {
  const int digits = std::clamp(static_cast<int>(-std::floor(std::log10(step))) + 1, 0, 12);
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale + 0.0;  // + 0.0: -0 becomes 0 (no "-0" tick)
}
}  // namespace

std::vector<double> NiceTicks(double min, double max, int max_ticks, bool integer) {
  if (!(max > min)) return {min};
  double step = NiceStep((max - min) / std::max(1, max_ticks - 1));
  if (integer) step = std::max(1.0, step);
  std::vector<double> out;
  for (double k = std::ceil(min / step - 1e-9); k * step <= max + step * 1e-9; ++k)
    out.push_back(Clean(k * step, step));
  return out;
}

std::vector<std::string> FormatTicks(const std::vector<double>& ticks) {
  std::vector<std::string> out;
  if (ticks.empty()) return out;
  const double step = ticks.size() > 1 ? std::abs(ticks[1] - ticks[0]) : (std::abs(ticks[0]) > 0 ? std::abs(ticks[0]) : 1);
  double top = 0;
  for (double v : ticks) top = std::max(top, std::abs(v));
  const double div = top >= 1e6 ? 1e6 : top >= 1e4 ? 1e3 : 1;
  const char* suffix = top >= 1e6 ? "M" : top >= 1e4 ? "k" : "";
  const double s = step / div;
  // The fewest decimals that write the step exactly (2.5 -> 1, 0.05 -> 2).
  int decimals = 0;
  while (decimals < 10 && std::abs(std::round(s * std::pow(10, decimals)) - s * std::pow(10, decimals)) >
                              1e-6 * std::pow(10, decimals))
    ++decimals;
  for (double v : ticks) out.push_back(v == 0 ? "0" : fmt::format("{:.{}f}{}", v / div, decimals, suffix));
  return out;
}

TimeTicksResult TimeTicks(double min_s, double max_s, int max_ticks) {
  struct Unit {
    const char* name;
    double s;
    std::vector<double> steps;
  };
  static const Unit kUnits[] = {{"d", 86400, {1, 2, 5, 10, 20, 50, 100}},
                                {"h", 3600, {1, 2, 3, 6, 12}},
                                {"min", 60, {1, 2, 5, 10, 15, 30}},
                                {"s", 1, {1, 2, 5, 10, 15, 30}}};
  const double span_s = max_s - min_s;
  const Unit* unit = &kUnits[3];
  for (const Unit& u : kUnits) {
    if (span_s >= 3 * u.s) {
      unit = &u;
      break;
    }
  }
  const double want = span_s / unit->s / std::max(1, max_ticks - 1);
  double step = NiceStep(want);
  for (double s : unit->steps) {
    if (s >= want) {
      step = s;
      break;
    }
  }
  step *= unit->s;
  TimeTicksResult r{unit->name, unit->s, {}};
  for (double k = std::ceil(min_s / step - 1e-9); k * step <= max_s + 1e-9; ++k)
    r.ticks_s.push_back(k * step + 0.0);
  return r;
}

YRange ComputeYRange(const std::vector<const std::vector<double>*>& series, double clip_quantile,
                     bool integer, int max_ticks) {
  std::vector<double> all;
  for (const std::vector<double>* s : series)
    for (double v : *s)
      if (std::isfinite(v)) all.push_back(v);
  YRange r;
  if (all.empty()) return r;
  double top = std::max(0.0, *std::max_element(all.begin(), all.end()));
  if (clip_quantile > 0) {
    std::sort(all.begin(), all.end());
    // Nearest rank, as chart_math.js's quantile.
    const size_t i = std::min(all.size() - 1, static_cast<size_t>(std::floor(clip_quantile * (all.size() - 1))));
    const double q = all[i];
    if (q > 0 && top > 2 * q) {
      top = q * 1.25;
      r.clipped = true;
    }
  }
  if (!(top > 0)) top = 1;
  double step = NiceStep(top / std::max(1, max_ticks - 1));
  if (integer) step = std::max(1.0, step);
  r.max = Clean(std::ceil(top / step - 1e-9) * step, step);
  return r;
}

CompareAxis CompareRange(const std::vector<double>& values) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (!std::isfinite(lo)) return {};
  if (lo == hi) {
    // All runs equal: no difference to show, so the bars stand on 0.
    const double a = std::min(0.0, lo);
    const double b = hi > 0 ? hi : (lo == 0 ? 1 : 0);
    const double step = NiceStep((b - a) / 4);
    return {Clean(std::floor(a * 1.15 / step) * step, step), Clean(std::ceil(b * 1.15 / step) * step, step)};
  }
  const double spread = hi - lo;
  const double step = NiceStep(spread * 1.3 / 4);
  double min = std::floor((lo - spread * 0.15) / step) * step;
  const double max = std::ceil((hi + spread * 0.15) / step) * step;
  if (lo >= 0 && min < 0) min = 0;
  return {Clean(min, step), Clean(max, step)};
}

std::string ScriptSafeJson(const nlohmann::json& j) {
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    // "</" only occurs inside JSON strings, where "<\/" reads the same.
    if (text[i] == '<' && i + 1 < text.size() && text[i + 1] == '/') out += '\\';
  }
  return out;
}

namespace {

constexpr int kWidth = 900;
constexpr int kHeight = 220;
constexpr int kLeft = 56;
constexpr int kRight = 16;
constexpr int kTop = 10;
constexpr int kBottom = 40;
constexpr int kYTicks = 5;
constexpr int kXTicks = 8;
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

// Bucketed to at most `buckets`, keeping each bucket's maximum so that short
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

// The bundle inlined in <script>: a "</script" in it (only possible in a
// string, regex or comment, where "<\/" means the same) would end the
// element, so it is escaped like the data.
std::string ScriptSafeBundle(const std::string& js) {
  std::string out;
  out.reserve(js.size());
  for (size_t i = 0; i < js.size(); ++i) {
    out += js[i];
    if (js[i] == '<' && i + 7 < js.size() && js[i + 1] == '/') {
      std::string word = js.substr(i + 2, 6);
      std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
      if (word == "script") out += '\\';
    }
  }
  return out;
}

std::string FormatHours(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.1f} d", s / 86400);
  if (s >= 3 * 3600) return fmt::format("{:.0f} h", s / 3600);
  return fmt::format("{:.0f} min", s / 60);
}

// As chart_math.js's fmtNum: 12k, 1.5M, 0.25, 6300.
std::string FormatValue(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::abs(v);
  auto trim = [](std::string t) {
    if (t.size() > 2 && t.compare(t.size() - 2, 2, ".0") == 0) t.resize(t.size() - 2);
    return t;
  };
  if (a >= 1e6) return trim(fmt::format("{:.{}f}", v / 1e6, a >= 1e7 ? 0 : 1)) + "M";
  if (a >= 1e4) return trim(fmt::format("{:.{}f}", v / 1e3, a >= 1e5 ? 0 : 1)) + "k";
  if (v == std::floor(v)) return fmt::format("{:.0f}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return trim(fmt::format("{:.1f}", v));
  return fmt::format("{:.4g}", v);
}

struct Line {
  std::string label;
  std::string color;
  const std::vector<double>* values;
  bool dashed = false;
  bool area = false;  // stacked on the previous area lines
};

struct Mark {
  const std::vector<double>* flags;
  std::string color;
  std::string label;
};

struct ChartSpec {
  std::string title;
  std::string unit;  // in the title, not on the ticks
  bool integer = false;
  double clip = 0;  // quantile to clip spikes at; 0 = never
};

std::string LegendItem(const std::string& color, const std::string& label, bool box) {
  return fmt::format("<span><i style=\"background:{}{}\"></i>{}</span>", color,
                     box ? ";height:10px;opacity:.5" : "", Escape(label));
}

// A line chart over x = time in seconds: an HTML card with the title above
// and the legend below a fluid SVG (it scales to the card's width).
std::string Chart(const ChartSpec& spec, const std::vector<double>& t_s, const std::vector<Line>& lines,
                  const std::vector<Mark>& marks = {}) {
  std::string html = fmt::format("<div class=\"chart\"><h3>{}{}</h3>", Escape(spec.title),
                                 spec.unit.empty() ? "" : " (" + Escape(spec.unit) + ")");
  if (t_s.empty()) return html + "<p class=\"empty\">no samples</p></div>\n";
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  const size_t n = std::min(t_s.size(), kMaxPoints);
  // Each bucket sits at its first sample's time; the axis spans the run.
  std::vector<double> t(n);
  for (size_t i = t_s.size(); i-- > 0;) t[i * n / t_s.size()] = t_s[i];
  // Stack area lines.
  std::vector<std::vector<double>> values;
  std::vector<std::vector<double>> bases;
  std::vector<double> base(n, 0.0);
  for (const Line& l : lines) {
    std::vector<double> v = Reduce(*l.values, n);
    v.resize(n, 0.0);
    bases.push_back(l.area ? base : std::vector<double>(n, 0.0));
    if (l.area) {
      for (size_t i = 0; i < n; ++i) v[i] += base[i];
      base = v;
    }
    values.push_back(std::move(v));
  }
  std::vector<const std::vector<double>*> all;
  for (const auto& v : values) all.push_back(&v);
  const YRange y = ComputeYRange(all, spec.clip, spec.integer, kYTicks);
  const double t0 = t_s.front();
  const double t1 = std::max(t_s.back(), t0 + 60);
  auto X = [&](double ts) { return kLeft + plot_w * (ts - t0) / (t1 - t0); };
  auto Y = [&](double v) { return kTop + plot_h * (1 - std::clamp(v, 0.0, y.max) / y.max); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" preserveAspectRatio=\"xMinYMin meet\" "
      "role=\"img\"><title>{}</title>",
      kWidth, kHeight, Escape(spec.title));
  // Marks first, under the lines.
  for (const Mark& m : marks) {
    const std::vector<double> f = Reduce(*m.flags, n);
    for (size_t i = 0; i < f.size(); ++i) {
      if (!(f[i] > 0)) continue;
      const double x0 = X(t[i]);
      const double x1 = i + 1 < n ? X(t[i + 1]) : x0 + 1;
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\" "
                         "opacity=\"0.3\"/>",
                         x0, kTop, std::max(1.0, x1 - x0), plot_h, m.color);
    }
  }
  // Grid, rounded y ticks, x ticks in one unit.
  const std::vector<double> y_ticks = NiceTicks(0, y.max, kYTicks, spec.integer);
  const std::vector<std::string> y_labels = FormatTicks(y_ticks);
  for (size_t i = 0; i < y_ticks.size(); ++i) {
    const double v = y_ticks[i];
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" class=\"g\"/>", kLeft, Y(v),
                       kWidth - kRight, Y(v));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"yl\">{}</text>", kLeft - 5, Y(v) + 4, y_labels[i]);
  }
  const TimeTicksResult xt = TimeTicks(t0, t1, kXTicks);
  for (double ts : xt.ticks_s) {
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" class=\"g\"/>", X(ts), kTop,
                       kTop + plot_h);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" class=\"xl\">{}</text>", X(ts), kTop + plot_h + 15,
                       FormatValue(Clean(ts / xt.unit_s, 0.01)));
  }
  svg += fmt::format("<text x=\"{:.0f}\" y=\"{}\" class=\"xt\">time since start ({})</text>", kLeft + plot_w / 2,
                     kHeight - 4, xt.unit);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.0f}\" x2=\"{2}\" y2=\"{1:.0f}\" class=\"ax\"/>", kLeft,
                     kTop + plot_h, kWidth - kRight);
  // Areas, then lines.
  for (size_t li = 0; li < lines.size(); ++li) {
    const Line& l = lines[li];
    const auto& v = values[li];
    if (l.area) {
      std::string poly;
      for (size_t i = 0; i < n; ++i) poly += fmt::format("{:.1f},{:.1f} ", X(t[i]), Y(std::isfinite(v[i]) ? v[i] : 0));
      for (size_t i = n; i-- > 0;) poly += fmt::format("{:.1f},{:.1f} ", X(t[i]), Y(bases[li][i]));
      svg += fmt::format("<polygon points=\"{}\" fill=\"{}\" opacity=\"0.6\"/>", poly, l.color);
    } else {
      // A missing value (an unserved minute) breaks the line.
      std::string pts;
      auto flush = [&] {
        if (!pts.empty())
          svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{}/>", pts,
                             l.color, l.dashed ? " stroke-dasharray=\"5 3\"" : "");
        pts.clear();
      };
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(v[i])) {
          flush();
          continue;
        }
        pts += fmt::format("{:.1f},{:.1f} ", X(t[i]), Y(v[i]));
      }
      flush();
    }
  }
  // A clipped value gets a marker at the top edge.
  if (y.clipped) {
    for (const auto& v : values)
      for (size_t i = 0; i < n; ++i)
        if (v[i] > y.max)
          svg += fmt::format("<path d=\"M{0:.1f} {1} l-4 0 l4 7 l4 -7 z\" class=\"clip\"/>", X(t[i]), kTop);
  }
  html += svg + "</svg><div class=\"legend\">";
  for (const Line& l : lines) html += LegendItem(l.color, l.label, l.area);
  for (const Mark& m : marks) html += LegendItem(m.color, m.label, true);
  if (y.clipped)
    html += fmt::format("<span class=\"bad\">&#9660; y axis clipped at {}{}: spikes above it are cut off</span>",
                        FormatValue(y.max), spec.unit.empty() ? "" : " " + Escape(spec.unit));
  return html + "</div></div>\n";
}

// The SVG pages' style; the bundle pages bring the dashboard's.
const char* kStyle =
    "<style>body{font-family:system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}"
    "main{padding:16px 24px;max-width:1600px;margin:0 auto}"
    "table{border-collapse:collapse;margin:8px 0 16px;background:#fff}td,th{border:1px solid #d8dde3;"
    "padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
    // One chart per row, at most 1200 px: an SVG scales its text with its
    // width, so charts of one width keep one text size.
    ".charts{display:grid;gap:12px;grid-template-columns:1fr;max-width:1200px}"
    ".bars{display:grid;gap:12px;grid-template-columns:repeat(auto-fill,minmax(560px,1fr))}"
    ".chart{background:#fff;border:1px solid #d8dde3;border-radius:8px;padding:10px 12px}"
    ".chart h3{margin:0 0 4px;font-size:14px}svg{display:block;width:100%;height:auto}"
    ".legend{font-size:12px;color:#5b6470;display:flex;gap:12px;flex-wrap:wrap}"
    ".legend i{display:inline-block;width:10px;height:3px;vertical-align:middle;margin-right:4px}"
    ".ax{stroke:#5b6470}.g{stroke:#e3e7ec}.yl{font-size:11px;text-anchor:end;fill:#5b6470}"
    ".lg{font-size:13px}.xl{font-size:11px;text-anchor:middle;fill:#5b6470}.xt{font-size:12px;text-anchor:middle;fill:#5b6470}"
    ".clip{fill:#b91c1c}.bad{color:#b91c1c}.warn{color:#b45309}.muted{color:#5b6470}"
    ".empty{padding:16px;text-align:center;color:#5b6470;background:#fff;border:1px dashed #d8dde3;"
    "border-radius:8px}.summary{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}</style>";

// The head of a page; the bundle pages follow the OS light/dark setting.
std::string PageHead(const std::string& title, bool bundled) {
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">" +
         std::string(bundled ? "<meta name=\"color-scheme\" content=\"light dark\">" : "") + "<title>" +
         Escape(title) + "</title>" + (bundled ? "" : kStyle) + "</head><body><main>";
}

// The end of a bundle page: the data, then the bundle that draws it.
std::string PageScripts(const nlohmann::json& data, const std::string& bundle_js) {
  return "<script type=\"application/json\" id=\"tidal-data\">" + ScriptSafeJson(data) + "</script><script>" +
         ScriptSafeBundle(bundle_js) + "</script>";
}

bool HasLoans(const TimeSeries& s) {
  for (const std::vector<double>* v : {&s.lent_gpus, &s.loans, &s.returns})
    for (double x : *v)
      if (x > 0) return true;
  return false;
}

std::string NoLoans(const std::string& colocation) {
  return fmt::format("<p class=\"empty\" id=\"no-loans\">No loans. {}</p>",
                     colocation == "static" ? "Static co-location never lends the shared pool to training."
                                            : "No shared-pool node was lent to training during this run.");
}

std::string JsonValueText(const nlohmann::json& v) {
  if (v.is_number()) return FormatNumber(v.get<double>());
  if (v.is_null()) return "-";
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

// Why: each missed minute, slow or failed scale-up and long training wait
// under its one dominant cause (core/diagnosis; summary.json "diagnosis").
std::string DiagnosisSection(const nlohmann::ordered_json& summary) {
  const nlohmann::ordered_json& d = summary["diagnosis"];
  std::string html =
      "<h2 id=\"diagnosis\">Diagnosis</h2><p class=\"muted\">Each missed service-minute, each slow or "
      "failed scale-up and each training wait of " +
      fmt::format("{:.0f} min", d["long_training_wait_s"].get<double>() / 60) +
      " or more, counted once under its dominant cause (docs/colocation.md, \"Diagnosis\").</p>"
      "<div class=\"summary\">";
  auto table = [&](const char* title, const nlohmann::ordered_json& by_cause) {
    int total = 0;
    for (const auto& [k, v] : by_cause.items()) total += v.get<int>();
    html += fmt::format("<table><tr><th>{}</th><th>{}</th><th></th></tr>", title, total);
    for (const auto& [k, v] : by_cause.items()) {
      const int n = v.get<int>();
      if (n == 0) continue;
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.0f}%</td></tr>", Escape(k), n, 100.0 * n / total);
    }
    html += "</table>";
  };
  table("SLO-missed minutes", d["slo_miss_minutes_by_cause"]);
  table("slow or failed scale-ups", d["slow_scale_ups_by_cause"]);
  table("long training waits", d["long_training_waits_by_cause"]);
  return html + "</div>";
}

std::string Intro(const SimResult& result) {
  const Summary& s = result.summary;
  return fmt::format(
      "<p>Co-location mode <b>{}</b>, policy <b>{}</b>: {} simulated over {} GPUs. "
      "SLO attainment {}, scale-up success {}, GPU allocation ratio {:.3f}, training mean "
      "queue wait {:.0f} s.</p>",
      Escape(s.colocation), Escape(s.policy), FormatHours(s.sim_duration_s), result.series.total_gpus,
      FormatRate(s.inference.slo_attainment), FormatRate(s.inference.scale_up_success_rate),
      s.cluster.gpu_allocation_ratio,
      s.training.queue_wait_mean_s);
}

const char* kMissNote =
    "<p class=\"muted\">Red columns: minutes whose modelled P99 missed the target (or whose load was not "
    "served). Orange: misses while a scale-up was still starting replicas, i.e. minutes lost to cold "
    "starts.</p>";

// The charts as SVG, for a page without the bundle.
std::string SvgCharts(const SimResult& result) {
  const TimeSeries& s = result.series;
  std::string html;
  std::vector<double> total(s.t_s.size(), static_cast<double>(s.total_gpus));
  html += "<h2>GPUs by workload kind</h2><div class=\"charts\">";
  html += Chart({"GPUs held (running or terminating), stacked", "GPUs", true}, s.t_s,
                {{"training", "#2563eb", &s.gpus_by_kind[0], false, true},
                 {"inference", "#059669", &s.gpus_by_kind[1], false, true},
                 {"batch", "#7c3aed", &s.gpus_by_kind[2], false, true},
                 {"debug", "#d97706", &s.gpus_by_kind[3], false, true},
                 {fmt::format("cluster ({})", s.total_gpus), "#5b6470", &total, true, false}});
  html += "</div><h2>Loans and returns of the shared pool</h2><div class=\"charts\">";
  if (!HasLoans(s)) {
    html += NoLoans(result.summary.colocation);
  } else {
    html += Chart({"Shared-pool GPUs lent to training", "GPUs", true}, s.t_s,
                  {{"lent GPUs", "#7c3aed", &s.lent_gpus}});
    html += Chart({"Nodes lent and returned per sample", "nodes", true}, s.t_s,
                  {{"lent", "#0891b2", &s.loans}, {"returned", "#dc2626", &s.returns}});
  }
  html += "</div><h2>Inference: load against capacity, P99 against target</h2>";
  html += kMissNote;
  if (s.services.empty()) html += "<p class=\"empty\">No inference service with a load curve.</p>";
  // One row per service: its load and its P99 side by side.
  for (const TimeSeries::Service& sv : s.services) {
    html += "<div class=\"charts\" style=\"margin-bottom:12px\">";
    html += Chart({sv.name + ": load and ready capacity", "req/s", false, 0.99}, s.t_s,
                  {{"load", "#2563eb", &sv.rps}, {"ready capacity", "#059669", &sv.capacity_rps}},
                  {{&sv.slo_miss, "#dc2626", "SLO miss"},
                   {&sv.cold_start_miss, "#d97706", "miss while scaling up (cold start)"}});
    std::vector<double> target(sv.p99_ms.size(), sv.target_p99_ms);
    std::vector<double> p99 = sv.p99_ms;
    for (double& v : p99)
      if (v < 0) v = std::nan("");  // unserved: no point (the load chart marks the miss)
    html += Chart({sv.name + ": modelled P99 against target", "ms", false, 0.95}, s.t_s,
                  {{"P99", "#7c3aed", &p99}, {fmt::format("target ({} ms)", FormatValue(sv.target_p99_ms)),
                                              "#dc2626", &target, true}},
                  {{&sv.cold_start_miss, "#d97706", "miss while scaling up (cold start)"}});
    html += "</div>";
  }
  html += "<h2>Training queue</h2><div class=\"charts\">";
  html += Chart({"Pending training jobs", "jobs", true}, s.t_s, {{"queued", "#d97706", &s.training_queue}});
  return html + "</div>";
}

nlohmann::json Samples(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
  return a;
}

}  // namespace

nlohmann::json ReportData(const SimResult& result, const std::string& title) {
  const TimeSeries& s = result.series;
  nlohmann::json services = nlohmann::json::array();
  for (const TimeSeries::Service& sv : s.services) {
    nlohmann::json p99 = nlohmann::json::array();
    for (double v : sv.p99_ms) p99.push_back(v < 0 || !std::isfinite(v) ? nlohmann::json(nullptr) : nlohmann::json(v));
    services.push_back({{"name", sv.name},
                        {"target_p99_ms", sv.target_p99_ms},
                        {"rps", Samples(sv.rps)},
                        {"capacity_rps", Samples(sv.capacity_rps)},
                        {"p99_ms", std::move(p99)},
                        {"slo_miss", Samples(sv.slo_miss)},
                        {"cold_start_miss", Samples(sv.cold_start_miss)}});
  }
  return {{"kind", "report"},
          {"title", title},
          {"colocation", result.summary.colocation},
          {"policy", result.summary.policy},
          {"total_gpus", s.total_gpus},
          {"t_s", Samples(s.t_s)},
          {"gpus_by_kind",
           {{"training", Samples(s.gpus_by_kind[0])},
            {"inference", Samples(s.gpus_by_kind[1])},
            {"batch", Samples(s.gpus_by_kind[2])},
            {"debug", Samples(s.gpus_by_kind[3])}}},
          {"has_loans", HasLoans(s)},
          {"lent_gpus", Samples(s.lent_gpus)},
          {"loans", Samples(s.loans)},
          {"returns", Samples(s.returns)},
          {"training_queue", Samples(s.training_queue)},
          {"services", std::move(services)}};
}

// The lent nodes sampled at or after `t_s` (-1 past the run's end).
double LentNodesAt(const TimeSeries& s, double t_s) {
  const auto it = std::lower_bound(s.t_s.begin(), s.t_s.end(), t_s);
  if (it == s.t_s.end() || s.lent_nodes.empty()) return -1;
  return s.lent_nodes[static_cast<size_t>(it - s.t_s.begin())];
}

// Each day's loan calendar against what happened: a row per shared node
// (one cell per slot, shaded by how sure the loan is), the lent-node counts
// the plan expects under low, planned and high load, and the count sampled
// at the slot's start.
std::string CalendarSection(const SimResult& result) {
  if (result.calendars.empty()) return "";
  constexpr size_t kMaxRows = 48;
  std::string html =
      "<style>.cal{border-collapse:collapse;font-size:11px;margin:4px 0 12px}"
      ".cal td,.cal th{padding:1px 3px;border:1px solid #e5e7eb;text-align:center}"
      ".cal th{text-align:left;font-weight:normal}.cal .L{background:#1d4ed8}.cal .l{background:#93c5fd}"
      ".cal .d{background:#dbeafe}.cal .k{background:#f8fafc}.cal .off{color:#b91c1c}</style>"
      "<h2 id=\"loan-calendar\">Loan calendar</h2><p class=\"muted\">Planned at the start of each day "
      "from the forecast: dark, lent even under high load; light, lent unless load is high; pale, lent "
      "only if load is low; blank, kept for inference. The rows below count lent nodes per slot; "
      "<span class=\"off\">red</span> marks an actual count outside the low-to-high band. The plan "
      "marks when inference needs a node; the return's notice goes out up to one look-ahead before, so "
      "during a rise the actual count runs below the plan, and after a peak replicas wait out the "
      "scale-down delay before their nodes are lent again.</p>";
  const TimeSeries& series = result.series;
  for (size_t d = 0; d < result.calendars.size(); ++d) {
    const LoanCalendar& c = result.calendars[d];
    const double from_s = ToSeconds(c.from);
    // A calendar planned as the run ended has nothing to be set against.
    if (series.t_s.empty() || from_s >= series.t_s.back()) continue;
    std::string low = "<tr><th>lent, low load</th>", planned = "<tr><th>lent, planned</th>",
                high = "<tr><th>lent, high load</th>", actual = "<tr><th>lent, actual</th>";
    int inside = 0, measured = 0;
    for (int k = 0; k < c.slots; ++k) {
      low += fmt::format("<td>{}</td>", c.lent_low_load[k]);
      planned += fmt::format("<td>{}</td>", c.lent_planned[k]);
      high += fmt::format("<td>{}</td>", c.lent_high_load[k]);
      const double got = LentNodesAt(series, from_s + k * ToSeconds(c.slot));
      if (got < 0) {
        actual += "<td></td>";
        continue;
      }
      ++measured;
      const bool in_band = got >= c.lent_high_load[k] && got <= c.lent_low_load[k];
      inside += in_band ? 1 : 0;
      actual += fmt::format("<td{}>{:.0f}</td>", in_band ? "" : " class=\"off\"", got);
    }
    html += fmt::format("<h3>Day {} (from {})</h3><p>{} shared nodes, {} slots of {}; notice {} before a return. ",
                        d + 1, FormatHours(from_s), c.nodes.size(), c.slots, FormatHours(ToSeconds(c.slot)),
                        FormatHours(ToSeconds(c.lookahead)));
    if (measured > 0) {
      html += fmt::format("The actual lent count was inside the band in {} of {} slots.", inside, measured);
    }
    html += "</p><table class=\"cal\">";
    for (size_t n = 0; n < c.nodes.size() && n < kMaxRows; ++n) {
      html += "<tr><th>" + Escape(c.nodes[n].name) + "</th>";
      for (char ch : c.nodes[n].timeline) {
        html += fmt::format("<td class=\"{}\"></td>", ch == 'L' ? "L" : ch == 'l' ? "l" : ch == '-' ? "d" : "k");
      }
      html += "</tr>";
    }
    html += low + "</tr>" + planned + "</tr>" + high + "</tr>" + actual + "</tr></table>";
    if (c.nodes.size() > kMaxRows) {
      html += fmt::format("<p class=\"muted\">{} more shared nodes not shown.</p>", c.nodes.size() - kMaxRows);
    }
  }
  return html;
}

std::string RenderReport(const SimResult& result, const std::string& title, const std::string& bundle_js) {
  const bool bundled = !bundle_js.empty();
  std::string html = PageHead(title, bundled);
  html += "<h1>" + Escape(title) + "</h1>" + Intro(result);
  if (bundled) {
    html += "<div id=\"charts\"><p class=\"muted\">The charts need JavaScript.</p></div>";
  } else {
    html += SvgCharts(result);
  }
  html += CalendarSection(result);
  html += DiagnosisSection(result.summary.ToJson());
  html += "<h2>Summary</h2><div class=\"summary\">" + SummaryTables(result.summary.ToJson()) + "</div>";
  html += "</main>";
  if (bundled) html += PageScripts(ReportData(result, title), bundle_js);
  return html + "</body></html>\n";
}

const std::vector<ComparedMetric>& ComparedMetrics() {
  using enum Better;
  static const std::vector<ComparedMetric> kMetrics = {
      {"", "colocation", kNeither},
      {"inference", "slo_attainment", kHigher},
      {"inference", "scale_up_success_rate", kHigher},
      {"inference", "latency_p99_ms", kLower},
      {"inference", "scale_ups", kNeither},
      {"inference", "time_to_capacity_p99_s", kLower},
      {"inference", "forecast_error_mape", kLower},
      // Earlier is safer but lends less: neither way is better by itself.
      {"inference", "return_lead_p50_s", kNeither},
      {"inference", "return_lead_p95_s", kNeither},
      {"training", "jobs", kNeither},
      {"training", "completed", kHigher},
      {"training", "queue_wait_mean_s", kLower},
      {"training", "queue_wait_p95_s", kLower},
      {"training", "jct_mean_s", kLower},
      {"training", "gang_partial_starts", kLower},
      {"training", "preemptions", kLower},
      {"training", "lost_gpu_hours", kLower},
      {"training", "recovery_time_p95_s", kLower},
      {"batch_inference", "deadline_met_rate", kHigher},
      {"debug", "queue_wait_p95_s", kLower},
      {"cluster", "gpu_allocation_ratio", kHigher},
      // Borrowing is what co-location is for, and each reclaim is its cost:
      // more of either is neither better nor worse by itself.
      {"cluster", "borrowed_gpu_hours", kNeither},
      {"cluster", "reclaims", kNeither},
      {"cluster", "reclaim_latency_p95_s", kLower},
      {"scheduler", "cycles", kNeither},
      {"scheduler", "cycle_p99_ms", kLower},
  };
  return kMetrics;
}

std::vector<bool> BestRuns(Better better, const std::vector<double>& values) {
  std::vector<bool> best(values.size(), false);
  if (better == Better::kNeither) return best;
  std::vector<double> numbers;
  for (double v : values) {
    if (std::isfinite(v)) numbers.push_back(v);
  }
  if (numbers.size() < 2) return best;
  const auto [lo, hi] = std::minmax_element(numbers.begin(), numbers.end());
  if (*lo == *hi) return best;
  const double target = better == Better::kHigher ? *hi : *lo;
  for (size_t i = 0; i < values.size(); ++i) best[i] = values[i] == target;
  return best;
}

namespace {
nlohmann::json Lookup(const nlohmann::json& summary, const ComparedMetric& m) {
  const nlohmann::json* node = &summary;
  if (!m.section.empty()) {
    if (!node->contains(m.section)) return nullptr;
    node = &(*node)[m.section];
  }
  if (!node->contains(m.key)) return nullptr;
  return (*node)[m.key];
}
std::string MetricName(const ComparedMetric& m) { return m.section.empty() ? m.key : m.section + "." + m.key; }
const char* BetterText(Better b) {
  switch (b) {
    case Better::kHigher:
      return "higher";
    case Better::kLower:
      return "lower";
    case Better::kNeither:
      break;
  }
  return "-";
}
// One metric's values across the runs, NaN where a run has no number.
std::vector<double> NumericValues(const std::vector<ComparedRun>& runs, const ComparedMetric& m) {
  std::vector<double> values;
  for (const ComparedRun& r : runs) {
    const nlohmann::json v = Lookup(r.summary, m);
    values.push_back(v.is_number() ? v.get<double>() : std::nan(""));
  }
  return values;
}
}  // namespace

std::string FormatNumber(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::abs(v);
  if (v == std::floor(v) && a < 1e15) return fmt::format("{:.0f}", v);
  std::string t = fmt::format("{:.{}f}", v, a < 1 ? 4 : a < 1000 ? 2 : 1);
  while (t.back() == '0') t.pop_back();
  if (t.back() == '.') t.pop_back();
  return t == "-0" ? "0" : t;
}

std::string RenderComparisonText(const std::vector<ComparedRun>& runs) {
  // Cells first, so that every column is as wide as its widest cell (label
  // or value) and the header sits over its values.
  const auto& metrics = ComparedMetrics();
  std::vector<std::vector<std::string>> cells(metrics.size(), std::vector<std::string>(runs.size()));
  size_t name_w = std::string_view("metric").size();
  const size_t better_w = std::string_view("better").size();
  std::vector<size_t> col_w(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) col_w[i] = runs[i].label.size();
  for (size_t m = 0; m < metrics.size(); ++m) {
    name_w = std::max(name_w, MetricName(metrics[m]).size());
    const std::vector<bool> best = BestRuns(metrics[m].better, NumericValues(runs, metrics[m]));
    for (size_t i = 0; i < runs.size(); ++i) {
      cells[m][i] = JsonValueText(Lookup(runs[i].summary, metrics[m])) + (best[i] ? "*" : "");
      col_w[i] = std::max(col_w[i], cells[m][i].size());
    }
  }
  auto row = [&](const std::string& name, const std::string& better, const std::vector<std::string>& values) {
    std::string line = fmt::format("{:<{}}  {:<{}}", name, name_w, better, better_w);
    for (size_t i = 0; i < values.size(); ++i) line += fmt::format("  {:>{}}", values[i], col_w[i]);
    return line + "\n";
  };
  std::vector<std::string> labels;
  for (const ComparedRun& r : runs) labels.push_back(r.label);
  std::string out = row("metric", "better", labels);
  for (size_t m = 0; m < metrics.size(); ++m) {
    out += row(MetricName(metrics[m]), BetterText(metrics[m].better), cells[m]);
  }
  return out + "* the best value where one way is better\n";
}

nlohmann::json ComparisonData(const std::vector<ComparedRun>& runs) {
  nlohmann::json labels = nlohmann::json::array();
  for (const ComparedRun& r : runs) labels.push_back(r.label);
  nlohmann::json metrics = nlohmann::json::array();
  for (const ComparedMetric& m : ComparedMetrics()) {
    nlohmann::json values = nlohmann::json::array();
    bool any = false;
    for (double v : NumericValues(runs, m)) {
      any = any || std::isfinite(v);
      values.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr));
    }
    if (!any) continue;
    metrics.push_back({{"name", MetricName(m)},
                       {"better", m.better == Better::kNeither ? nlohmann::json(nullptr) : BetterText(m.better)},
                       {"values", std::move(values)}});
  }
  return {{"kind", "compare"}, {"runs", std::move(labels)}, {"metrics", std::move(metrics)}};
}

namespace {
// One metric across runs as horizontal SVG bars on CompareRange's axis.
std::string CompareBars(const std::string& name, const nlohmann::json& better,
                        const std::vector<std::string>& labels, const std::vector<double>& values) {
  constexpr int kBarH = 18;
  constexpr int kLabelW = 160;
  constexpr int kW = 620;
  constexpr double kPlotW = kW - kLabelW - 70;
  const CompareAxis axis = CompareRange(values);
  const int h = 8 + static_cast<int>(labels.size()) * (kBarH + 6) + 30;
  auto X = [&](double v) { return kLabelW + kPlotW * (std::clamp(v, axis.min, axis.max) - axis.min) / (axis.max - axis.min); };
  std::string html = fmt::format("<div class=\"chart\"><h3>{}</h3>", Escape(name));
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" role=\"img\"><title>{}</title>", kW, h,
      Escape(name));
  const double plot_bottom = h - 30;
  const std::vector<double> ticks = NiceTicks(axis.min, axis.max, 5);
  const std::vector<std::string> tick_labels = FormatTicks(ticks);
  for (size_t i = 0; i < ticks.size(); ++i) {
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"4\" x2=\"{0:.1f}\" y2=\"{1:.0f}\" class=\"g\"/>", X(ticks[i]),
                       plot_bottom);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" class=\"xl\">{}</text>", X(ticks[i]), plot_bottom + 14,
                       tick_labels[i]);
  }
  static const char* kColors[] = {"#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2"};
  for (size_t i = 0; i < labels.size(); ++i) {
    const int y = 8 + static_cast<int>(i) * (kBarH + 6);
    svg += fmt::format("<text x=\"0\" y=\"{}\" class=\"lg\">{}</text>", y + 13, Escape(labels[i].substr(0, 24)));
    if (!std::isfinite(values[i])) {
      svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"lg\">no value</text>", kLabelW + 4, y + 13);
      continue;
    }
    const double w = X(values[i]) - kLabelW;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>", kLabelW, y,
                       std::max(1.0, w), kBarH, kColors[i % 6]);
    // Whole numbers in full (10572 next to 10753), as the console table.
    const double v = values[i];
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"lg\">{}</text>", kLabelW + w + 4, y + 13,
                       FormatNumber(v));
  }
  html += svg + "</svg><div class=\"legend\">";
  if (better.is_string()) html += "<span>" + better.get<std::string>() + " is better</span>";
  html += axis.min == 0 ? "<span>axis from 0</span>"
                        : fmt::format("<span class=\"warn\">axis from {}, not 0: bars show the differences</span>",
                                      FormatValue(axis.min));
  return html + "</div></div>\n";
}
}  // namespace

std::string RenderComparisonHtml(const std::vector<ComparedRun>& runs, const std::string& bundle_js) {
  const bool bundled = !bundle_js.empty();
  std::string html = PageHead("Tidal simulation comparison", bundled) +
                     "<h1>Simulation comparison</h1><table><tr><th>metric</th><th>better</th>";
  for (const ComparedRun& r : runs) html += "<th>" + Escape(r.label) + "</th>";
  html += "</tr>";
  for (const ComparedMetric& m : ComparedMetrics()) {
    html += "<tr><td>" + Escape(MetricName(m)) + "</td><td>" + BetterText(m.better) + "</td>";
    const std::vector<bool> best = BestRuns(m.better, NumericValues(runs, m));
    for (size_t i = 0; i < runs.size(); ++i) {
      const nlohmann::json v = Lookup(runs[i].summary, m);
      const std::string text = Escape(v.is_null() ? "-" : JsonValueText(v));
      html += best[i] ? "<td class=\"best\"><strong>" + text + "</strong></td>" : "<td>" + text + "</td>";
    }
    html += "</tr>";
  }
  html += "</table><p class=\"muted\">Bold: the best run where one way is better.</p>";
  const nlohmann::json data = ComparisonData(runs);
  if (bundled) {
    html += "<div id=\"charts\"><p class=\"muted\">The charts need JavaScript.</p></div></main>";
    html += PageScripts(data, bundle_js);
    return html + "</body></html>\n";
  }
  html += "<h2>Per metric</h2><p class=\"muted\">Each axis spans the runs' values (it does not start at 0 "
          "unless a value is near it).</p><div class=\"bars\">";
  std::vector<std::string> labels;
  for (const ComparedRun& r : runs) labels.push_back(r.label);
  for (const nlohmann::json& m : data["metrics"]) {
    std::vector<double> values;
    for (const nlohmann::json& v : m["values"]) values.push_back(v.is_number() ? v.get<double>() : std::nan(""));
    html += CompareBars(m["name"].get<std::string>(), m["better"], labels, values);
  }
  return html + "</div></main></body></html>\n";
}

}  // namespace tidal::sim
