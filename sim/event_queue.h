// The simulator's future: a binary min-heap of timed events. Events at the
// same instant pop in the order of their kind's rank (exits before arrivals
// before a scheduling pass), then in insertion order, so a run is a pure
// function of its inputs. Events known up front (arrivals) may instead be
// added with PushBulk: they wait in one array sorted once, and each pop takes
// the earlier of its head and the heap's top, the same order as Push gives.
// A week of a million arrivals in the heap made every pop sift through a
// 40 MB heap.
#ifndef TIDAL_SIM_EVENT_QUEUE_H_
#define TIDAL_SIM_EVENT_QUEUE_H_

#include <algorithm>
#include <cstddef>
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
  kAgentLost = 6,    // a node's agent stopped heartbeating (its last lease)
  kIdle = 7,         // a debug session's GPUs went idle
  kGpuFault = 8,     // a GPU reported a fatal error
  kPass = 9,         // a scheduling pass
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
  void PushBulk(Time at, EventKind kind, uint64_t subject = 0, uint64_t generation = 0) {
    bulk_.push_back(Event{at, kind, next_seq_++, subject, generation});
    bulk_sorted_ = false;
  }
  bool empty() const { return heap_.empty() && bulk_next_ == bulk_.size(); }
  size_t size() const { return heap_.size() + (bulk_.size() - bulk_next_); }
  const Event& top() const { return FromBulk() ? bulk_[bulk_next_] : heap_.top(); }
  Event Pop() {
    if (FromBulk()) return bulk_[bulk_next_++];
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

  // Whether the next event is the bulk array's head.
  bool FromBulk() const {
    if (!bulk_sorted_) {
      // What is left of the array, after the bulk pushes since the last sort.
      std::sort(bulk_.begin() + static_cast<std::ptrdiff_t>(bulk_next_), bulk_.end(),
                [](const Event& a, const Event& b) { return Later()(b, a); });
      bulk_sorted_ = true;
    }
    if (bulk_next_ == bulk_.size()) return false;
    return heap_.empty() || Later()(heap_.top(), bulk_[bulk_next_]);
  }

  Heap heap_;
  // Sorted earliest first once bulk_sorted_; bulk_next_ is its head.
  mutable std::vector<Event> bulk_;
  mutable bool bulk_sorted_ = true;
  size_t bulk_next_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace tidal::sim

#endif  // TIDAL_SIM_EVENT_QUEUE_H_
