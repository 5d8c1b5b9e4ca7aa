// The long-poll registry behind GET /v1/agent/nodes/{node}/pods?wait_ms=.
#include "server/node_pods_watch.h"

#include <atomic>
#include <chrono>
#include <future>
#include <string>

#include <gtest/gtest.h>

namespace tidal::server {
namespace {

using Clock = NodePodsWatch::Clock;
constexpr auto kLong = std::chrono::hours(1);

TEST(NodePodsWatchTest, AWaiterWithAnOldVersionIsAnsweredAtOnce) {
  NodePodsWatch watch(/*boot_id=*/7);
  EXPECT_EQ(watch.Version(3), "7-0");
  watch.Changed(3);
  EXPECT_EQ(watch.Version(3), "7-1");
  EXPECT_EQ(watch.Version(2), "7-0");  // other nodes keep theirs
  EXPECT_FALSE(watch.Park(3, "7-0", Clock::now() + kLong, [] { FAIL() << "not parked, so never run"; }));
  // A version from an earlier server process (another boot id) never matches.
  EXPECT_FALSE(watch.Park(2, "6-0", Clock::now() + kLong, [] {}));
  EXPECT_EQ(watch.parked(), 0u);
}

TEST(NodePodsWatchTest, AChangeWakesTheNodesWaitersOnly) {
  NodePodsWatch watch(1);
  std::promise<void> woken;
  std::atomic<int> other_runs{0};
  ASSERT_TRUE(watch.Park(0, "1-0", Clock::now() + kLong, [&] { woken.set_value(); }));
  ASSERT_TRUE(watch.Park(1, "1-0", Clock::now() + kLong, [&] { ++other_runs; }));
  EXPECT_EQ(watch.parked(), 2u);
  watch.Changed(0);
  woken.get_future().wait();
  EXPECT_EQ(watch.parked(), 1u);
  EXPECT_EQ(other_runs, 0);
}

TEST(NodePodsWatchTest, AWaiterIsAnsweredAtItsDeadline) {
  NodePodsWatch watch(1);
  std::promise<Clock::time_point> ran;
  const auto deadline = Clock::now() + std::chrono::milliseconds(50);
  ASSERT_TRUE(watch.Park(0, "1-0", deadline, [&] { ran.set_value(Clock::now()); }));
  EXPECT_GE(ran.get_future().get(), deadline);
  EXPECT_EQ(watch.parked(), 0u);
}

// A hostile node credential reconnecting in a loop cannot park without
// bound: past kMaxWaitersPerNode the oldest is answered.
TEST(NodePodsWatchTest, WaitersPerNodeAreBounded) {
  NodePodsWatch watch(1);
  std::atomic<int> answered{0};
  for (size_t i = 0; i < NodePodsWatch::kMaxWaitersPerNode + 10; ++i) {
    ASSERT_TRUE(watch.Park(0, "1-0", Clock::now() + kLong, [&] { ++answered; }));
  }
  watch.AnswerAll();  // returns once every continuation ran
  EXPECT_EQ(answered, static_cast<int>(NodePodsWatch::kMaxWaitersPerNode + 10));
  EXPECT_EQ(watch.parked(), 0u);
}

TEST(NodePodsWatchTest, TheDestructorAnswersWhatIsParked) {
  std::atomic<int> answered{0};
  {
    NodePodsWatch watch(1);
    ASSERT_TRUE(watch.Park(4, "1-0", Clock::now() + kLong, [&] { ++answered; }));
  }
  EXPECT_EQ(answered, 1);
}

}  // namespace
}  // namespace tidal::server
