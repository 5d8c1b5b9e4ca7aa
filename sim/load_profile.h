// Inference load over simulated time: requests/s per service as a step
// function. The LOAD file format (docs/simulator.md, docs/formats.md "Load")
// is CSV with the header `time_s,service,rps`: each row sets the service's
// rate from time_s until that service's next row. With a period, the curve
// repeats (a one-day file drives a week).
#ifndef TIDAL_SIM_LOAD_PROFILE_H_
#define TIDAL_SIM_LOAD_PROFILE_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "sim/trace_loader.h"

namespace tidal::sim {

class LoadProfile {
 public:
  struct Point {
    double time_s = 0;
    double rps = 0;
  };

  // Appends a point; times of one service must not decrease.
  Status Add(const std::string& service, double time_s, double rps);
  // Replaces the service's curve with a trace series starting at offset_s.
  void SetSeries(const std::string& service, const LoadSeries& series, double offset_s = 0);

  // The rate at t (0 before the first point; the last rate holds after the
  // end unless a period is set).
  double Rps(const std::string& service, double t_s) const;
  bool Has(const std::string& service) const { return curves_.count(service) > 0; }
  std::vector<std::string> services() const;
  const std::vector<Point>& points(const std::string& service) const;
  // Time of the last point over all services.
  double end_s() const;

  void set_period_s(double period_s) { period_s_ = period_s; }
  double period_s() const { return period_s_; }

  // CSV text of the profile (time_s,service,rps), sorted by time then service.
  std::string ToCsv() const;

 private:
  std::map<std::string, std::vector<Point>> curves_;
  double period_s_ = 0;
};

// Parses the LOAD CSV format; `name` appears in errors ("load.csv:7: ...").
// Lines starting with '#' and blank lines are ignored.
StatusOr<LoadProfile> ParseLoadCsv(std::string_view text, std::string_view name);
StatusOr<LoadProfile> LoadLoadFile(const std::string& path);

// Where a LOAD HISTORY file's times land before the simulation start: a
// point at time_s is observed at time_s - HistoryShiftS(end_s), end_s the
// history's last time. The shift is whole days (the time of day is kept, so a
// daily profile lines up) and more than end_s (every point is in the past).
double HistoryShiftS(double end_s);

// Multiplies a series by a daily cycle: factor(t) = trough + (1 - trough) *
// (1 + cos(2 pi (t - peak_s) / period_s)) / 2, so the factor is 1 at the peak
// hour and `trough` half a period away.
void ApplyDiurnal(LoadSeries& series, double trough, double peak_s, double period_s);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_LOAD_PROFILE_H_
