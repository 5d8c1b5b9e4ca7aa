// Issue #2 point 2: queues, guarantees, borrowing, fair share and reclaim.
#include <gtest/gtest.h>

#include "core/engine/scheduler.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/engine_driver.h"

namespace tidal {
namespace {

using testing::ClusterBuilder;
using testing::EngineDriver;
using testing::Job;

// 8 nodes x 8 GPUs = 64 GPUs in one training pool.
ClusterBuilder Cluster64() {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  b.AddNodes(4, pool, b.AddRack("r0"));
  b.AddNodes(4, pool, b.AddRack("r1"));
  return b;
}

const WaitDecision* FindWait(const Decisions& d, WorkloadId id) {
  for (const WaitDecision& w : d.waits) {
    if (w.workload == id) return &w;
  }
  return nullptr;
}

TEST(QuotaScenarioTest, BorrowedCapacityIsReclaimedWithoutPingPong) {
  ClusterBuilder b = Cluster64();
  const QueueId a = b.AddQueue("a", 32);
  const QueueId bq = b.AddQueue("b", 32);
  PolicyConfig policy;
  policy.preemption.default_grace = seconds(30);
  EngineDriver driver(b.Build(), policy);
  // Queue a fills the idle cluster: 8 x 8 GPUs, 32 of them borrowed.
  for (uint64_t id = 1; id <= 8; ++id) driver.Submit(Job(id, a, 1, 8, hours(100), 0, TimeFromMillis(id)));
  driver.Step();
  EXPECT_EQ(driver.QueueGpus(a), 64);
  int borrowed = 0;
  for (const PlaceDecision& p : driver.last().places) borrowed += p.borrowed ? 1 : 0;
  EXPECT_EQ(borrowed, 4);  // the 5th..8th jobs are above a's 32 guarantee

  // Queue b comes back for its guarantee.
  driver.AdvanceTo(TimeFromMillis(0) + minutes(10));
  for (uint64_t id = 11; id <= 14; ++id) driver.Submit(Job(id, bq, 1, 8, hours(100), 0, driver.now()));
  driver.RunUntil(TimeFromMillis(0) + hours(5), minutes(1));

  // Exactly 4 reclaims: a went from 64 to its guarantee 32, never below,
  // and nothing moved afterwards even though a's 4 victims wait again.
  ASSERT_EQ(driver.preempts().size(), 4u);
  for (const PreemptDecision& p : driver.preempts()) EXPECT_EQ(p.cause, PreemptCause::kReclaim);
  EXPECT_EQ(driver.QueueGpus(a), 32);
  EXPECT_EQ(driver.QueueGpus(bq), 32);
  const WaitDecision* victim_waits = nullptr;
  for (const WaitDecision& w : driver.last().waits) {
    if (driver.workload(w.workload)->queue == a) victim_waits = &w;
  }
  ASSERT_NE(victim_waits, nullptr);
  EXPECT_EQ(victim_waits->reason, ReasonCode::kCapacity);
}

// One 8-GPU node: queue "owner" guarantees all 8, "other" none (it borrows);
// victims get 30 s of grace.
struct OneNode {
  ClusterBuilder builder;
  QueueId owner;
  QueueId other;
  PolicyConfig policy;
  OneNode() {
    builder.AddNodes(1, builder.AddPool("training", PoolKind::kTraining), builder.AddRack("r0"));
    owner = builder.AddQueue("owner", 8);
    other = builder.AddQueue("other", 0);
    policy.preemption.default_grace = seconds(30);
  }
};

// A reclaimer's room is its victims' GPUs plus GPUs that are free now. The
// free ones must stay empty while the victims leave: were they lent again,
// the reclaimer would find its room refilled when the victims are gone, and
// take it back again, pass after pass.
TEST(QuotaScenarioTest, AReclaimersFreeGpusAreNotLentWhileItsVictimsLeave) {
  const OneNode c;
  const QueueId owner = c.owner;
  const QueueId other = c.other;
  EngineDriver driver(c.builder.Build(), c.policy);
  // other borrows 4 of the node's 8 GPUs.
  driver.Submit(Job(1, other, 1, 4, hours(100), 0, TimeFromMillis(0)));
  driver.Step();
  ASSERT_TRUE(driver.running(WorkloadId(1)));

  // owner wants the whole node (8 GPUs, within its guarantee of 8): it
  // reclaims job 1's 4 and counts on the 4 free ones. other's second job
  // (4 GPUs, borrowed) must not take those 4 free GPUs in the meantime.
  driver.AdvanceTo(TimeFromMillis(0) + minutes(10));
  driver.Submit(Job(2, owner, 1, 8, hours(100), 0, driver.now()));
  driver.Submit(Job(3, other, 1, 4, hours(100), 0, driver.now()));
  const Decisions& d = driver.Step();
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].victim, WorkloadId(1));
  EXPECT_TRUE(d.places.empty());
  const WaitDecision* lent = FindWait(d, WorkloadId(3));
  ASSERT_NE(lent, nullptr);

