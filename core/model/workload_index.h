// WorkloadId -> index into Snapshot::workloads, built once per pass. Ids are
// usually close to dense (both the server and the simulator number workloads
// in submit order), so when the live ids span at most 16x their count plus
// 4096 the index is a flat vector over [min id, max id]: one store per
// workload and one load per lookup, no hashing and no allocation per entry.
// Sparser ids fall back to a hash map.
//
// In model/ because it indexes model records and both the scheduling pass and
// the co-location planner build one; namespace tidal::engine as before.
#ifndef TIDAL_CORE_MODEL_WORKLOAD_INDEX_H_
#define TIDAL_CORE_MODEL_WORKLOAD_INDEX_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/common/ids.h"
#include "core/model/snapshot.h"
#include "core/model/workload.h"

namespace tidal::engine {

class WorkloadIndex {
 public:
  explicit WorkloadIndex(const std::vector<Workload>& workloads);
  // The same, reading the ids from the snapshot's workload digests when it
  // has them (64 bytes each, in one run) rather than from the records (a
  // cache miss each over a backlog tens of thousands deep).
  explicit WorkloadIndex(const Snapshot& snapshot);

  // The index of allocation `allocation`'s workload in `snapshot` (the one
  // this index was built from), or -1: the state's kept
  // allocation_workloads when the snapshot has them, else Find. A walk over
  // every allocation then reads no workload id through the flat index.
  int OfAllocation(const Snapshot& snapshot, size_t allocation) const {
    if (snapshot.allocation_workloads.size() == snapshot.allocations.size()) {
      return static_cast<int>(snapshot.allocation_workloads[allocation]);
    }
    return Find(snapshot.allocations[allocation].workload);
  }

  // The index of `id`, or -1 when it is not in the snapshot.
  int Find(WorkloadId id) const {
    if (dense_) {
      const uint64_t v = id.value();
      if (v < min_ || v - min_ >= flat_.size()) return -1;
      return flat_[v - min_];
    }
    auto it = sparse_.find(id);
    return it == sparse_.end() ? -1 : it->second;
  }

 private:
  // Builds from the ids in workload order.
  void Build(const std::vector<uint64_t>& ids);

  bool dense_ = true;
  uint64_t min_ = 0;
  std::vector<int> flat_;
  std::unordered_map<WorkloadId, int> sparse_;
};

}  // namespace tidal::engine

namespace tidal {

// The kind of workload `index` of `snapshot`, from its digest when the
// snapshot has digests (64 bytes each, in one run) rather than its record.
inline WorkloadKind KindAt(const Snapshot& snapshot, int index) {
  const size_t i = static_cast<size_t>(index);
  if (snapshot.workload_digests.size() == snapshot.workloads.size()) return snapshot.workload_digests[i].kind;
  return snapshot.workloads[i].kind;
}

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_WORKLOAD_INDEX_H_
