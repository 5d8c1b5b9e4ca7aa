#include "core/model/workload_index.h"

#include <algorithm>

namespace tidal::engine {

WorkloadIndex::WorkloadIndex(const std::vector<Workload>& workloads) {
  // One pass over the (large) workload records; the rest reads this copy.
  std::vector<uint64_t> ids;
  ids.reserve(workloads.size());
  for (const Workload& w : workloads) ids.push_back(w.id.value());
  Build(ids);
}

WorkloadIndex::WorkloadIndex(const Snapshot& snapshot) {
  if (snapshot.workload_digests.size() != snapshot.workloads.size()) {
    *this = WorkloadIndex(snapshot.workloads);
    return;
  }
  std::vector<uint64_t> ids;
  ids.reserve(snapshot.workload_digests.size());
  for (const WorkloadDigest& d : snapshot.workload_digests) ids.push_back(d.id.value());
  Build(ids);
}

void WorkloadIndex::Build(const std::vector<uint64_t>& ids) {
  if (ids.empty()) return;
  const auto [lo_it, hi_it] = std::minmax_element(ids.begin(), ids.end());
  const uint64_t lo = *lo_it;
  const uint64_t span = *hi_it - lo + 1;
  dense_ = span <= 16 * static_cast<uint64_t>(ids.size()) + 4096;
  if (dense_) {
    min_ = lo;
    flat_.assign(span, -1);
    for (size_t i = 0; i < ids.size(); ++i) {
      int& slot = flat_[ids[i] - lo];
      if (slot < 0) slot = static_cast<int>(i);  // a duplicate id: the first wins
    }
    return;
  }
  sparse_.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) sparse_.emplace(WorkloadId(ids[i]), static_cast<int>(i));
}

}  // namespace tidal::engine
