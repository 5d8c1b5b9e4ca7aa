// Issue #2 point 4: preemption by priority, least-cost victims, shrink first.
#include <map>

#include <gtest/gtest.h>

#include "core/engine/scheduler.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/engine_driver.h"

namespace tidal {
namespace {

using testing::EngineDriver;
using testing::GpuRange;
using testing::Job;

const Time kT0 = TimeFromMillis(0);

PolicyConfig Policy() {
  PolicyConfig p;
  p.preemption.default_grace = seconds(60);
  p.preemption.min_runtime = minutes(5);
  p.preemption.min_priority_gap = 10;
  return p;
}

// Two 8-GPU nodes, each running one 8-GPU low-priority job started 2 h ago.
Snapshot TwoFullNodes(Time ckpt1, Time ckpt2) {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.now = kT0 + hours(2);
  testing::AddRunning(s, Job(1, QueueId(0), 1, 8, hours(10), 0), {{NodeId(0), GpuRange(0, 8)}}, kT0, ckpt1);
  testing::AddRunning(s, Job(2, QueueId(0), 1, 8, hours(10), 0), {{NodeId(1), GpuRange(0, 8)}}, kT0, ckpt2);
  return s;
}

TEST(PreemptionScenarioTest, PicksTheMostRecentlyCheckpointedVictim) {
  // Job 1 checkpointed 50 min ago, job 2 1 min ago.
  Snapshot s = TwoFullNodes(kT0 + minutes(70), kT0 + minutes(119));
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, s.now));
  const Decisions d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.preempts.size(), 1u);
  const PreemptDecision& p = d.preempts[0];
  EXPECT_EQ(p.victim, WorkloadId(2));
  EXPECT_EQ(p.preemptor, WorkloadId(9));
  EXPECT_EQ(p.cause, PreemptCause::kPriority);
  EXPECT_EQ(p.notice_time, s.now);
  EXPECT_EQ(p.grace_deadline, s.now + seconds(60));
  // 8 GPUs x 60 s = 480 GPU-s lost.
  EXPECT_DOUBLE_EQ(p.lost_gpu_seconds, 480.0);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kAwaitingVictims);
  EXPECT_EQ(d.waits[0].estimated_start, s.now + seconds(60));
}

// Job 9 (priority 100) waits 5 min for job 1's checkpoint instead of
// throwing away 25 min of it; job 10 (priority 50), asked after it in the
// same pass, must not stop job 1 at once in the meantime.
TEST(PreemptionScenarioTest, AVictimWaitedForIsNoOneElsesMeanwhile) {
  Snapshot s = testing::SimpleCluster(1, 1);
  s.now = kT0 + minutes(25);
  Workload victim = Job(1, QueueId(0), 1, 8, hours(10), 0);
  victim.training.checkpoint_interval = minutes(30);
  testing::AddRunning(s, victim, {{NodeId(0), GpuRange(0, 8)}}, kT0, kT0);
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, s.now));
  s.workloads.push_back(Job(10, QueueId(0), 1, 8, hours(1), 50, s.now));
  Decisions d = Scheduler(Policy()).Schedule(s);
  // Now: 8 x 1500 s = 12,000 GPU-s; at kT0 + 30 min: 0, plus job 9's
  // 8 GPUs x 300 s = 2,400 of waiting.
  EXPECT_TRUE(d.preempts.empty());
  ASSERT_EQ(d.waits.size(), 2u);
  const WaitDecision& first = d.waits[0].workload == WorkloadId(9) ? d.waits[0] : d.waits[1];
  EXPECT_EQ(first.reason, ReasonCode::kAwaitingVictims);
  EXPECT_EQ(first.estimated_start, kT0 + minutes(30) + seconds(60));

  // At kT0 + 30 min job 1 has checkpointed: job 9 stops it, losing nothing.
  s.now = kT0 + minutes(30);
  s.allocations[0].last_checkpoint = s.now;
  d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].preemptor, WorkloadId(9));
  EXPECT_DOUBLE_EQ(d.preempts[0].lost_gpu_seconds, 0.0);
}

