// Per-service forecast of inference load (req/s).
//
// The day is cut into buckets of `bucket` length (default 5 min). Each
// observation goes into its (day, bucket) cell; when a cell closes, its mean
// and its maximum are folded into that bucket's two daily profiles by
// exponential smoothing across days: p[b] <- x on the first day, else
// alpha*x + (1-alpha)*p[b].
// A level ratio r tracks how today runs against the mean profile as it stood
// at the start of the day: r <- beta * rps/p[bucket(t)] + (1-beta) * r per
// observation, clamped to [min_level, max_level].
// Forecast(at) = r * mean profile(at), linearly interpolated between bucket
// centres (circularly over midnight): the expected rate, for reports.
// PeakForecast over [from, to] = r * the largest bucket maximum the interval
// touches (or Forecast at either end if higher): what capacity must cover. A
// step inside a bucket is seen from the bucket's start and at full height,
// never averaged down or smeared later.
// Band over [from, to] bounds the load the forecast expects, for plans made
// hours ahead (the loan calendar): each bucket also keeps the smoothed
// absolute error of its daily mean against the profile as it stood before
// that day's fold, d[b] <- |x - p_before[b]| on the second day seen, then
// alpha*|x - p_before[b]| + (1-alpha)*d[b]. low = r * the smallest
// (mean - d) of the buckets the interval touches, planned = PeakForecast,
// high = planned + r * the largest d (never below planned); a bucket with no
// error measured yet counts fallback_margin * its mean as its error.
// Learned margin: the profile cannot know how far today's load will outrun
// it (on a sparse real trace the daily peaks differ up to 7x from day to day
// and a ramp comes up to an hour early), and a fixed headroom is either too
// small at such a ramp or wasted on a calm day. So the forecaster measures
// its own error where it matters, at the short look-ahead a new replica
// needs: at every observation it issues the short forecast
//     f(t) = max(rps(t), raw PeakForecast over [t, t + error_horizon]),
// what capacity would be sized for if replicas were ordered now, and when
// the load at t' is observed it scores the forecast issued error_horizon
// before (the latest issued at or before t' - error_horizon):
//     u = rps(t') / f  (capped at max_margin; a forecast of 0 that saw load
//                       rise counts as max_margin).
// The margin m is a decaying maximum of these ratios,
//     m <- max(u, 1 + (m - 1) x 2^(-dt / margin_half_life)),  m >= 1,
// so it jumps to the largest recent under-prediction and forgets it with a
// half-life: while a ramp outruns the forecast, the steps that follow are
// met with the ratio the last ones missed by; once the forecast holds again
// the margin decays back to 1 and costs nothing. Margin() is m;
// PeakForecast and Band are the raw forecast (the caller multiplies, so that
// the error is always measured against the raw forecast, not against a
// forecast that already carries the margin it is learning).
// Until a service's history spans one full day the profile is not trusted and
// both return the max observed over the last `fallback_window` times
// (1 + fallback_margin); a service never observed forecasts 0.
// Everything is a function of the observations, so it is deterministic.
// Warm start: a restarted server (and `tidal sim replay` at each restart)
// feeds the load samples it stored within kLoadHistoryWindow before the
// restart through Observe, in order, so the profile survives a restart; the
// simulator feeds --load-history the same way before t = 0.
#ifndef TIDAL_CORE_COLOCATION_LOAD_FORECASTER_H_
#define TIDAL_CORE_COLOCATION_LOAD_FORECASTER_H_

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "core/common/ids.h"
#include "core/common/status.h"
#include "core/common/time.h"

