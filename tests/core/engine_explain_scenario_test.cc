// Issue #2 points 5 and 6: one explanation per waiting workload, rejects for
// work that can never fit, estimated starts, and determinism.
#include <set>

#include <gtest/gtest.h>

#include "core/common/rng.h"
#include "core/engine/scheduler.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/decision_fingerprint.h"

namespace tidal {
namespace {

using testing::ClusterBuilder;
using testing::GpuRange;
using testing::Job;

// A busy, mixed snapshot: two queues, a shared pool, random jobs.
Snapshot MixedSnapshot(uint64_t seed) {
  ClusterBuilder b;
  const QueueId a = b.AddQueue("a", 24);
  const QueueId q = b.AddQueue("b", 8, QueueId(), 2.0, kUnlimited, 16);
  const PoolId training = b.AddPool("training", PoolKind::kTraining);
  const PoolId shared = b.AddPool("shared", PoolKind::kShared);
  b.AddNodes(4, training, b.AddRack("r0"));
  b.AddNodes(2, shared, b.AddRack("r1"));
  Snapshot s = b.Build();
  s.lent_nodes = {false, false, false, false, true, false};
  s.now = TimeFromMillis(0) + hours(1);
  Rng rng(seed);
  uint64_t id = 1;
  for (int n = 0; n < 3; ++n) {
    testing::AddRunning(s, Job(id++, rng.Bernoulli(0.5) ? a : q, 1, 4, minutes(rng.UniformInt(61, 180)), 0),
                        {{NodeId(static_cast<uint32_t>(n)), GpuRange(0, 4)}}, TimeFromMillis(0), TimeFromMillis(0));
  }
  for (int i = 0; i < 30; ++i) {
    const int pods = static_cast<int>(rng.UniformInt(1, 3));
    const int gpus = 1 << rng.UniformInt(0, 3);
    Workload w = Job(id++, rng.Bernoulli(0.5) ? a : q, pods, gpus, minutes(rng.UniformInt(5, 120)),
                     static_cast<int>(rng.UniformInt(0, 3)), s.now);
    if (rng.Bernoulli(0.1)) w.priority.awaiting_approval = true;
    s.workloads.push_back(w);
  }
  return s;
}

TEST(ExplainScenarioTest, EveryPendingWorkloadGetsExactlyOneDecision) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Snapshot s = MixedSnapshot(seed);
    const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
    std::multiset<uint64_t> seen;
    for (const PlaceDecision& p : d.places) seen.insert(p.workload.value());
    for (const WaitDecision& w : d.waits) {
      seen.insert(w.workload.value());
      EXPECT_FALSE(w.detail.empty());
      // The detail starts with the reason's name, e.g. "quota: ...".
      const std::string_view name = ReasonCodeName(w.reason);
      EXPECT_EQ(w.detail.substr(0, name.size()), std::string(name == "awaiting_victims" ? "awaiting victims"
                                                            : name == "awaiting_approval" ? "awaiting approval"
                                                            : name == "node_health" ? "node health"
                                                                                    : name))
          << w.detail;
    }
    for (const RejectDecision& r : d.rejects) seen.insert(r.workload.value());
    for (const Workload& w : s.workloads) {
      if (w.state != WorkloadState::kPending) continue;
      EXPECT_EQ(seen.count(w.id.value()), 1u) << "seed " << seed << " workload " << w.id.value();
    }
  }
}

TEST(ExplainScenarioTest, SameSnapshotSameDecisions) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const Snapshot s = MixedSnapshot(seed);
    const std::string first = testing::DecisionFingerprint(Scheduler(PolicyConfig{}).Schedule(s));
    const std::string second = testing::DecisionFingerprint(Scheduler(PolicyConfig{}).Schedule(s));
    EXPECT_EQ(first, second);
    EXPECT_FALSE(first.empty());
  }
}

TEST(ExplainScenarioTest, AwaitingApprovalWaitsWithItsOwnReason) {
  Snapshot s = testing::SimpleCluster(1, 1);
  Workload w = Job(1, QueueId(0), 1, 1, hours(1));
  w.priority.awaiting_approval = true;
  w.priority.template_name = "research";
  s.workloads.push_back(w);
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kAwaitingApproval);
  EXPECT_EQ(d.waits[0].detail, "awaiting approval: the top tier of template research needs an admin");
  EXPECT_TRUE(d.places.empty());
}

TEST(ExplainScenarioTest, CapacityWaitEstimatesFromRunningWork) {
  Snapshot s = testing::SimpleCluster(1, 1);
  // 6 GPUs busy until t=40 min, 2 more until t=90 min.
  testing::AddRunning(s, Job(1, QueueId(0), 1, 6, minutes(40)), {{NodeId(0), GpuRange(0, 6)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 2, minutes(90)), {{NodeId(0), GpuRange(6, 2)}}, Time(), Time());
  s.workloads.push_back(Job(3, QueueId(0), 1, 4, hours(1)));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kCapacity);
  EXPECT_EQ(d.waits[0].detail, "capacity: needs 4 GPUs, 0 free on eligible nodes");
  // 0 + 6 freed at t=40 min >= 4.
  EXPECT_EQ(d.waits[0].estimated_start, TimeFromMillis(0) + minutes(40));
}