TEST(PreemptionScenarioTest, TheRequeuedBonusOrdersWorkButNeverPreempts) {
  // Both nodes run a priority-0 job. Job 9 waits with priority 15, of which
  // 10 is its requeued bonus: it preempts as 15 - 10 = 5 < 0 + 10 (the
  // gap), so nobody is preempted. Without the bonus part, 15 >= 0 + 10
  // preempts one victim.
  Snapshot s = TwoFullNodes(kT0, kT0);
  Workload victim = Job(9, QueueId(0), 1, 8, hours(1), 15, s.now);
  victim.requeues = 1;
  victim.priority.resume_bonus = 10;
  s.workloads.push_back(victim);
  const Decisions kept = Scheduler(Policy()).Schedule(s);
  EXPECT_TRUE(kept.preempts.empty());
  s.workloads.back().priority.resume_bonus = 0;
  const Decisions preempted = Scheduler(Policy()).Schedule(s);
  EXPECT_EQ(preempted.preempts.size(), 1u);
}

TEST(PreemptionScenarioTest, ARequeuedJobGoesAheadOfItsPeersThatNeverRan) {
  // One free node of 8 GPUs. Job 5 (priority 0) waited first; job 6 was
  // requeued and has a bonus of 10: 10 > 0, so job 6 takes the node.
  Snapshot s = testing::SimpleCluster(1, 1);
  s.now = kT0 + hours(2);
  s.workloads.push_back(Job(5, QueueId(0), 1, 8, hours(1), 0, kT0));
  Workload requeued = Job(6, QueueId(0), 1, 8, hours(1), 10, kT0 + hours(1));
  requeued.requeues = 1;
  requeued.priority.resume_bonus = 10;
  s.workloads.push_back(requeued);
  const Decisions d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(6));
}

TEST(PreemptionScenarioTest, VictimsAreNotPreemptedTwiceAndThePreemptorStarts) {
  Snapshot s = TwoFullNodes(kT0, kT0);
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, s.now));
  EngineDriver driver(s, Policy());
  driver.Step();
  ASSERT_EQ(driver.preempts().size(), 1u);
  // Inside the grace period: waits for its victim, preempts nobody new.
  driver.AdvanceTo(s.now + seconds(30));
  const Decisions& again = driver.Step();
  EXPECT_TRUE(again.preempts.empty());
  ASSERT_EQ(again.waits.size(), 1u);
  EXPECT_EQ(again.waits[0].reason, ReasonCode::kAwaitingVictims);
  // After the grace deadline the victim is gone and the preemptor starts.
  driver.AdvanceTo(s.now + seconds(60));
  const Decisions& after = driver.Step();
  ASSERT_EQ(after.places.size(), 1u);
  EXPECT_EQ(after.places[0].workload, WorkloadId(9));
  EXPECT_EQ(driver.preempts().size(), 1u);
}

