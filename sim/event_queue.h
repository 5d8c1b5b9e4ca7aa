// The simulator's future: a binary min-heap of timed events. Events at the
// same instant pop in the order of their kind's rank (exits before arrivals
// before a scheduling pass), then in insertion order, so a run is a pure
// function of its inputs.
#ifndef TIDAL_SIM_EVENT_QUEUE_H_
#define TIDAL_SIM_EVENT_QUEUE_H_

#include <cstdint>
#include <queue>
#include <vector>

#include "core/common/time.h"

namespace tidal::sim {

enum class EventKind : uint8_t {
  // Ranks: lower pops first at equal times.
  kVictimExit = 0,   // a preempted or shrunk workload leaves its GPUs
  kFinish = 1,       // a workload completes its work
  kReplicaReady = 2, // an inference replica finished its cold start
  kArrival = 3,      // a workload is submitted
  kLoadStep = 4,     // a new load minute starts
  kCheckpoint = 5,   // a running job saved a checkpoint (before a pass prices victims)
  kPass = 6,         // a scheduling pass
};

struct Event {
  Time at;
  EventKind kind = EventKind::kPass;
  uint64_t seq = 0;       // insertion order, the final tie-break
  uint64_t subject = 0;   // kind-specific: a workload index, a service index
  uint64_t generation = 0;  // lets a later reschedule make an earlier event stale
};

class EventQueue {
 public:
  void Push(Time at, EventKind kind, uint64_t subject = 0, uint64_t generation = 0) {
    heap_.push(Event{at, kind, next_seq_++, subject, generation});
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.top(); }
  Event Pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  void Reserve(size_t n) {
    std::vector<Event> storage;
    storage.reserve(n);
    heap_ = Heap(Later(), std::move(storage));
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.at != b.at) return a.at > b.at;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.seq > b.seq;
    }
  };
  using Heap = std::priority_queue<Event, std::vector<Event>, Later>;
  Heap heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace tidal::sim

#endif  // TIDAL_SIM_EVENT_QUEUE_H_
