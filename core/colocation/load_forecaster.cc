#include "core/colocation/load_forecaster.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/common/check.h"

namespace tidal {
namespace {

constexpr int64_t kDayMs = 24LL * 3600 * 1000;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

LoadForecaster::LoadForecaster(ForecasterOptions options) : options_(options) {
  TIDAL_CHECK(options_.bucket.count() > 0 && kDayMs % options_.bucket.count() == 0)
      << "forecast bucket must divide a day";
  TIDAL_CHECK(options_.alpha > 0 && options_.alpha <= 1) << "alpha " << options_.alpha;
  TIDAL_CHECK(options_.beta >= 0 && options_.beta <= 1) << "beta " << options_.beta;
  TIDAL_CHECK(options_.error_horizon.count() >= 0) << "error_horizon must not be negative";
  TIDAL_CHECK(options_.margin_half_life.count() > 0) << "margin_half_life must be positive";
  TIDAL_CHECK(options_.max_margin >= 1) << "max_margin " << options_.max_margin;
}

int LoadForecaster::buckets_per_day() const {
  return static_cast<int>(kDayMs / options_.bucket.count());
}

int64_t LoadForecaster::CellOf(Time t) const {
  return FloorDiv(ToMillis(t), options_.bucket.count());
}

void LoadForecaster::CloseCell(Series& s) const {
  if (s.cell_count == 0) return;
  const double mean = s.cell_sum / s.cell_count;
  const double peak = s.cell_max;
  const int64_t n = buckets_per_day();
  const auto b = static_cast<size_t>(((s.cell % n) + n) % n);
  double& p = s.profile[b];
  const int64_t day = FloorDiv(s.cell, n);
  if (s.fold_day[b] != day) s.before_fold[b] = p;
  s.fold_day[b] = day;
  if (const double before = s.before_fold[b]; before >= 0) {
    const double error = std::abs(mean - before);
    double& d = s.deviation[b];
    d = d < 0 ? error : options_.alpha * error + (1 - options_.alpha) * d;
  }
  p = p < 0 ? mean : options_.alpha * mean + (1 - options_.alpha) * p;
  double& q = s.peak_profile[b];
  q = q < 0 ? peak : options_.alpha * peak + (1 - options_.alpha) * q;
  s.cell_sum = 0;
  s.cell_max = 0;
  s.cell_count = 0;
}

void LoadForecaster::Observe(WorkloadId service, Time t, double rps) {
  rps = std::max(0.0, rps);
  auto [it, inserted] = series_.try_emplace(service);
  Series& s = it->second;
  if (inserted) {
    s.first_seen = t;
    s.profile.assign(static_cast<size_t>(buckets_per_day()), -1.0);
    s.before_fold.assign(s.profile.size(), -1.0);
    s.peak_profile.assign(s.profile.size(), -1.0);
    s.deviation.assign(s.profile.size(), -1.0);
    s.fold_day.assign(s.profile.size(), std::numeric_limits<int64_t>::min());
  } else if (t < s.last_seen) {
    return;
  }
  // The margin decays over the time since the previous observation.
  const Duration since_last = inserted ? Duration(0) : t - s.last_seen;
  const int64_t cell = CellOf(t);
  if (cell != s.cell) {
    CloseCell(s);
    s.cell = cell;
  }
  s.cell_sum += rps;
  s.cell_max = std::max(s.cell_max, rps);
  ++s.cell_count;

  // The level ratio only means something against a trusted profile.
  if (Trusted(s)) {
    // Against the bucket itself, not the interpolation: next to a step the
    // interpolated profile is off by half the step, which is not a level.
    const double expected = BucketValue(s, cell, FloorDiv(cell, buckets_per_day()));
    if (expected > 1e-9) {
      const double ratio = rps / expected;
      s.level = std::clamp(options_.beta * ratio + (1 - options_.beta) * s.level,
                           options_.min_level, options_.max_level);
    }
  }

  s.last_seen = t;
  s.last_rps = rps;
  s.recent.emplace_back(t, rps);
  while (!s.recent.empty() && s.recent.front().first < t - options_.fallback_window) {
    s.recent.pop_front();
  }
  if (since_last > Duration(0)) {
    const double halvings = ToSeconds(since_last) / ToSeconds(options_.margin_half_life);
    s.margin = 1 + (s.margin - 1) * std::exp2(-halvings);
  }
  LearnMargin(s, t, rps);
}

void LoadForecaster::LearnMargin(Series& s, Time t, double rps) const {
  // The forecast that had to cover t: the latest issued at or before
  // t - error_horizon. Older ones can never be that again.
  const Time due = t - options_.error_horizon;
  while (s.issued.size() >= 2 && s.issued[1].first <= due) s.issued.pop_front();
  if (!s.issued.empty() && s.issued.front().first <= due) {
    const double forecast = s.issued.front().second;
    double ratio = 1.0;
    if (forecast > 1e-9) {
      ratio = rps / forecast;
    } else if (rps > 1e-9) {
      ratio = options_.max_margin;
    }
    s.margin = std::max(s.margin, std::min(ratio, options_.max_margin));
  }
  s.margin = std::clamp(s.margin, 1.0, std::max(1.0, options_.max_margin));
  s.issued.emplace_back(t, std::max(rps, PeakForecastSeries(s, t, t + options_.error_horizon)));
}

Status LoadForecaster::Restore(std::map<WorkloadId, LoadSeries> series) {
  const auto buckets = static_cast<size_t>(buckets_per_day());
  for (const auto& [service, s] : series) {
    const bool fits = s.profile.size() == buckets && s.peak_profile.size() == buckets &&
                      s.deviation.size() == buckets && s.before_fold.size() == buckets &&
                      s.fold_day.size() == buckets;
    if (!fits) {
      return InvalidArgument("load series of workload " + std::to_string(service.value()) +
                             ": its profiles do not have one entry per bucket of the day (" +
                             std::to_string(buckets) + ")");
    }
    if (!(s.margin >= 1)) {
      return InvalidArgument("load series of workload " + std::to_string(service.value()) +
                             ": a margin below 1");
    }
    if (s.cell_count < 0) {
      return InvalidArgument("load series of workload " + std::to_string(service.value()) +
                             ": a negative observation count");
    }
  }
  series_ = std::move(series);
  return Status::Ok();
}

bool LoadForecaster::Trusted(const Series& s) const {
  if (s.last_seen - s.first_seen < Duration(kDayMs)) return false;
  return std::any_of(s.profile.begin(), s.profile.end(), [](double p) { return p >= 0; });
}

// A bucket never seen borrows its nearest seen neighbour.
double LoadForecaster::BucketValue(const Series& s, int64_t cell, int64_t as_of_day) const {
  return Nearest(cell, [&](size_t i) {
    return s.fold_day[i] >= as_of_day ? s.before_fold[i] : s.profile[i];
  });
}

double LoadForecaster::BucketPeak(const Series& s, int64_t cell) const {
  return Nearest(cell, [&](size_t i) { return s.peak_profile[i]; });
}

double LoadForecaster::BucketDeviation(const Series& s, int64_t cell) const {
  const bool measured =
      std::any_of(s.deviation.begin(), s.deviation.end(), [](double d) { return d >= 0; });
  if (!measured) return options_.fallback_margin * BucketValue(s, cell);
  return Nearest(cell, [&](size_t i) { return s.deviation[i]; });
}

template <typename Value>
double LoadForecaster::Nearest(int64_t cell, Value value) const {
  const int n = buckets_per_day();
  const int b = static_cast<int>(((cell % n) + n) % n);
  for (int d = 0; d <= n / 2; ++d) {
    const double after = value(static_cast<size_t>((b + d) % n));
    const double before = value(static_cast<size_t>((b - d + n) % n));
    // Of two equally near neighbours, the larger: under-forecasting costs SLO.
    if (after >= 0 || before >= 0) return std::max(after, before);
  }
  return 0.0;
}

// Linear interpolation between the centres of the two buckets around `at`.
double LoadForecaster::ProfileAt(const Series& s, Time at, int64_t as_of_day) const {
  const int64_t bucket_ms = options_.bucket.count();
  const int64_t shifted = ToMillis(at) - bucket_ms / 2;
  const int64_t left_cell = FloorDiv(shifted, bucket_ms);
  const double frac =
      static_cast<double>(shifted - left_cell * bucket_ms) / static_cast<double>(bucket_ms);
  return (1 - frac) * BucketValue(s, left_cell, as_of_day) +
         frac * BucketValue(s, left_cell + 1, as_of_day);
}

double LoadForecaster::ForecastSeries(const Series& s, Time at) const {
  if (!Trusted(s)) return RecentMaxOf(s) * (1 + options_.fallback_margin);
  return s.level * ProfileAt(s, at);
}

double LoadForecaster::RecentMaxOf(const Series& s) const {
  double peak = 0;
  for (const auto& [t, rps] : s.recent) peak = std::max(peak, rps);
  return peak;
}

double LoadForecaster::Forecast(WorkloadId service, Time at) const {
  auto it = series_.find(service);
  if (it == series_.end()) return 0;
  return ForecastSeries(it->second, at);
}

double LoadForecaster::PeakForecast(WorkloadId service, Time from, Time to) const {
  auto it = series_.find(service);
  if (it == series_.end()) return 0;
  return PeakForecastSeries(it->second, from, to);
}

double LoadForecaster::PeakForecastSeries(const Series& s, Time from, Time to) const {
  if (to < from) std::swap(from, to);
  double peak = std::max(ForecastSeries(s, from), ForecastSeries(s, to));
  if (!Trusted(s)) return peak;
  // Every bucket the interval touches counts whole, at the highest rate seen
  // in it: a step inside a bucket is seen from the bucket's start, at its
  // full height, never averaged down or smeared later.
  const int n = buckets_per_day();
  const int64_t first = CellOf(from);
  const int64_t last = std::min(CellOf(to), first + n - 1);
  double top = 0;
  for (int64_t cell = first; cell <= last; ++cell) {
    top = std::max(top, BucketPeak(s, cell));
  }
  peak = std::max(peak, s.level * top);
  return peak;
}

LoadBand LoadForecaster::Band(WorkloadId service, Time from, Time to) const {
  LoadBand band;
  auto it = series_.find(service);
  if (it == series_.end()) return band;
  const Series& s = it->second;
  if (to < from) std::swap(from, to);
  band.planned = PeakForecast(service, from, to);
  if (!Trusted(s)) {
    // No profile: the recent maximum, give or take the fallback margin.
    const double recent = RecentMaxOf(s);
    band.low = recent * std::max(0.0, 1 - options_.fallback_margin);
    band.high = std::max(band.planned, recent * (1 + 2 * options_.fallback_margin));
    return band;
  }
  const int n = buckets_per_day();
  const int64_t first = CellOf(from);
  const int64_t last = std::min(CellOf(to), first + n - 1);
  double low = std::numeric_limits<double>::infinity();
  double error = 0;
  for (int64_t cell = first; cell <= last; ++cell) {
    const double d = BucketDeviation(s, cell);
    low = std::min(low, BucketValue(s, cell) - d);
    error = std::max(error, d);
  }
  band.low = std::clamp(s.level * low, 0.0, band.planned);
  band.high = band.planned + s.level * error;
  return band;
}

bool LoadForecaster::HasDailyProfile(WorkloadId service) const {
  auto it = series_.find(service);
  return it != series_.end() && Trusted(it->second);
}

double LoadForecaster::LastObserved(WorkloadId service) const {
  auto it = series_.find(service);
  return it == series_.end() ? 0 : it->second.last_rps;
}

double LoadForecaster::Margin(WorkloadId service) const {
  auto it = series_.find(service);
  return it == series_.end() ? 1.0 : it->second.margin;
}

double LoadForecaster::RecentMax(WorkloadId service) const {
  auto it = series_.find(service);
  return it == series_.end() ? 0 : RecentMaxOf(it->second);
}

}  // namespace tidal