TEST(PreemptionScenarioTest, ElasticJobShrinksBeforeAnyGangIsEvicted) {
  // 4 nodes: elastic job 1 holds nodes 0-1 (2 pods, min 1) and has lost a
  // lot of work; rigid gang 2 holds nodes 2-3 and checkpointed just now.
  Snapshot s = testing::SimpleCluster(1, 4);
  s.now = kT0 + hours(2);
  Workload elastic = Job(1, QueueId(0), 2, 8, hours(10), 0);
  elastic.min_pods = 1;
  elastic.max_pods = 4;
  testing::AddRunning(s, elastic, {{NodeId(0), GpuRange(0, 8)}, {NodeId(1), GpuRange(0, 8)}}, kT0, kT0);
  testing::AddRunning(s, Job(2, QueueId(0), 2, 8, hours(10), 0),
                      {{NodeId(2), GpuRange(0, 8)}, {NodeId(3), GpuRange(0, 8)}}, kT0, s.now);
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, s.now));
  const Decisions d = Scheduler(Policy()).Schedule(s);
  EXPECT_TRUE(d.preempts.empty());
  ASSERT_EQ(d.resizes.size(), 1u);
  const ResizeDecision& r = d.resizes[0];
  EXPECT_EQ(r.workload, WorkloadId(1));
  EXPECT_EQ(r.from_pods, 2);
  EXPECT_EQ(r.to_pods, 1);
  ASSERT_EQ(r.removed.size(), 1u);
  EXPECT_EQ(r.removed[0].node, NodeId(1));  // its last pod
  EXPECT_EQ(r.beneficiary, WorkloadId(9));
  EXPECT_EQ(r.grace_deadline, s.now + seconds(60));
}

TEST(PreemptionScenarioTest, LeavingPodsAreWaitedForNotShrunkAgain) {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.now = kT0 + hours(2);
  Workload elastic = Job(1, QueueId(0), 2, 8, hours(10), 0);
  elastic.min_pods = 1;
  elastic.max_pods = 2;
  testing::AddRunning(s, elastic, {{NodeId(0), GpuRange(0, 8)}, {NodeId(1), GpuRange(0, 8)}}, kT0, kT0);
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, s.now));
  EngineDriver driver(s, Policy());
  driver.set_shrunk_pods_linger(true);
  driver.Step();
  ASSERT_EQ(driver.resizes().size(), 1u);
  // 30 s later the shrunk pod still holds node 1: the preemptor waits for it
  // and nothing is shrunk or preempted again.
  driver.AdvanceTo(s.now + seconds(30));
  const Decisions& again = driver.Step();
  EXPECT_TRUE(again.resizes.empty());
  EXPECT_TRUE(again.preempts.empty());
  ASSERT_EQ(again.waits.size(), 1u);
  EXPECT_EQ(again.waits[0].reason, ReasonCode::kAwaitingVictims);
  // At the grace deadline the pod is gone and the preemptor starts there.
  driver.AdvanceTo(s.now + seconds(60));
  const Decisions& after = driver.Step();
  ASSERT_EQ(after.places.size(), 1u);
  EXPECT_EQ(after.places[0].pods[0].node, NodeId(1));
  EXPECT_EQ(driver.resizes().size(), 1u);
}

TEST(PreemptionScenarioTest, GangsAreEvictedWholeWhenShrinkingIsNotEnough) {
  Snapshot s = testing::SimpleCluster(1, 4);
  s.now = kT0 + hours(2);
  Workload elastic = Job(1, QueueId(0), 2, 8, hours(10), 0);
  elastic.min_pods = 1;
  elastic.max_pods = 2;
  testing::AddRunning(s, elastic, {{NodeId(0), GpuRange(0, 8)}, {NodeId(1), GpuRange(0, 8)}}, kT0, kT0);
  testing::AddRunning(s, Job(2, QueueId(0), 2, 8, hours(10), 0),
                      {{NodeId(2), GpuRange(0, 8)}, {NodeId(3), GpuRange(0, 8)}}, kT0, s.now);
  // Needs 2 whole nodes: the shrink frees one, and the cheapest whole victim
  // is gang 2 (no lost work) which frees two; then the shrink is not needed.
  s.workloads.push_back(Job(9, QueueId(0), 2, 8, hours(1), 100, s.now));
  const Decisions d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].victim, WorkloadId(2));
  EXPECT_TRUE(d.resizes.empty());
}

