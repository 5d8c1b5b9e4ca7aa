// The wall clock, outside core/ (the engine only ever gets `now` handed in).
#ifndef TIDAL_SERVER_SYSTEM_CLOCK_H_
#define TIDAL_SERVER_SYSTEM_CLOCK_H_

#include <chrono>

#include "core/common/time.h"

namespace tidal::server {

class SystemClock final : public Clock {
 public:
  Time Now() const override {
    return TimeFromMillis(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
  }
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_SYSTEM_CLOCK_H_