  // Job 1 leaves at its grace deadline (30 s) and job 2 takes the node.
  // One reclaim in all: before, job 3 took the free half, job 2 reclaimed
  // it when job 1 was gone, job 1 took that half back, and so on.
  driver.RunUntil(driver.now() + hours(1), minutes(1));
  EXPECT_TRUE(driver.running(WorkloadId(2)));
  EXPECT_EQ(driver.preempts().size(), 1u);
  EXPECT_EQ(driver.QueueGpus(owner), 8);
  EXPECT_EQ(driver.QueueGpus(other), 0);
}

// A training reclaimer whose victim checkpoints in 5 minutes waits for it
// (preemption.max_checkpoint_wait, 15 min by default) rather than throw
// away 25 minutes of the victim's work.
TEST(QuotaScenarioTest, AReclaimWaitsForTheVictimsNextCheckpoint) {
  const OneNode c;
  const QueueId owner = c.owner;
  const QueueId other = c.other;
  EngineDriver driver(c.builder.Build(), c.policy);
  Workload borrower = Job(1, other, 1, 8, hours(100), 0, TimeFromMillis(0));
  borrower.training.checkpoint_interval = minutes(30);
  driver.Submit(borrower);
  driver.Step();
  const Time started = driver.now();

  // 25 min in, owner wants its 8 GPUs. Stopping job 1 now loses
  // 8 x 1500 s = 12,000 GPU-s; after its checkpoint at 30 min, nothing,
  // for owner's 8 GPUs x 300 s = 2,400 of waiting.
  driver.AdvanceTo(started + minutes(25));
  driver.Submit(Job(2, owner, 1, 8, hours(100), 0, driver.now()));
  const Decisions& d = driver.Step();
  EXPECT_TRUE(d.preempts.empty());
  const WaitDecision* waiting = FindWait(d, WorkloadId(2));
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->reason, ReasonCode::kAwaitingVictims);
  EXPECT_EQ(waiting->estimated_start, started + minutes(30) + seconds(30));

  // The checkpoint lands at 30 min; the pass then stops job 1, which
  // loses nothing, and job 2 starts when it has gone.
  driver.RunUntil(started + hours(1), minutes(1));
  ASSERT_EQ(driver.preempts().size(), 1u);
  EXPECT_EQ(driver.preempts()[0].notice_time, started + minutes(30));
  EXPECT_DOUBLE_EQ(driver.preempts()[0].lost_gpu_seconds, 0.0);
  EXPECT_TRUE(driver.running(WorkloadId(2)));
  EXPECT_EQ(driver.QueueGpus(owner), 8);

  // With the wait turned off, the same reclaim stops job 1 at once.
  PolicyConfig eager_policy = c.policy;
  eager_policy.preemption.max_checkpoint_wait = Duration::zero();
  EngineDriver eager(c.builder.Build(), eager_policy);
  eager.Submit(borrower);
  eager.Step();
  eager.AdvanceTo(eager.now() + minutes(25));
  eager.Submit(Job(2, owner, 1, 8, hours(100), 0, eager.now()));
  ASSERT_EQ(eager.Step().preempts.size(), 1u);
  EXPECT_DOUBLE_EQ(eager.preempts()[0].lost_gpu_seconds, 8 * 1500.0);
}

TEST(QuotaScenarioTest, TwoBorrowingQueuesDoNotPingPong) {
  ClusterBuilder b = Cluster64();
  const QueueId qa = b.AddQueue("a", 16);
  const QueueId qb = b.AddQueue("b", 16);
  const QueueId qc = b.AddQueue("c", 32);  // idle at first: a and b borrow it
  PolicyConfig policy;
  policy.preemption.default_grace = seconds(30);
  EngineDriver driver(b.Build(), policy);
  uint64_t id = 1;
  // a wants 8 x 8 and b 6 x 8 GPUs; both end up above their guarantees.
  for (int i = 0; i < 8; ++i) driver.Submit(Job(id++, qa, 1, 8, hours(100), 0, TimeFromMillis(i)));
  for (int i = 0; i < 6; ++i) driver.Submit(Job(id++, qb, 1, 8, hours(100), 0, TimeFromMillis(i)));
  driver.RunUntil(TimeFromMillis(0) + hours(1), minutes(1));
  // Borrowing turns by weighted share: a and b each get 32 of the 64.
  EXPECT_EQ(driver.QueueGpus(qa), 32);
  EXPECT_EQ(driver.QueueGpus(qb), 32);
  EXPECT_TRUE(driver.preempts().empty());  // borrowers never reclaim from borrowers

  // c takes back 16 of its guarantee; each reclaim leaves a and b at or
  // above their own 16.
  for (int i = 0; i < 2; ++i) driver.Submit(Job(id++, qc, 1, 8, hours(100), 0, driver.now()));
  driver.RunUntil(TimeFromMillis(0) + hours(6), minutes(1));
  EXPECT_EQ(driver.preempts().size(), 2u);
  EXPECT_EQ(driver.QueueGpus(qc), 16);
  EXPECT_GE(driver.QueueGpus(qa), 16);
  EXPECT_GE(driver.QueueGpus(qb), 16);
  EXPECT_EQ(driver.QueueGpus(qa) + driver.QueueGpus(qb), 48);
}

