#include "core/engine/release_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

namespace tidal::engine {
namespace {

// Every event, read in order from the start.
std::vector<ReleaseEvent> ReadAll(ReleaseTimeline& t) {
  std::vector<ReleaseEvent> out;
  for (size_t i = 0; const ReleaseEvent* e = t.At(i); ++i) out.push_back(*e);
  return out;
}

std::vector<uint32_t> Nodes(const std::vector<ReleaseEvent>& events) {
  std::vector<uint32_t> nodes;
  for (const ReleaseEvent& e : events) nodes.push_back(e.node.value());
  return nodes;
}

TEST(ReleaseTimelineTest, EventsComeInTimeThenInsertionOrderAcrossAdds) {
  ReleaseTimeline t;
  const QueueId q(0);
  t.Add(TimeFromMillis(300), q, {{NodeId(1), 0x1}});
  t.Add(TimeFromMillis(100), q, {{NodeId(2), 0x1}, {NodeId(3), 0x1}});
  ASSERT_EQ(ReadAll(t).size(), 3u);
  // Added after a read: put in place, ties kept in insertion order.
  t.Add(TimeFromMillis(100), q, {{NodeId(4), 0x1}});
  t.Add(TimeFromMillis(200), q, {{NodeId(5), 0x1}}, /*alloc=*/7);
  t.Add(kInfiniteFuture, q, {{NodeId(6), 0x1}});  // never: not an event
  const std::vector<ReleaseEvent> all = ReadAll(t);
  EXPECT_EQ(Nodes(all), (std::vector<uint32_t>{2, 3, 4, 5, 1}));
  EXPECT_EQ(all[3].alloc, 7);
  EXPECT_EQ(all[0].alloc, -1);
}

TEST(ReleaseTimelineTest, APartialReadThenAddsGiveTheOrderOfAWholeSort) {
  // 200 seeds: events at random times (many ties), read part of the way,
  // more added (some before what was read, some after), then read whole.
  // The order must be (time, insertion) over all of them, as a stable sort
  // of everything added gives it.
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    ReleaseTimeline t;
    std::vector<std::pair<int64_t, uint32_t>> added;  // (ms, node) in insertion order
    const auto add = [&](int n) {
      for (int k = 0; k < n; ++k) {
        const int64_t ms = std::uniform_int_distribution<int64_t>(0, 20)(rng) * 100;
        const auto node = static_cast<uint32_t>(added.size());
        t.Add(TimeFromMillis(ms), QueueId(0), {{NodeId(node), 0x1}});
        added.emplace_back(ms, node);
      }
    };
    add(std::uniform_int_distribution<int>(0, 40)(rng));
    const size_t read = std::uniform_int_distribution<size_t>(0, 50)(rng);
    for (size_t i = 0; i < read; ++i) t.At(i);
    add(std::uniform_int_distribution<int>(0, 20)(rng));
    std::stable_sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<uint32_t> want;
    for (const auto& [ms, node] : added) want.push_back(node);
    EXPECT_EQ(Nodes(ReadAll(t)), want) << "seed " << seed << ", first read " << read;
  }
}

}  // namespace
}  // namespace tidal::engine
