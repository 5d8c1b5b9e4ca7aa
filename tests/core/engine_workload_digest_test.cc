// Snapshot::workload_digests: the State keeps one per workload as edits
// apply, and a pass that reads them decides exactly what a pass that reads
// the workloads and allocations themselves decides.
#include <gtest/gtest.h>

#include <string>

#include "core/engine/scheduler.h"
#include "core/state/state_machine.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/decision_fingerprint.h"

namespace tidal {
namespace {

using state::StateMachine;
using testing::GpuRange;
using testing::Job;

NodeId N(uint32_t i) { return NodeId(i); }

StateMachine Machine() {
  Snapshot s = testing::SimpleCluster(1, 4);  // 4 nodes x 8 GPUs, one queue
  return StateMachine(state::State(s.cluster, s.queues, s.projects),
                      state::LifecycleOptions{seconds(30), Duration(0)});
}

Workload Elastic(uint64_t id, int min_pods, int max_pods) {
  Workload w = Job(id, QueueId(0), min_pods, 1, hours(1));
  w.min_pods = min_pods;
  w.max_pods = max_pods;
  return w;
}

// Every digest is what the workload and its allocation say now.
void ExpectDigestsCurrent(const state::State& s) {
  const Snapshot& snap = s.snapshot();
  ASSERT_EQ(snap.workload_digests.size(), snap.workloads.size());
  for (size_t i = 0; i < snap.workloads.size(); ++i) {
    const Workload& w = snap.workloads[i];
    const Allocation* a = s.allocation(w.id);
    const int32_t ai = a == nullptr ? -1 : static_cast<int32_t>(a - snap.allocations.data());
    EXPECT_EQ(snap.workload_digests[i], WorkloadDigest::Of(w, ai, a)) << "workload " << w.id.value();
  }
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
}

const WorkloadDigest& DigestOf(const state::State& s, WorkloadId id) {
  const Snapshot& snap = s.snapshot();
  return snap.workload_digests[static_cast<size_t>(s.workload(id) - snap.workloads.data())];
}

TEST(WorkloadDigestTest, TheStateKeepsEachDigestThroughEveryEdit) {
  StateMachine m = Machine();
  const auto apply = [&](const state::Edit& e) {
    ASSERT_TRUE(m.Apply(e).ok()) << state::EditName(e);
    ExpectDigestsCurrent(m.state());
  };
  apply(state::SubmitEdit{Job(1, QueueId(0), 1, 4, hours(1))});
  apply(state::SubmitEdit{Elastic(2, 2, 4)});
  apply(state::SubmitEdit{Job(3, QueueId(0), 1, 2, hours(1))});
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(2)).elastic, true);
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(1)).allocation, -1);

  apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 4)}}});
  apply(state::PlaceEdit{WorkloadId(2), {{N(1), GpuRange(0, 1)}, {N(1), GpuRange(1, 1)}, {N(2), GpuRange(0, 1)}}});
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(2)).state, WorkloadState::kRunning);
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(2)).allocation, 1);

  // A shrink marks the allocation's pods leaving until the pod exits.
  apply(state::ShrinkEdit{WorkloadId(2), {{N(2), GpuRange(0, 1)}}, WorkloadId(), Time(seconds(30))});
  EXPECT_TRUE(DigestOf(m.state(), WorkloadId(2)).leaving);
  apply(state::PodExitEdit{WorkloadId(2), {N(2), GpuRange(0, 1)}});
  EXPECT_FALSE(DigestOf(m.state(), WorkloadId(2)).leaving);

  // The first allocation goes: workload 2's allocation moves into slot 0.
  apply(state::NoticeEdit{WorkloadId(1), WorkloadId(), PreemptCause::kPriority, Time(seconds(30))});
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(1)).state, WorkloadState::kTerminating);
  apply(state::RequeueEdit{WorkloadId(1)});
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(1)).allocation, -1);
  EXPECT_EQ(DigestOf(m.state(), WorkloadId(2)).allocation, 0);

  // The first workload goes: workload 3 moves into its slot.
  apply(state::ReleaseEdit{WorkloadId(1), WorkloadState::kCancelled});
  EXPECT_EQ(m.state().snapshot().workload_digests.size(), 2u);
  apply(state::SetTargetEdit{WorkloadId(3), 1, 1, 3});
  EXPECT_TRUE(DigestOf(m.state(), WorkloadId(3)).elastic);
}

