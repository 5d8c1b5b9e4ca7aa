#include "core/model/workload_index.h"

#include <algorithm>

namespace tidal::engine {

WorkloadIndex::WorkloadIndex(const std::vector<Workload>& workloads) {
  if (workloads.empty()) return;
  // One pass over the (large) workload records; the rest reads this copy.
  std::vector<uint64_t> ids;
  ids.reserve(workloads.size());
  uint64_t lo = workloads.front().id.value();
  uint64_t hi = lo;
  for (const Workload& w : workloads) {
    const uint64_t id = w.id.value();
    ids.push_back(id);
    lo = std::min(lo, id);
    hi = std::max(hi, id);
  }
  const uint64_t span = hi - lo + 1;
  dense_ = span <= 16 * static_cast<uint64_t>(workloads.size()) + 4096;
  if (dense_) {
    min_ = lo;
    flat_.assign(span, -1);
    for (size_t i = 0; i < ids.size(); ++i) {
      int& slot = flat_[ids[i] - lo];
      if (slot < 0) slot = static_cast<int>(i);  // a duplicate id: the first wins
    }
    return;
  }
  sparse_.reserve(workloads.size());
  for (size_t i = 0; i < ids.size(); ++i) sparse_.emplace(WorkloadId(ids[i]), static_cast<int>(i));
}

}  // namespace tidal::engine
