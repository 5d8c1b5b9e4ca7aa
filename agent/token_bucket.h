// A token bucket: `rate_per_s` tokens accrue per second up to `burst`; a
// caller takes tokens for what it is about to do. Time is handed in, so the
// arithmetic is testable without sleeping.
#ifndef TIDAL_AGENT_TOKEN_BUCKET_H_
#define TIDAL_AGENT_TOKEN_BUCKET_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace tidal::agent {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  // rate_per_s <= 0 means unlimited.
  TokenBucket(double rate_per_s, double burst, Clock::time_point now)
      : rate_per_s_(rate_per_s), burst_(burst), tokens_(burst), last_(now) {}

  // Takes up to `wanted` whole tokens and returns how many were granted.
  int64_t Take(int64_t wanted, Clock::time_point now) {
    if (rate_per_s_ <= 0) return wanted;
    Refill(now);
    const int64_t granted = std::min<int64_t>(wanted, static_cast<int64_t>(tokens_));
    tokens_ -= static_cast<double>(granted);
    return granted;
  }

  double tokens(Clock::time_point now) {
    Refill(now);
    return tokens_;
  }

 private:
  void Refill(Clock::time_point now) {
    if (now <= last_) return;
    const double elapsed_s = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed_s * rate_per_s_);
    last_ = now;
  }

  double rate_per_s_;
  double burst_;
  double tokens_;
  Clock::time_point last_;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_TOKEN_BUCKET_H_
