// The one price of stopping a workload (core/model/lost_work.h).
#include "core/model/lost_work.h"

#include <gtest/gtest.h>

namespace tidal {
namespace {

Workload Training(Duration interval, Duration save) {
  Workload w;
  w.kind = WorkloadKind::kTraining;
  w.training.checkpoint_interval = interval;
  w.training.checkpoint_on_request = save;
  return w;
}

TEST(LostWorkTest, WorkSinceTheLastCheckpointUnlessTheJobSavesOnRequest) {
  const Time last = TimeFromMillis(10'000);
  const Time now = TimeFromMillis(100'000);
  // Saves only at its interval: 8 GPUs x (100 - 10) s = 720 GPU-s.
  const Workload periodic = Training(minutes(30), Duration(0));
  EXPECT_FALSE(SavesOnRequest(&periodic, seconds(60)));
  EXPECT_DOUBLE_EQ(LostGpuSeconds(&periodic, 8, last, now, seconds(60)), 720.0);
  // A checkpoint "after" now (a clock behind the agent's) loses nothing.
  EXPECT_DOUBLE_EQ(LostGpuSeconds(&periodic, 8, now + seconds(5), now, seconds(60)), 0.0);
  // Saves on request in 20 s, within a 60 s grace: 8 x 20 = 160 GPU-s,
  // however long ago it last checkpointed.
  const Workload asks = Training(minutes(30), seconds(20));
  EXPECT_TRUE(SavesOnRequest(&asks, seconds(60)));
  EXPECT_DOUBLE_EQ(LostGpuSeconds(&asks, 8, last, now, seconds(60)), 160.0);
  EXPECT_DOUBLE_EQ(LostGpuSeconds(&asks, 8, last - hours(5), now, seconds(60)), 160.0);
}

TEST(LostWorkTest, ASaveTheGraceCannotCoverIsPricedAsNoSave) {
  // A 90 s save with 60 s of grace would be killed mid-save: 4 x 90 = 360
  // GPU-s since the checkpoint, not 4 x 90 of saving.
  const Workload slow = Training(Duration(0), seconds(90));
  EXPECT_FALSE(SavesOnRequest(&slow, seconds(60)));
  EXPECT_DOUBLE_EQ(LostGpuSeconds(&slow, 4, TimeFromMillis(0), TimeFromMillis(90'000), seconds(60)), 360.0);
  // Exactly covered: it saves.
  EXPECT_TRUE(SavesOnRequest(&slow, seconds(90)));
}

TEST(LostWorkTest, OnlyTrainingSavesOnRequestAndAnUnknownWorkloadDoesNot) {
  Workload debug = Training(Duration(0), seconds(10));
  debug.kind = WorkloadKind::kDebug;
  EXPECT_FALSE(SavesOnRequest(&debug, seconds(60)));
  EXPECT_FALSE(SavesOnRequest(nullptr, seconds(60)));
  // The allocation form counts from its start when it never checkpointed:
  // 2 pods x 4 GPUs x 50 s = 400 GPU-s.
  Allocation a;
  a.pods = {{NodeId(0), 0x0F}, {NodeId(1), 0xF0}};
  a.start_time = TimeFromMillis(50'000);
  a.last_checkpoint = Time();
  EXPECT_DOUBLE_EQ(LostGpuSeconds(nullptr, a, TimeFromMillis(100'000), seconds(60)), 400.0);
}

}  // namespace
}  // namespace tidal