namespace tidal {

// How far back a warm start reads stored load samples: with alpha = 0.5 a
// day eight days old weighs under 1/256 in the profile, so older samples
// cost start-up time and change nothing.
inline constexpr Duration kLoadHistoryWindow = std::chrono::hours(7 * 24);

// True when a sample taken at `sample` belongs to the warm start of a
// forecaster (re)started at `start`. The server and the replay both use it,
// so they rebuild the same forecaster.
inline bool InLoadHistoryWindow(Time sample, Time start) {
  return sample <= start && start - sample <= kLoadHistoryWindow;
}

// The load expected over an interval, req/s: low <= planned <= high.
struct LoadBand {
  double low = 0;
  double planned = 0;  // PeakForecast: what capacity is planned for
  double high = 0;
  bool operator==(const LoadBand&) const = default;
};

// What a forecaster remembers of one service (its observations folded into
// the daily profiles, the open cell and the last hour), so that a snapshot of
// the controller (protocol/colocation_memory.h) restores the same forecasts.
struct LoadSeries {
  Time first_seen;
  Time last_seen;
  double last_rps = 0;
  // The open (day, bucket) cell.
  int64_t cell = -1;
  double cell_sum = 0;
  double cell_max = 0;
  int cell_count = 0;
  std::vector<double> profile;       // bucket means; < 0 = never seen
  std::vector<double> peak_profile;  // bucket maxima; < 0 = never seen
  std::vector<double> deviation;     // bucket mean's error; < 0 = not measured
  // The bucket's value before its latest fold, and that fold's day: the
  // level compares today's load with the profile as it stood this morning,
  // so today's load is not counted twice (in the profile and the level).
  std::vector<double> before_fold;
  std::vector<int64_t> fold_day;
  double level = 1.0;
  std::deque<std::pair<Time, double>> recent;  // within fallback_window
  // The learned margin: short forecasts issued within error_horizon (and the
  // latest older one, which the next observation scores), and the decaying
  // maximum of the under-prediction ratios (>= 1).
  std::deque<std::pair<Time, double>> issued;
  double margin = 1.0;
  bool operator==(const LoadSeries&) const = default;
};

struct ForecasterOptions {
  Duration bucket = minutes(5);
  double alpha = 0.5;   // weight of the newest day in the profile
  double beta = 0.05;   // weight of the newest observation in the level ratio
  double min_level = 0.5;
  double max_level = 2.0;
  Duration fallback_window = hours(1);
  double fallback_margin = 0.2;
  // The learned margin (see above). The horizon is the look-ahead a replica
  // order must cover: one forecast bucket, at least a cold start (90 to
  // 180 s in the examples) plus a pass or two. The half-life lets a margin
  // learned at one step of a ramp carry over the next few (the examples'
  // ramps take 2 to 5 hours) and fade within an hour or two after it. The
  // cap is the level's: a forecast is never trusted to be off by more.
  Duration error_horizon = minutes(5);
  Duration margin_half_life = minutes(30);
  double max_margin = 2.0;
};

class LoadForecaster {
 public:
  explicit LoadForecaster(ForecasterOptions options = {});

  // Observations must come in time order per service; older ones than the
  // service's latest are ignored.
  void Observe(WorkloadId service, Time t, double rps);

  double Forecast(WorkloadId service, Time at) const;
  double PeakForecast(WorkloadId service, Time from, Time to) const;
  LoadBand Band(WorkloadId service, Time from, Time to) const;

  // True once the service's history covers a whole day (profile in use).
  bool HasDailyProfile(WorkloadId service) const;
  // The latest observed rate (0 if none).
  double LastObserved(WorkloadId service) const;
  // Max observed over [now - fallback_window, now].
  double RecentMax(WorkloadId service) const;
  // The learned margin m >= 1 (1 for a service never observed): how far the
  // load recently outran the short forecast. Capacity is sized for
  // m x max(current, PeakForecast).
  double Margin(WorkloadId service) const;

  const ForecasterOptions& options() const { return options_; }

  // The whole memory, and back: Restore replaces it, and fails (changing
  // nothing) when a series does not fit these options (its profiles must
  // have one entry per bucket of the day, its open cell a count >= 0).
  const std::map<WorkloadId, LoadSeries>& series() const { return series_; }
  Status Restore(std::map<WorkloadId, LoadSeries> series);

 private:
  using Series = LoadSeries;

  int buckets_per_day() const;
  int64_t CellOf(Time t) const;
  void CloseCell(Series& s) const;
  // The profile at `at`; buckets folded on day `as_of_day` or later count
  // with their value before that fold.
  double ProfileAt(const Series& s, Time at,
                   int64_t as_of_day = std::numeric_limits<int64_t>::max()) const;
  double BucketValue(const Series& s, int64_t cell,
                     int64_t as_of_day = std::numeric_limits<int64_t>::max()) const;
  double BucketPeak(const Series& s, int64_t cell) const;
  // The bucket's error, or fallback_margin x its mean before one is measured.
  double BucketDeviation(const Series& s, int64_t cell) const;
  template <typename Value>
  double Nearest(int64_t cell, Value value) const;
  double ForecastSeries(const Series& s, Time at) const;
  bool Trusted(const Series& s) const;
  double RecentMaxOf(const Series& s) const;
  double PeakForecastSeries(const Series& s, Time from, Time to) const;
  // Scores the short forecast issued error_horizon before `t` against `rps`,
  // updates the margin and issues the forecast for [t, t + error_horizon].
  void LearnMargin(Series& s, Time t, double rps) const;

  ForecasterOptions options_;
  std::map<WorkloadId, Series> series_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_LOAD_FORECASTER_H_
