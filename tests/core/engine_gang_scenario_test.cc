// Issue #2 point 1: gang scheduling, no deadlock, no starvation, backfill.
#include <gtest/gtest.h>

#include "core/common/rng.h"
#include "core/engine/scheduler.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/engine_driver.h"

namespace tidal {
namespace {

using testing::EngineDriver;
using testing::Job;

const WaitDecision* FindWait(const Decisions& d, WorkloadId id) {
  for (const WaitDecision& w : d.waits) {
    if (w.workload == id) return &w;
  }
  return nullptr;
}

TEST(GangScenarioTest, TwoLargeGangsOnTooFewGpusExactlyOneRuns) {
  // 3 racks x 4 nodes x 8 GPUs = 96 free GPUs; two 8 x 8 = 64-GPU gangs.
  EngineDriver driver(testing::SimpleCluster(3, 4));
  driver.Submit(Job(1, QueueId(0), 8, 8, hours(1), 0, TimeFromMillis(0)));
  driver.Submit(Job(2, QueueId(0), 8, 8, hours(1), 0, TimeFromMillis(1)));
  const Decisions& d = driver.Step();
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(1));  // submitted first
  EXPECT_EQ(d.places[0].pods.size(), 8u);
  const WaitDecision* wait = FindWait(d, WorkloadId(2));
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->reason, ReasonCode::kGang);
  // 96 - 64 = 32 GPUs left, in whole 8-GPU pods.
  EXPECT_EQ(wait->detail, "gang: 32 of 64 GPUs fit");
  // It can start when gang 1 ends after an hour.
  ASSERT_TRUE(wait->estimated_start.has_value());
  EXPECT_EQ(*wait->estimated_start, TimeFromMillis(0) + hours(1));
  // Nothing is held partially: the 32 free GPUs stay free.
  EXPECT_EQ(driver.snapshot().allocations.size(), 1u);

  driver.AdvanceTo(TimeFromMillis(0) + hours(1));
  const Decisions& later = driver.Step();
  ASSERT_EQ(later.places.size(), 1u);
  EXPECT_EQ(later.places[0].workload, WorkloadId(2));
}

TEST(GangScenarioTest, LargeGangIsNotStarvedByAStreamOfSmallJobs) {
  // 8 nodes x 8 GPUs = 64 GPUs, kept saturated by 1-GPU jobs of 10-60 min.
  EngineDriver driver(testing::SimpleCluster(2, 4));
  Rng rng(7);
  uint64_t next_id = 100;
  const Duration tick = minutes(1);
  const Time gang_submit = TimeFromMillis(0) + minutes(30);
  bool gang_submitted = false;
  int backfilled = 0;  // small jobs submitted after the gang that ended before it started
  std::vector<std::pair<WorkloadId, Time>> after_gang;
  while (driver.now() < TimeFromMillis(0) + hours(6) && !driver.first_start(WorkloadId(1))) {
    for (int i = 0; i < 4; ++i) {
      const Duration d = minutes(rng.UniformInt(10, 60));
      Workload small = Job(next_id++, QueueId(0), 1, 1, d, 0, driver.now());
      if (gang_submitted) after_gang.push_back({small.id, driver.now()});
      driver.Submit(small);
    }
    if (!gang_submitted && driver.now() >= gang_submit) {
      driver.Submit(Job(1, QueueId(0), 4, 8, hours(1), 0, driver.now()));
      gang_submitted = true;
    }
    driver.Step();
    driver.AdvanceTo(driver.now() + tick);
  }
  const auto start = driver.first_start(WorkloadId(1));
  ASSERT_TRUE(start.has_value()) << "the 32-GPU gang never started";
  // Bounded: the 56 jobs queued ahead of it start as the first running jobs
  // end, and every job is at most 60 min long, so two drains (120 min) bound
  // the wait; from its first pass on, its reservation keeps jobs that would
  // end later off its nodes. (This run: 52 min.)
  EXPECT_LE(*start - gang_submit, minutes(120));
  // Small jobs still backfilled around the reservation.
  for (const auto& [id, submitted] : after_gang) {
    auto s = driver.first_start(id);
    if (s && *s < *start) ++backfilled;
  }
  EXPECT_GT(backfilled, 0);
}