TEST(WorkloadDigestTest, APassDecidesTheSameWithOrWithoutThem) {
  StateMachine m = Machine();
  // Running: a 2 x 8 gang, an elastic job that can grow, a job leaving.
  // Waiting: a gang too big for what is free, a small job, a priority job.
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, QueueId(0), 2, 8, hours(1))}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(1), {{N(0), GpuRange(0, 8)}, {N(1), GpuRange(0, 8)}}}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Elastic(2, 1, 4)}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(2), {{N(2), GpuRange(0, 1)}}}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(3, QueueId(0), 1, 4, hours(1))}).ok());
  ASSERT_TRUE(m.Apply(state::PlaceEdit{WorkloadId(3), {{N(3), GpuRange(0, 4)}}}).ok());
  ASSERT_TRUE(m.Apply(state::NoticeEdit{WorkloadId(3), WorkloadId(), PreemptCause::kPriority, Time(seconds(30))}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(4, QueueId(0), 3, 8, hours(1))}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(5, QueueId(0), 1, 2, hours(1))}).ok());
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(6, QueueId(0), 1, 8, hours(1), /*priority=*/100)}).ok());

  const Scheduler scheduler{PolicyConfig{}};
  const Snapshot& with = m.state().snapshot();
  ASSERT_EQ(with.workload_digests.size(), with.workloads.size());
  Snapshot without = with;
  without.workload_digests.clear();
  const std::string given = testing::DecisionFingerprint(scheduler.Schedule(with));
  EXPECT_EQ(given, testing::DecisionFingerprint(Scheduler{PolicyConfig{}}.Schedule(without)));
  // The pass did decide something for each kind of workload it sorts out.
  EXPECT_NE(given.find("P5"), std::string::npos) << given;
  EXPECT_NE(given.find("W4:"), std::string::npos) << given;
}

// Whether higher-priority work may take a workload's GPUs, as a pass reads
// it from the digest for its victims: never a service or a class-kNever
// workload; a kPreemptible one only when preemptible; a kReclaimable one
// always.
TEST(WorkloadDigestTest, ItSaysWhetherTheWorkMayBePreempted) {
  struct Case {
    WorkloadKind kind;
    PreemptibilityClass cls;
    bool preemptible;
    bool may_be_preempted;
  };
  for (const Case& c : {Case{WorkloadKind::kTraining, PreemptibilityClass::kPreemptible, true, true},
                        Case{WorkloadKind::kTraining, PreemptibilityClass::kPreemptible, false, false},
                        Case{WorkloadKind::kTraining, PreemptibilityClass::kNever, true, false},
                        Case{WorkloadKind::kDebug, PreemptibilityClass::kReclaimable, false, true},
                        Case{WorkloadKind::kInference, PreemptibilityClass::kReclaimable, true, false}}) {
    Workload w = Job(1, QueueId(0), 1, 1, hours(1));
    w.kind = c.kind;
    w.priority.preemptibility = c.cls;
    w.preemptible = c.preemptible;
    EXPECT_EQ(w.may_be_preempted(), c.may_be_preempted)
        << static_cast<int>(c.kind) << " " << PreemptibilityClassName(c.cls) << " " << c.preemptible;
    EXPECT_EQ(WorkloadDigest::Of(w, -1, nullptr).may_be_preempted, c.may_be_preempted);
  }
}

#if !defined(NDEBUG) || defined(TIDAL_EXPENSIVE_CHECKS)
TEST(WorkloadDigestTest, ChecksCatchADigestThatDisagrees) {
  StateMachine m = Machine();
  ASSERT_TRUE(m.Apply(state::SubmitEdit{Job(1, QueueId(0), 1, 4, hours(1))}).ok());
  Snapshot stale = m.state().snapshot();
  stale.workloads[0].state = WorkloadState::kAwaitingApproval;  // edited by hand, digest kept
  EXPECT_DEATH(Scheduler{PolicyConfig{}}.Schedule(stale), "digest of workload 1 is out of date");
}
#endif

}  // namespace
}  // namespace tidal