TEST(QuotaScenarioTest, BorrowersShareIdleCapacityByWeight) {
  ClusterBuilder b = Cluster64();
  b.AddQueue("idle-owner", 64);
  const QueueId light = b.AddQueue("light", 0, QueueId(), 1.0);
  const QueueId heavy = b.AddQueue("heavy", 0, QueueId(), 3.0);
  Snapshot s = b.Build();
  uint64_t id = 1;
  for (int i = 0; i < 64; ++i) s.workloads.push_back(Job(id++, light, 1, 1, hours(1), 0, TimeFromMillis(i)));
  for (int i = 0; i < 64; ++i) s.workloads.push_back(Job(id++, heavy, 1, 1, hours(1), 0, TimeFromMillis(i)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  int light_gpus = 0;
  int heavy_gpus = 0;
  for (const PlaceDecision& p : d.places) {
    EXPECT_TRUE(p.borrowed);
    (p.workload.value() <= 64 ? light_gpus : heavy_gpus) += 1;
  }
  // 64 idle GPUs split 1:3 by weight: 16 and 48.
  EXPECT_EQ(light_gpus, 16);
  EXPECT_EQ(heavy_gpus, 48);
}

TEST(QuotaScenarioTest, QuotaWaitNamesTheNumbers) {
  ClusterBuilder b = Cluster64();
  const QueueId nlp = b.AddQueue("nlp", 32, QueueId(), 1.0, kUnlimited, /*borrowing_limit=*/0);
  Snapshot s = b.Build();
  // nlp runs 28 GPUs (ending at t=1h and t=2h) and asks for 16 more.
  testing::AddRunning(s, Job(1, nlp, 2, 8, hours(1)),
                      {{NodeId(0), testing::GpuRange(0, 8)}, {NodeId(1), testing::GpuRange(0, 8)}}, Time(), Time());
  testing::AddRunning(s, Job(2, nlp, 3, 4, hours(2)),
                      {{NodeId(2), testing::GpuRange(0, 4)}, {NodeId(2), testing::GpuRange(4, 4)},
                       {NodeId(3), testing::GpuRange(0, 4)}},
                      Time(), Time());
  s.workloads.push_back(Job(3, nlp, 2, 8, hours(1)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  const WaitDecision* w = FindWait(d, WorkloadId(3));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, ReasonCode::kQuota);
  EXPECT_EQ(w->detail, "quota: needs 16 GPUs, queue nlp has 4 of 32 left and may borrow 0");
  // 28 - 16 (job 1 ends at 1h) + 16 = 28 <= 32.
  ASSERT_TRUE(w->estimated_start.has_value());
  EXPECT_EQ(*w->estimated_start, TimeFromMillis(0) + hours(1));
}

TEST(QuotaScenarioTest, ChildQueuesAreBoundedByTheirParent) {
  ClusterBuilder b = Cluster64();
  const QueueId org = b.AddQueue("org", 16, QueueId(), 1.0, kUnlimited, /*borrowing_limit=*/0);
  const QueueId team = b.AddQueue("team", 64, org);
  Snapshot s = b.Build();
  s.workloads.push_back(Job(1, team, 2, 8, hours(1), 0, TimeFromMillis(0)));
  s.workloads.push_back(Job(2, team, 1, 8, hours(1), 0, TimeFromMillis(1)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  // team's guarantee is min(64, 16) = 16 and org may not borrow: job 2 waits.
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(1));
  EXPECT_FALSE(d.places[0].borrowed);
  const WaitDecision* w = FindWait(d, WorkloadId(2));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->reason, ReasonCode::kQuota);
}

TEST(QuotaScenarioTest, LendingLimitKeepsPartOfAnIdleGuaranteeFree) {
  ClusterBuilder b = Cluster64();
  b.AddQueue("owner", 48, QueueId(), 1.0, /*lending_limit=*/16);
  const QueueId other = b.AddQueue("other", 0);
  Snapshot s = b.Build();
  for (uint64_t id = 1; id <= 8; ++id) s.workloads.push_back(Job(id, other, 1, 8, hours(1), 0, TimeFromMillis(id)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  // 64 free, owner protects 48 - 16 = 32: other borrows 32 GPUs = 4 jobs.
  EXPECT_EQ(d.places.size(), 4u);
  EXPECT_EQ(d.waits.size(), 4u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kQuota);
}

}  // namespace
}  // namespace tidal
