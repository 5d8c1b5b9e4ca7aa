#include <gtest/gtest.h>

#include <cstdint>
#include <queue>
#include <tuple>
#include <vector>

#include "core/common/rng.h"
#include "sim/event_queue.h"

namespace tidal::sim {
namespace {

std::vector<uint64_t> Drain(EventQueue& q) {
  std::vector<uint64_t> order;
  while (!q.empty()) order.push_back(q.Pop().subject);
  return order;
}

TEST(EventQueueBulkTest, BulkEventsPopInTheSameOrderAsPushedOnes) {
  EventQueue bulk, heap;
  // Arrivals out of time order, then heap events that tie with them.
  const int64_t arrivals_ms[] = {3000, 1000, 2000, 1000};
  for (uint64_t i = 0; i < 4; ++i) {
    bulk.PushBulk(TimeFromMillis(arrivals_ms[i]), EventKind::kArrival, i);
    heap.Push(TimeFromMillis(arrivals_ms[i]), EventKind::kArrival, i);
  }
  for (EventQueue* q : {&bulk, &heap}) {
    q->Push(TimeFromMillis(1000), EventKind::kPass, 10);
    q->Push(TimeFromMillis(2000), EventKind::kFinish, 11);
  }
  EXPECT_EQ(bulk.size(), 6u);
  // 1 s: arrivals 1 then 3 (insertion order), the pass; 2 s: the finish
  // (rank 1) before arrival 2 (rank 3); 3 s: arrival 0.
  const std::vector<uint64_t> want = {1, 3, 10, 11, 2, 0};
  EXPECT_EQ(Drain(heap), want);
  EXPECT_EQ(Drain(bulk), want);
}

TEST(EventQueueBulkTest, MatchesTheHeapOnARandomStream) {
  EventQueue bulk, heap;
  Rng rng(7);
  for (uint64_t i = 0; i < 500; ++i) {
    const Time at = TimeFromMillis(rng.UniformInt(0, 50) * 100);
    bulk.PushBulk(at, EventKind::kArrival, i);
    heap.Push(at, EventKind::kArrival, i);
  }
  std::vector<uint64_t> from_bulk, from_heap;
  // Pops interleaved with pushes, as the simulator does.
  for (uint64_t i = 0; i < 300; ++i) {
    const Event b = bulk.Pop();
    const Event h = heap.Pop();
    from_bulk.push_back(b.subject);
    from_heap.push_back(h.subject);
    if (i % 3 == 0) {
      bulk.Push(b.at + Duration(200), EventKind::kFinish, 1000 + i);
      heap.Push(h.at + Duration(200), EventKind::kFinish, 1000 + i);
    }
  }
  while (!bulk.empty()) from_bulk.push_back(bulk.Pop().subject);
  while (!heap.empty()) from_heap.push_back(heap.Pop().subject);
  EXPECT_EQ(from_bulk.size(), 600u);
  EXPECT_EQ(from_bulk, from_heap);
}

// The 4-ary heap pops exactly the order of a binary heap (std::priority_queue)
// under (time, kind rank, insertion order), with pushes between pops and
// many ties, as the simulator makes them.
TEST(EventQueueBulkTest, PopsTheOrderOfABinaryHeap) {
  using Key = std::tuple<int64_t, int, uint64_t>;  // (ms, rank, seq); lowest pops first
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> oracle;
  EventQueue q;
  Rng rng(11);
  uint64_t seq = 0;
  const auto push = [&](int64_t ms, EventKind kind) {
    q.Push(TimeFromMillis(ms), kind, seq);
    oracle.push({ms, static_cast<int>(kind), seq});
    ++seq;
  };
  for (int i = 0; i < 2000; ++i) push(rng.UniformInt(0, 40) * 100, static_cast<EventKind>(rng.UniformInt(0, 9)));
  int64_t now = 0;
  for (int i = 0; i < 20000 && !oracle.empty(); ++i) {
    const Event e = q.Pop();
    ASSERT_EQ(e.subject, std::get<2>(oracle.top())) << "pop " << i;
    oracle.pop();
    now = ToMillis(e.at);
    // Each pop schedules up to two events at or after it, ties included.
    for (int k = rng.UniformInt(0, 2); k > 0 && seq < 12000; --k) {
      push(now + rng.UniformInt(0, 3) * 100, static_cast<EventKind>(rng.UniformInt(0, 9)));
    }
  }
  EXPECT_TRUE(oracle.empty());
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace tidal::sim
