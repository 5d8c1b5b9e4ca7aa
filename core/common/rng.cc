#include "core/common/rng.h"

#include <cmath>

namespace tidal {

double Rng::Exponential(double mean) {
  // 1 - U is in (0, 1], so the log is finite.
  return -mean * std::log(1.0 - Uniform());
}

}  // namespace tidal
