// The one seeded random source. std::uniform_*_distribution output differs
// between standard libraries, so draws are computed here from the raw 64-bit
// engine output, which the standard fixes; the same seed gives the same
// sequence everywhere.
#ifndef TIDAL_CORE_COMMON_RNG_H_
#define TIDAL_CORE_COMMON_RNG_H_

#include <cstdint>
#include <random>

namespace tidal {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t NextU64() { return engine_(); }
  // Uniform in [0, 1), 53 bits of precision.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi].
  int64_t UniformInt(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(span == 0 ? engine_() : engine_() % span);
  }
  // Exponential with the given mean (inverse transform).
  double Exponential(double mean);
  bool Bernoulli(double p) { return Uniform() < p; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_COMMON_RNG_H_
