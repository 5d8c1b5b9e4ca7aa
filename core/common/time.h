// Engine time. The engine never reads a wall clock: every pass receives `now`
// from its caller (the server's SystemClock or the simulator's SimClock), so a
// simulation replays production decisions exactly.
#ifndef TIDAL_CORE_COMMON_TIME_H_
#define TIDAL_CORE_COMMON_TIME_H_

#include <chrono>
#include <cstdint>

namespace tidal {

using Duration = std::chrono::milliseconds;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// A clock tag with no now(): time points are only ever handed in.
struct EngineClock {
  using rep = int64_t;
  using period = std::milli;
  using duration = Duration;
  using time_point = std::chrono::time_point<EngineClock, Duration>;
  static constexpr bool is_steady = true;
};

// Milliseconds since the Unix epoch in production, since the trace start in
// the simulator.
using Time = EngineClock::time_point;

constexpr Time TimeFromMillis(int64_t ms) { return Time(Duration(ms)); }
constexpr int64_t ToMillis(Time t) { return t.time_since_epoch().count(); }
constexpr double ToSeconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }
constexpr double ToSeconds(Time t) { return ToSeconds(t.time_since_epoch()); }
constexpr Duration SecondsF(double s) { return Duration(static_cast<int64_t>(s * 1000.0)); }

inline constexpr Time kInfiniteFuture = Time::max();

// The caller's source of `now`. Implementations live outside core/.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

// A clock that only moves when told to; used by the simulator and tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Time start = Time()) : now_(start) {}
  Time Now() const override { return now_; }
  void Set(Time t) { now_ = t; }
  void Advance(Duration d) { now_ += d; }

 private:
  Time now_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_COMMON_TIME_H_
