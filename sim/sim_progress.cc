#include "sim/sim_progress.h"

#include <cmath>

#include <fmt/format.h>

namespace tidal::sim {
namespace {

// 950 -> "950", 48'210 -> "48.2k", 1'234'567 -> "1.2M".
std::string Count(double v) {
  if (v >= 1e6) return fmt::format("{:.1f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// Simulated time in the unit a reader thinks in: "45 s", "12.5 min", "12.0 h", "3.2 d".
std::string SimTime(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  if (s < 3600) return fmt::format("{:.1f} min", s / 60);
  if (s < 3 * 86400) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} d", s / 86400);
}

// Wall-clock time left: "45s", "4m10s", "2h05m".
std::string WallTime(double s) {
  const long long t = std::llround(s);
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

}  // namespace

std::string FormatProgressLine(const SimProgress& p) {
  std::string line = "sim " + SimTime(p.sim_s);
  const bool bounded = p.horizon_s > 0;
  if (bounded)
    line += fmt::format(" / {} ({:.1f}%)", SimTime(p.horizon_s),
                        std::min(100.0, 100.0 * p.sim_s / p.horizon_s));
  line += fmt::format("  {} events", Count(static_cast<double>(p.events)));
  if (p.wall_s > 0) line += fmt::format("  {} events/s", Count(static_cast<double>(p.events) / p.wall_s));
  if (!bounded) return line;
  if (p.sim_s >= p.horizon_s) return line + "  draining";
  if (p.wall_s > 0 && p.sim_s > 0)
    line += "  ETA " + WallTime((p.horizon_s - p.sim_s) * p.wall_s / p.sim_s);
  return line;
}

}  // namespace tidal::sim
