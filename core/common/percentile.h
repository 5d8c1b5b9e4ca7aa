// The one percentile every figure uses, in the simulator's summary and the
// server's reports alike, so that a simulated P95 and a measured one mean the
// same thing: the nearest-rank percentile, the smallest value with at least
// q of the values at or below it (always a value that occurred, never an
// interpolation between two). Empty input gives 0.
#ifndef TIDAL_CORE_COMMON_PERCENTILE_H_
#define TIDAL_CORE_COMMON_PERCENTILE_H_

#include <vector>

namespace tidal {

// `q` is a fraction in [0, 1]: 0.95 for P95.
double Percentile(std::vector<double> values, double q);

}  // namespace tidal

#endif  // TIDAL_CORE_COMMON_PERCENTILE_H_
