#include "core/engine/release_timeline.h"

#include <gtest/gtest.h>

namespace tidal::engine {
namespace {

TEST(ReleaseTimelineTest, EventsComeInTimeThenInsertionOrderAcrossAdds) {
  ReleaseTimeline t;
  const QueueId q(0);
  t.Add(TimeFromMillis(300), q, {{NodeId(1), 0x1}});
  t.Add(TimeFromMillis(100), q, {{NodeId(2), 0x1}, {NodeId(3), 0x1}});
  ASSERT_EQ(t.events().size(), 3u);
  // Added after a read: merged into place, ties kept in insertion order.
  t.Add(TimeFromMillis(100), q, {{NodeId(4), 0x1}});
  t.Add(TimeFromMillis(200), q, {{NodeId(5), 0x1}}, /*alloc=*/7);
  t.Add(kInfiniteFuture, q, {{NodeId(6), 0x1}});  // never: not an event
  std::vector<uint32_t> nodes;
  for (const ReleaseEvent& e : t.events()) nodes.push_back(e.node.value());
  EXPECT_EQ(nodes, (std::vector<uint32_t>{2, 3, 4, 5, 1}));
  EXPECT_EQ(t.events()[3].alloc, 7);
  EXPECT_EQ(t.events()[0].alloc, -1);
}

}  // namespace
}  // namespace tidal::engine
