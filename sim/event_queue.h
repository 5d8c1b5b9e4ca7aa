// The simulator's future: a 4-ary min-heap of timed events. Events at the
// same instant pop in the order of their kind's rank (exits before arrivals
// before a scheduling pass), then in insertion order, so a run is a pure
// function of its inputs (the order is total, so any correct heap pops the
// same sequence). Four children a node halve a binary heap's depth and sit
// in adjacent cache lines: with ~60,000 events (2.4 MB) pending in a
// million-job week, a binary heap's pops were a quarter of the run, one
// cache miss per level. Events known up front (arrivals) may instead be
// added with PushBulk: they wait in one array sorted once, and each pop takes
// the earlier of its head and the heap's top, the same order as Push gives.
// A week of a million arrivals in the heap made every pop sift through a
// 40 MB heap.
#ifndef TIDAL_SIM_EVENT_QUEUE_H_
#define TIDAL_SIM_EVENT_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    heap_.push_back(Event{at, kind, next_seq_++, subject, generation});
    SiftUp(heap_.size() - 1);
  }
  void PushBulk(Time at, EventKind kind, uint64_t subject = 0, uint64_t generation = 0) {
    bulk_.push_back(Event{at, kind, next_seq_++, subject, generation});
    bulk_sorted_ = false;
  }
  bool empty() const { return heap_.empty() && bulk_next_ == bulk_.size(); }
  size_t size() const { return heap_.size() + (bulk_.size() - bulk_next_); }
  const Event& top() const { return FromBulk() ? bulk_[bulk_next_] : heap_.front(); }
  Event Pop() {
    if (FromBulk()) return bulk_[bulk_next_++];
    const Event e = heap_.front();
    if (heap_.size() > 1) {
      heap_.front() = heap_.back();
      heap_.pop_back();
      SiftDown(0);
    } else {
      heap_.pop_back();
    }
    return e;
  }
  void Reserve(size_t n) { heap_.reserve(n); }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.at != b.at) return a.at > b.at;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.seq > b.seq;
    }
  };
  static constexpr size_t kArity = 4;

  void SiftUp(size_t i) {
    const Event e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!Later()(heap_[parent], e)) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void SiftDown(size_t i) {
    const size_t n = heap_.size();
    const Event e = heap_[i];
    for (;;) {
      const size_t first = kArity * i + 1;
      if (first >= n) break;
      size_t earliest = first;
      for (size_t c = first + 1; c < std::min(first + kArity, n); ++c) {
        if (Later()(heap_[earliest], heap_[c])) earliest = c;
      }
      if (!Later()(e, heap_[earliest])) break;
      heap_[i] = heap_[earliest];
      i = earliest;
    }
    heap_[i] = e;
  }

  // Whether the next event is the bulk array's head.
  bool FromBulk() const {
    if (!bulk_sorted_) {
      // What is left of the array, after the bulk pushes since the last sort.
      std::sort(bulk_.begin() + static_cast<std::ptrdiff_t>(bulk_next_), bulk_.end(),
                [](const Event& a, const Event& b) { return Later()(b, a); });
      bulk_sorted_ = true;
    }
    if (bulk_next_ == bulk_.size()) return false;
    return heap_.empty() || Later()(heap_.front(), bulk_[bulk_next_]);
  }

  std::vector<Event> heap_;  // heap_[0] pops first; node i's children are 4i+1..4i+4
  // Sorted earliest first once bulk_sorted_; bulk_next_ is its head.
  mutable std::vector<Event> bulk_;
  mutable bool bulk_sorted_ = true;
  size_t bulk_next_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace tidal::sim

#endif  // TIDAL_SIM_EVENT_QUEUE_H_