TEST(GangScenarioTest, BackfillOnlyWhenTheJobEndsBeforeTheReservation) {
  // 2 nodes x 8 GPUs. Node 0 is busy until t=60 min, node 1 has 2 GPUs busy
  // until t=30 min. A 2 x 8 gang waits; its reservation starts at t=60 min.
  Snapshot s = testing::SimpleCluster(1, 2);
  testing::AddRunning(s, Job(10, QueueId(0), 1, 8, minutes(60)), {{NodeId(0), testing::GpuRange(0, 8)}},
                      Time(), Time());
  testing::AddRunning(s, Job(11, QueueId(0), 1, 2, minutes(30)), {{NodeId(1), testing::GpuRange(0, 2)}},
                      Time(), Time());
  s.workloads.push_back(Job(1, QueueId(0), 2, 8, hours(1), 0, TimeFromMillis(0)));
  s.workloads.push_back(Job(2, QueueId(0), 1, 2, minutes(50), 0, TimeFromMillis(1)));  // ends at 50 < 60
  s.workloads.push_back(Job(3, QueueId(0), 1, 4, minutes(90), 0, TimeFromMillis(2)));  // ends at 90 > 60
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  const WaitDecision* gang = FindWait(d, WorkloadId(1));
  ASSERT_NE(gang, nullptr);
  EXPECT_EQ(gang->reason, ReasonCode::kGang);
  ASSERT_TRUE(gang->estimated_start.has_value());
  EXPECT_EQ(*gang->estimated_start, TimeFromMillis(0) + minutes(60));
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(2));
  const WaitDecision* late = FindWait(d, WorkloadId(3));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->reason, ReasonCode::kReservation);
  EXPECT_NE(late->detail.find("job-1"), std::string::npos) << late->detail;
}

TEST(GangScenarioTest, SmallJobsAreNotHeldBackBehindAGangThatCannotFit) {
  // A 3 x 8 gang on a 2-node cluster can never fit: rejected, and the small
  // job behind it runs at once.
  Snapshot s = testing::SimpleCluster(1, 2);
  s.workloads.push_back(Job(1, QueueId(0), 3, 8, hours(1), 0, TimeFromMillis(0)));
  s.workloads.push_back(Job(2, QueueId(0), 1, 1, hours(1), 0, TimeFromMillis(1)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.rejects.size(), 1u);
  EXPECT_EQ(d.rejects[0].reason, ReasonCode::kCapacity);
  EXPECT_EQ(d.rejects[0].detail, "capacity: needs 24 GPUs; eligible nodes have 16 in total");
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(2));
}

TEST(GangScenarioTest, ElasticJobStartsAtItsMinimumAndGrowsWhenIdle) {
  Snapshot s = testing::SimpleCluster(1, 4);
  testing::AddRunning(s, Job(10, QueueId(0), 2, 8, minutes(30)),
                      {{NodeId(0), testing::GpuRange(0, 8)}, {NodeId(1), testing::GpuRange(0, 8)}}, Time(), Time());
  Workload elastic = Job(1, QueueId(0), 4, 8, hours(2));
  elastic.min_pods = 1;
  elastic.max_pods = 4;
  EngineDriver driver(s);
  driver.Submit(elastic);
  const Decisions& first = driver.Step();
  // 4 pods do not fit on the 2 free nodes; it starts with min_pods = 1, and
  // grows into the other idle node in the same pass (nothing else waits):
  // one Place of 1 + 1 = 2 pods, no later pass needed to grow it.
  ASSERT_EQ(first.places.size(), 1u);
  EXPECT_EQ(first.places[0].pods.size(), 2u);
  EXPECT_TRUE(first.resizes.empty());
  driver.AdvanceTo(driver.now() + minutes(1));
  const Decisions& again = driver.Step();
  EXPECT_TRUE(again.resizes.empty());  // nothing idle left
  EXPECT_EQ(driver.allocation(WorkloadId(1))->pods.size(), 2u);
  // When job 10 ends it grows to its maximum, 4.
  driver.AdvanceTo(TimeFromMillis(0) + minutes(30));
  driver.Step();
  EXPECT_EQ(driver.allocation(WorkloadId(1))->pods.size(), 4u);
}

}  // namespace
}  // namespace tidal