// One victim, one decision: when an elastic job's shrink is not enough and
// the whole job has to go, it gets one Preempt, not a Preempt and a Resize.
TEST(PreemptionScenarioTest, AVictimGetsAtMostOneDecision) {
  // 4 nodes, all held by elastic job 1 (4 x 8 GPUs, min 2). Job 9 needs 4
  // whole nodes (32 GPUs). Candidates in cost order: its last two pods (a
  // shrink, 8 GPUs each), then the whole job (32). Shrinking frees 16 < 32,
  // so the whole job goes; its shrink pods are part of it. Before the fix
  // both were chosen: a Preempt and a Resize for job 1, "release 48 GPUs"
  // (16 counted twice) and its live usage lowered twice.
  Snapshot s = testing::SimpleCluster(1, 4);
  s.now = kT0 + hours(2);
  Workload elastic = Job(1, QueueId(0), 4, 8, hours(10), 0);
  elastic.min_pods = 2;
  elastic.max_pods = 4;
  testing::AddRunning(s, elastic,
                      {{NodeId(0), GpuRange(0, 8)}, {NodeId(1), GpuRange(0, 8)},
                       {NodeId(2), GpuRange(0, 8)}, {NodeId(3), GpuRange(0, 8)}},
                      kT0, kT0);
  s.workloads.push_back(Job(9, QueueId(0), 4, 8, hours(1), 100, s.now));
  const Decisions d = Scheduler(Policy()).Schedule(s);
  std::map<WorkloadId, int> decisions;
  for (const PreemptDecision& p : d.preempts) ++decisions[p.victim];
  for (const ResizeDecision& r : d.resizes) ++decisions[r.workload];
  for (const auto& [id, n] : decisions) EXPECT_LE(n, 1) << "workload " << id.value();
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].victim, WorkloadId(1));
  EXPECT_TRUE(d.resizes.empty());
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kAwaitingVictims);
  EXPECT_NE(d.waits[0].detail.find("release 32 GPUs"), std::string::npos) << d.waits[0].detail;
}

// A preemption must have a beneficiary: a batch job that could not finish
// by its deadline once its victims are gone stops nobody.
TEST(PreemptionScenarioTest, NoVictimForABatchJobThatWouldMissItsDeadlineAnyway) {
  // One 8-GPU node held by rigid gang 1 (2 x 4 GPUs, priority 0, running 2 h).
  // Batch job 9 (priority 100) needs 1 GPU for 1800 s; its deadline is
  // now + 1830 s, so starting now it would make it (not rejected), but the
  // gang leaves only at the grace deadline, now + 60 s, and 60 + 1800 = 1860
  // > 1830: by then the job is rejected for its deadline and the gang's GPUs
  // go to nobody it was stopped for. Before the fix the gang was preempted.
  Snapshot s = testing::SimpleCluster(1, 1);
  s.now = kT0 + hours(2);
  testing::AddRunning(s, Job(1, QueueId(0), 2, 4, hours(10), 0),
                      {{NodeId(0), GpuRange(0, 4)}, {NodeId(0), GpuRange(4, 4)}}, kT0, kT0);
  Workload batch = Job(9, QueueId(0), 1, 1, seconds(1800), 100, s.now);
  batch.kind = WorkloadKind::kBatchInference;
  batch.batch.deadline = s.now + seconds(1830);
  s.workloads.push_back(batch);
  const Decisions d = Scheduler(Policy()).Schedule(s);
  EXPECT_TRUE(d.preempts.empty());
  EXPECT_TRUE(d.rejects.empty());
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].workload, WorkloadId(9));

  // With 60 s more slack (deadline now + 1890 s: 60 + 1800 = 1860 <= 1890)
  // the gang is its victim as before.
  s.workloads.back().batch.deadline = s.now + seconds(1890);
  const Decisions ok = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(ok.preempts.size(), 1u);
  EXPECT_EQ(ok.preempts[0].victim, WorkloadId(1));
}

