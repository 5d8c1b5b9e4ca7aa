// When held GPUs come back: one event per pod at its expected end, i.e. a
// running allocation's start + expected_duration (now, if already overdue),
// a terminating one's grace deadline, and the same for what the current pass
// places or preempts. Work with an unknown duration never appears. Estimates
// and reservations walk these events in time order.
#ifndef TIDAL_CORE_ENGINE_RELEASE_TIMELINE_H_
#define TIDAL_CORE_ENGINE_RELEASE_TIMELINE_H_

#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/allocation.h"

namespace tidal::engine {

struct ReleaseEvent {
  Time at;
  NodeId node;
  GpuMask gpus = 0;
  QueueId queue;
  uint32_t seq = 0;    // insertion order, the final tie-break
  int32_t alloc = -1;  // the snapshot allocation it ends, or -1
};

class ReleaseTimeline {
 public:
  ReleaseTimeline() = default;
  // Room for the pods of about `allocations` allocations.
  explicit ReleaseTimeline(size_t allocations) { events_.reserve(allocations * 2); }
  // When an allocation's end moves (it was preempted), the caller adds a new
  // event for it and skips the old one as stale while walking.
  void Add(Time at, QueueId queue, const std::vector<PodPlacement>& pods, int32_t alloc = -1);
  // Events in (time, insertion) order. Events added since the last call are
  // sorted and merged in, so a few additions cost O(n), not a full sort.
  const std::vector<ReleaseEvent>& events();

 private:
  std::vector<ReleaseEvent> events_;
  size_t sorted_prefix_ = 0;
};

}  // namespace tidal::engine

#endif  // TIDAL_CORE_ENGINE_RELEASE_TIMELINE_H_
