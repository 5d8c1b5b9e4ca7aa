// core/preemption/checkpoint_wait.h: stop the victims now, or just after
// their next checkpoints when that loses less.
#include "core/preemption/checkpoint_wait.h"

#include <vector>

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal::preemption {
namespace {

const Time kT0 = TimeFromMillis(0);
const Duration kGrace = seconds(60);

Workload Checkpointing(uint64_t id, Duration interval) {
  Workload w = testing::Job(id, QueueId(0), 1, 1, hours(10));
  w.training.checkpoint_interval = interval;
  return w;
}

TEST(CheckpointWaitTest, WaitsForACheckpointDueWithinTheLimit) {
  // Checkpoints every 30 min, the last at t0; now = t0 + 25 min; the
  // preemptor wants 6 GPUs. Now: 4 GPUs x 1500 s = 6000 GPU-s. At t0 +
  // 30 min: 4 x 0 = 0, plus the preemptor's 6 GPUs x 300 s = 1800: waiting
  // is cheaper.
  const Workload w = Checkpointing(1, minutes(30));
  const std::vector<UnsavedWork> victims{{&w, 4, kT0}};
  const StopTime stop = CheapestStopTime(victims, 6, kT0 + minutes(25), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(30));
  EXPECT_DOUBLE_EQ(stop.lost_gpu_seconds, 0.0);
  EXPECT_DOUBLE_EQ(stop.lost_now_gpu_seconds, 6000.0);
}

TEST(CheckpointWaitTest, StopsNowWhenTheCheckpointIsTooFarOrTheWaitCostsMore) {
  const Workload w = Checkpointing(1, minutes(30));
  const std::vector<UnsavedWork> victims{{&w, 1, kT0}};
  // Now = t0 + 15 min: the next checkpoint is 15 min away, past the 10 min
  // limit. Stopped now: 1 x 900 = 900 GPU-s.
  StopTime stop = CheapestStopTime(victims, 1, kT0 + minutes(15), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(15));
  EXPECT_DOUBLE_EQ(stop.lost_gpu_seconds, 900.0);
  // Now = t0 + 25 min, a 7-GPU preemptor: now 1 x 1500 = 1500 GPU-s; at
  // t0 + 30 min 0 + 7 x 300 = 2100. Stopping now is cheaper: the victim
  // would save less than the preemptor waits.
  stop = CheapestStopTime(victims, 7, kT0 + minutes(25), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(25));
  // A limit of 0 never waits.
  stop = CheapestStopTime(victims, 1, kT0 + minutes(25), Duration::zero(), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(25));
}

TEST(CheckpointWaitTest, PicksTheCheapestOfTheVictimsCheckpoints) {
  // A: 2 GPUs, every 30 min, last at t0. B: 1 GPU, every 10 min, last at
  // t0 + 20 min. Now = t0 + 27 min; a 3-GPU preemptor.
  //   now:          A 2 x 1620 = 3240, B 1 x 420 = 420  -> 3660
  //   t0 + 30 min:  A 0, B 0 (its next checkpoint is then too), plus the
  //                 preemptor's 3 x 180 = 540            ->  540
  // Both fall at t0 + 30 min, so stopping then loses nothing.
  const Workload a = Checkpointing(1, minutes(30));
  const Workload b = Checkpointing(2, minutes(10));
  const std::vector<UnsavedWork> victims{{&a, 2, kT0}, {&b, 1, kT0 + minutes(20)}};
  const StopTime stop = CheapestStopTime(victims, 3, kT0 + minutes(27), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(30));
  EXPECT_DOUBLE_EQ(stop.lost_gpu_seconds, 0.0);
  EXPECT_DOUBLE_EQ(stop.lost_now_gpu_seconds, 3660.0);
}

TEST(CheckpointWaitTest, VictimsThatSaveOnRequestOrNeverCheckpointAreStoppedNow) {
  // A job that saves in 20 s on request loses 1 x 20 = 20 GPU-s at any
  // time; one without checkpoints only loses more later.
  Workload saver = Checkpointing(1, minutes(30));
  saver.training.checkpoint_on_request = seconds(20);
  const Workload never = Checkpointing(2, Duration::zero());
  const std::vector<UnsavedWork> victims{{&saver, 1, kT0}, {&never, 1, kT0}, {nullptr, 1, kT0}};
  const StopTime stop = CheapestStopTime(victims, 3, kT0 + minutes(25), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(25));
  // 20 + 1500 + 1500.
  EXPECT_DOUBLE_EQ(stop.lost_gpu_seconds, 3020.0);
}

// Hostile: a job that declares a 5 min interval and never checkpoints
// would otherwise be waited for every 5 min, forever. Once it is late for a
// checkpoint (last at t0, now t0 + 7 min) it is priced as making no more:
// now 1 x 420 = 420 GPU-s, later only more. Stop now.
TEST(CheckpointWaitTest, AVictimLateForItsCheckpointIsNotWaitedFor) {
  const Workload w = Checkpointing(1, minutes(5));
  const std::vector<UnsavedWork> victims{{&w, 1, kT0}};
  StopTime stop = CheapestStopTime(victims, 1, kT0 + minutes(7), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(7));
  EXPECT_DOUBLE_EQ(stop.lost_gpu_seconds, 420.0);
  // On time (now t0 + 4 min) it is waited for, once: now 1 x 240 = 240
  // GPU-s, at t0 + 5 min 0 + the 1-GPU preemptor's 60.
  stop = CheapestStopTime(victims, 1, kT0 + minutes(4), minutes(10), kGrace);
  EXPECT_EQ(stop.at, kT0 + minutes(5));
}

}  // namespace
}  // namespace tidal::preemption