TEST(PreemptionScenarioTest, PriorityGapAndMinRuntimeProtectVictims) {
  Snapshot s = TwoFullNodes(kT0, kT0);
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 5, s.now));  // gap 5 < 10
  Decisions d = Scheduler(Policy()).Schedule(s);
  EXPECT_TRUE(d.preempts.empty());
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kCapacity);

  Snapshot young = TwoFullNodes(kT0, kT0);
  young.now = kT0 + minutes(4);  // both victims younger than min_runtime (5 min)
  young.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, young.now));
  d = Scheduler(Policy()).Schedule(young);
  EXPECT_TRUE(d.preempts.empty());
}

TEST(PreemptionScenarioTest, NonPreemptibleAndInferenceWorkIsNeverAVictim) {
  Snapshot s = TwoFullNodes(kT0, kT0);
  s.workloads[0].preemptible = false;
  s.workloads[1].priority.preemptibility = PreemptibilityClass::kNever;
  s.workloads.push_back(Job(9, QueueId(0), 1, 8, hours(1), 100, s.now));
  const Decisions d = Scheduler(Policy()).Schedule(s);
  EXPECT_TRUE(d.preempts.empty());
}

TEST(PreemptionScenarioTest, ReclaimIgnoresMinRuntimeButNeverPassesTheGuarantee) {
  testing::ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  b.AddNodes(2, pool, b.AddRack("r0"));
  const QueueId owner = b.AddQueue("owner", 8);
  const QueueId borrower = b.AddQueue("borrower", 0);
  Snapshot s = b.Build();
  s.now = kT0 + minutes(1);  // victims are 1 min old, under min_runtime
  testing::AddRunning(s, Job(1, borrower, 1, 8, hours(10), 50), {{NodeId(0), GpuRange(0, 8)}}, kT0, kT0);
  testing::AddRunning(s, Job(2, borrower, 1, 8, hours(10), 50), {{NodeId(1), GpuRange(0, 8)}}, kT0, kT0);
  s.workloads.push_back(Job(9, owner, 1, 8, hours(1), 0, s.now));   // within its guarantee
  s.workloads.push_back(Job(10, owner, 1, 8, hours(1), 0, s.now));  // would exceed it
  const Decisions d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].cause, PreemptCause::kReclaim);
  EXPECT_EQ(d.preempts[0].preemptor, WorkloadId(9));
}

TEST(PreemptionScenarioTest, SharedNodesGoBackToInference) {
  testing::ClusterBuilder b;
  const PoolId shared = b.AddPool("shared", PoolKind::kShared);
  b.AddNodes(1, shared, b.AddRack("r0"));
  b.AddQueue("q", 0);
  Snapshot s = b.Build();
  s.now = kT0 + hours(1);
  testing::AddRunning(s, Job(1, QueueId(0), 1, 8, hours(10)), {{NodeId(0), GpuRange(0, 8)}}, kT0, kT0);
  s.lent_nodes = {false};  // the planner took the loan back
  const Decisions d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].cause, PreemptCause::kInferenceReturn);
  // 8 GPUs x 3600 s since the last checkpoint.
  EXPECT_DOUBLE_EQ(d.preempts[0].lost_gpu_seconds, 28800.0);
}

TEST(PreemptionScenarioTest, DebugSessionsStopAtMaxRuntime) {
  Snapshot s = testing::SimpleCluster(1, 1);
  s.now = kT0 + minutes(61);
  Workload debug = Job(1, QueueId(0), 1, 1, Duration::zero());
  debug.kind = WorkloadKind::kDebug;
  debug.debug.max_runtime = minutes(60);
  testing::AddRunning(s, debug, {{NodeId(0), GpuRange(0, 1)}}, kT0, kT0);
  const Decisions d = Scheduler(Policy()).Schedule(s);
  ASSERT_EQ(d.preempts.size(), 1u);
  EXPECT_EQ(d.preempts[0].cause, PreemptCause::kMaxRuntime);
  EXPECT_FALSE(d.preempts[0].preemptor.valid());
}

}  // namespace
}  // namespace tidal
