// When held GPUs come back: one event per pod at its expected end, i.e. a
// running allocation's start + expected_duration (now, if already overdue),
// a terminating one's grace deadline, and the same for what the current pass
// places or preempts. Work with an unknown duration never appears. Estimates
// and reservations walk these events in time order.
//
// They are put in order only as far as a reader walks: a pass's readers
// stop at the first time enough GPUs come back, about 40 events into ~180
// over Philly's backlog, so the events not yet walked wait in a min-heap
// (built once, O(n)), and each event walked is taken off it (O(log n)),
// instead of a whole sort per pass. The heap and the order hold 16-byte
// keys (time, insertion number), which index the events kept in insertion
// order. Every event in order is no later than any in the heap, so an event
// added later than the last in order goes to the heap, and one added
// earlier (rare: what a pass places ends after what runs) is inserted in
// order.
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
  int32_t alloc = -1;  // the snapshot allocation it ends, or -1
};

class ReleaseTimeline {
 public:
  ReleaseTimeline() = default;
  // Room for the pods of about `allocations` allocations.
  explicit ReleaseTimeline(size_t allocations) {
    events_.reserve(allocations * 2);
    heap_.reserve(allocations * 2);
  }
  // When an allocation's end moves (it was preempted), the caller adds a new
  // event for it and skips the old one as stale while walking.
  void Add(Time at, QueueId queue, const std::vector<PodPlacement>& pods, int32_t alloc = -1);
  // The i-th event in (time, insertion) order, or null past the last.
  // Valid until the next Add.
  const ReleaseEvent* At(size_t i) {
    if (i >= ordered_.size()) TakeInOrder(i + 1);
    return i < ordered_.size() ? &events_[ordered_[i].seq] : nullptr;
  }

 private:
  struct Key {
    Time at;
    uint32_t seq;  // the event's index in events_
    bool operator<(const Key& o) const { return at != o.at ? at < o.at : seq < o.seq; }
  };

  // Moves the heap's first events to ordered_ until it holds `n` (or the
  // heap is empty).
  void TakeInOrder(size_t n);

  std::vector<ReleaseEvent> events_;  // in insertion order
  std::vector<Key> ordered_;
  // The events not in order yet: [0, heaped_) a min-heap, then those
  // added since, heaped when next read.
  std::vector<Key> heap_;
  size_t heaped_ = 0;
};

}  // namespace tidal::engine

#endif  // TIDAL_CORE_ENGINE_RELEASE_TIMELINE_H_