// Batch deadlines: starting now meets the deadline, so no reject; starting at
// the estimated start does not, and the wait says so with the numbers.
TEST(ExplainScenarioTest, BatchWaitProjectsItsDeadlineFromTheEstimatedStart) {
  Snapshot s = testing::SimpleCluster(1, 1);
  testing::AddRunning(s, Job(1, QueueId(0), 1, 8, minutes(40)), {{NodeId(0), GpuRange(0, 8)}}, Time(), Time());
  Workload batch = Job(2, QueueId(0), 1, 4, minutes(30));
  batch.kind = WorkloadKind::kBatchInference;
  batch.batch.deadline = TimeFromMillis(0) + minutes(60);
  s.workloads.push_back(batch);
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  EXPECT_TRUE(d.rejects.empty());
  ASSERT_EQ(d.waits.size(), 1u);
  // Estimated start 40 min (job 1 ends) + 30 min = 70 min: 600 s late.
  EXPECT_EQ(d.waits[0].estimated_start, TimeFromMillis(0) + minutes(40));
  EXPECT_NE(d.waits[0].detail.find("deadline at risk"), std::string::npos) << d.waits[0].detail;
  EXPECT_NE(d.waits[0].detail.find("600 s after its deadline"), std::string::npos) << d.waits[0].detail;

  // With a deadline at 80 min the projected finish (70 min) is in time.
  s.workloads.back().batch.deadline = TimeFromMillis(0) + minutes(80);
  const Decisions ok = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(ok.waits.size(), 1u);
  EXPECT_EQ(ok.waits[0].detail.find("deadline at risk"), std::string::npos) << ok.waits[0].detail;
}

TEST(ExplainScenarioTest, HigherPriorityWorkTakingTheGpusIsNamed) {
  Snapshot s = testing::SimpleCluster(1, 1);
  s.workloads.push_back(Job(1, QueueId(0), 1, 8, hours(1), 5));
  s.workloads.push_back(Job(2, QueueId(0), 1, 8, hours(1), 1));
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].reason, ReasonCode::kPriority);
  EXPECT_EQ(d.waits[0].detail,
            "priority: the 8 GPUs it needs were free at the start of this pass but went to higher-priority "
            "work (priority 5 > 1)");
}

TEST(ExplainScenarioTest, AStartThatWouldBorrowRanksWithTheBorrowingAdjustment) {
  // One 8-GPU node. Queue "a" guarantees 4, queue "b" 8. Job 1 (queue a,
  // 6 GPUs) is stored at 500 with a borrowing start delta of -200; job 2
  // (queue b, 4 GPUs, submitted later) at 400.
  ClusterBuilder b;
  const QueueId qa = b.AddQueue("a", 4);
  const QueueId qb = b.AddQueue("b", 8);
  b.AddNodes(1, b.AddPool("training", PoolKind::kTraining), b.AddRack("r0"));
  Snapshot s = b.Build();
  Workload one = Job(1, qa, 1, 6, hours(1), 500);
  one.priority.borrowing_start_delta = -200;
  s.workloads.push_back(one);
  s.workloads.push_back(Job(2, qb, 1, 4, hours(1), 400, TimeFromMillis(1)));
  // 0 held + 6 > 4: job 1's start borrows, so it ranks at 500 - 200 = 300,
  // after job 2 (400), which takes 4 of the 8 GPUs first.
  Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.places.size(), 1u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(2));
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].workload, WorkloadId(1));
  EXPECT_NE(d.waits[0].detail.find("(priority 400 > 300)"), std::string::npos) << d.waits[0].detail;

  // Asking 4: 0 + 4 <= 4 is within the guarantee, so it keeps 500, goes
  // first and is placed; job 2 takes the other 4.
  s.workloads[0].gpus_per_pod = 4;
  d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.places.size(), 2u);
  EXPECT_EQ(d.places[0].workload, WorkloadId(1));
}

TEST(ExplainScenarioTest, NeverFittingWorkIsRejected) {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.queues[0].borrowing_limit_gpus = 4;
  Workload big_pod = Job(1, QueueId(0), 1, 16, hours(1));
  Workload nvlink = Job(2, QueueId(0), 2, 8, hours(1));
  nvlink.constraints.topology = {TopologyLevel::kNvlink, true};
  Workload over_quota = Job(3, QueueId(0), 1, 8, hours(1));
  Workload late = Job(4, QueueId(0), 1, 1, hours(2));
  late.kind = WorkloadKind::kBatchInference;
  late.batch.deadline = TimeFromMillis(0) + hours(1);
  for (const Workload& w : {big_pod, nvlink, over_quota, late}) s.workloads.push_back(w);
  const Decisions d = Scheduler(PolicyConfig{}).Schedule(s);
  ASSERT_EQ(d.rejects.size(), 4u);
  EXPECT_EQ(d.rejects[0].detail, "capacity: a pod needs 16 GPUs; the largest eligible node has 8");
  EXPECT_EQ(d.rejects[1].reason, ReasonCode::kTopology);
  EXPECT_EQ(d.rejects[1].detail, "topology: needs 16 GPUs in one NVLink domain; the largest eligible one has 8");
  EXPECT_EQ(d.rejects[2].reason, ReasonCode::kQuota);
  EXPECT_EQ(d.rejects[3].reason, ReasonCode::kDeadline);
}

}  // namespace
}  // namespace tidal
