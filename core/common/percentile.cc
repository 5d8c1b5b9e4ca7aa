#include "core/common/percentile.h"

#include <algorithm>
#include <cmath>

namespace tidal {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size()));
  const size_t index = std::min(rank < 1 ? size_t{0} : static_cast<size_t>(rank) - 1, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<long>(index), values.end());
  return values[index];
}

}  // namespace tidal
