#include "sim/load_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {

Status LoadProfile::Add(const std::string& service, double time_s, double rps) {
  auto& curve = curves_[service];
  if (!curve.empty() && time_s < curve.back().time_s)
    return InvalidArgument(fmt::format("service {}: time {} is before the previous row's {}",
                                       service, time_s, curve.back().time_s));
  if (!curve.empty() && time_s == curve.back().time_s) {
    curve.back().rps = rps;
  } else {
    curve.push_back({time_s, rps});
  }
  return Status::Ok();
}

void LoadProfile::SetSeries(const std::string& service, const LoadSeries& series, double offset_s) {
  auto& curve = curves_[service];
  curve.clear();
  for (size_t i = 0; i < series.rps.size(); ++i)
    curve.push_back({offset_s + static_cast<double>(i) * series.step_s, series.rps[i]});
}

double LoadProfile::Rps(const std::string& service, double t_s) const {
  auto it = curves_.find(service);
  if (it == curves_.end() || it->second.empty()) return 0;
  const auto& curve = it->second;
  if (period_s_ > 0 && t_s >= period_s_) t_s = std::fmod(t_s, period_s_);
  auto pos = std::upper_bound(curve.begin(), curve.end(), t_s,
                              [](double t, const Point& p) { return t < p.time_s; });
  if (pos == curve.begin()) return 0;
  return std::prev(pos)->rps;
}

std::vector<std::string> LoadProfile::services() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : curves_) out.push_back(name);
  return out;
}

const std::vector<LoadProfile::Point>& LoadProfile::points(const std::string& service) const {
  static const std::vector<Point> kEmpty;
  auto it = curves_.find(service);
  return it == curves_.end() ? kEmpty : it->second;
}

double LoadProfile::end_s() const {
  double end = 0;
  for (const auto& [_, c] : curves_)
    if (!c.empty()) end = std::max(end, c.back().time_s);
  return end;
}

std::string LoadProfile::ToCsv() const {
  std::vector<std::tuple<double, std::string, double>> rows;
  for (const auto& [name, c] : curves_)
    for (const Point& p : c) rows.emplace_back(p.time_s, name, p.rps);
  std::sort(rows.begin(), rows.end());
  std::string out = "time_s,service,rps\n";
  for (const auto& [t, name, rps] : rows) out += fmt::format("{},{},{:.4f}\n", t, name, rps);
  return out;
}

StatusOr<LoadProfile> ParseLoadCsv(std::string_view text, std::string_view name) {
  LoadProfile profile;
  std::vector<std::string_view> f;
  int line_no = 0;
  bool header_seen = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) break;
      continue;
    }
    SplitCsv(line, f);
    if (!header_seen) {
      header_seen = true;
      if (f.size() != 3 || f[0] != "time_s" || f[1] != "service" || f[2] != "rps")
        return InvalidArgument(fmt::format("{}:{}: header: expected \"time_s,service,rps\" (got \"{}\")",
                                           name, line_no, line));
      continue;
    }
    if (f.size() != 3)
      return FieldError(name, line_no, "row", fmt::format("expected 3 columns, found {}", f.size()),
                        line);
    auto t = ParseDouble(f[0]);
    if (!t || *t < 0) return FieldError(name, line_no, "time_s", "expected seconds >= 0", f[0]);
    if (f[1].empty()) return FieldError(name, line_no, "service", "expected a service name", f[1]);
    auto rps = ParseDouble(f[2]);
    if (!rps || *rps < 0 || std::isinf(*rps))
      return FieldError(name, line_no, "rps", "expected requests/s >= 0", f[2]);
    Status s = profile.Add(std::string(f[1]), *t, *rps);
    if (!s.ok()) return FieldError(name, line_no, "time_s", s.message(), f[0]);
    if (end == text.size()) break;
  }
  if (!header_seen)
    return InvalidArgument(fmt::format("{}: empty file, expected the header \"time_s,service,rps\"", name));
  return profile;
}

StatusOr<LoadProfile> LoadLoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("{}: cannot open load file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseLoadCsv(ss.str(), path);
}

double HistoryShiftS(double end_s) { return (std::floor(end_s / 86400.0) + 1) * 86400.0; }

void ApplyDiurnal(LoadSeries& series, double trough, double peak_s, double period_s) {
  for (size_t i = 0; i < series.rps.size(); ++i) {
    const double t = (static_cast<double>(i) + 0.5) * series.step_s;
    const double phase = 2 * std::numbers::pi * (t - peak_s) / period_s;
    series.rps[i] *= trough + (1 - trough) * (1 + std::cos(phase)) / 2;
  }
}

}  // namespace tidal::sim
