// Snapshot::waiting_order: the State keeps the waiting workloads in order as
// edits apply, and a pass that takes its waiting work from it decides
// exactly what a pass that sorts the work itself decides.
#include "core/model/waiting_order.h"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <vector>

#include "core/engine/scheduling_pass.h"
#include "core/state/state.h"
#include "tests/support/cluster_builder.h"

namespace tidal {
namespace {

using testing::GpuRange;
using testing::Job;

WorkloadDigest Waiting(uint64_t id, int priority, int64_t submit_s, int min_pods, int gpus_per_pod,
                       int borrowing_delta = 0, QueueId queue = QueueId(0)) {
  WorkloadDigest d;
  d.id = WorkloadId(id);
  d.priority = priority;
  d.submit_time = Time(seconds(submit_s));
  d.min_pods = min_pods;
  d.gpus_per_pod = gpus_per_pod;
  d.borrowing_start_delta = borrowing_delta;
  d.queue = queue;
  return d;
}

std::vector<uint64_t> Ids(const WaitingOrder::Group& g) {
  std::vector<uint64_t> ids;
  for (const WaitingOrder::Entry& e : g.entries) ids.push_back(e.id.value());
  return ids;
}

TEST(WaitingOrderTest, GroupsWorkByQueueDeltaAndGangInPriorityThenSubmitOrder) {
  const std::vector<WorkloadDigest> digests = {
      Waiting(1, 100, 5, 1, 8),  // group (q0, 0, 8)
      Waiting(2, 100, 1, 1, 8),  // same group, submitted earlier: first
      Waiting(3, 300, 9, 2, 4),  // same group (8 GPUs), higher priority: before both
      Waiting(4, 100, 0, 1, 1),  // group (q0, 0, 1)
      Waiting(5, 100, 0, 1, 8, -200),  // group (q0, -200, 8)
  };
  WorkloadDigest running = Waiting(6, 900, 0, 1, 8);
  running.allocation = 0;
  running.state = WorkloadState::kRunning;
  std::vector<WorkloadDigest> all = digests;
  all.push_back(running);  // not waiting: not in the order

  const WaitingOrder order = WaitingOrder::Of(all);
  EXPECT_EQ(order.size(), 5u);
  ASSERT_EQ(order.groups().size(), 3u);
  // Sorted by (queue, delta, gang minimum).
  EXPECT_EQ(order.groups()[0].borrowing_start_delta, -200);
  EXPECT_EQ(Ids(order.groups()[0]), (std::vector<uint64_t>{5}));
  EXPECT_EQ(order.groups()[1].min_gpus, 1);
  EXPECT_EQ(Ids(order.groups()[1]), (std::vector<uint64_t>{4}));
  EXPECT_EQ(order.groups()[2].min_gpus, 8);
  EXPECT_EQ(Ids(order.groups()[2]), (std::vector<uint64_t>{3, 2, 1}));
  // Pods by GPUs: one of 1, one of 4 (job 3), three of 8.
  EXPECT_EQ(order.pods_of_gpus(1), 1);
  EXPECT_EQ(order.pods_of_gpus(4), 1);
  EXPECT_EQ(order.pods_of_gpus(8), 3);
  // Entries name their workload's index.
  EXPECT_EQ(order.groups()[2].entries[0].workload, 2u);
}

// Random submits, priority changes, placements, requeues and releases (with
// the swap-and-pop a release does): after each, the order kept by Update
// and Move is the order built whole from the digests.
TEST(WaitingOrderTest, KeptThroughRandomEditsEqualsOneBuiltWhole) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    std::vector<WorkloadDigest> digests;
    WaitingOrder order;
    order.MarkKept();
    uint64_t next_id = 1;
    for (int step = 0; step < 150; ++step) {
      const int op = digests.empty() ? 0 : pick(5);
      if (op == 0) {
        WorkloadDigest d = Waiting(next_id++, pick(3) * 100, pick(20), 1 + pick(3), 1 << pick(4),
                                   pick(2) == 0 ? 0 : -100 * (1 + pick(2)), QueueId(pick(2)));
        if (pick(4) == 0) d.state = WorkloadState::kAwaitingApproval;
        digests.push_back(d);
        order.Update(nullptr, &digests.back(), static_cast<uint32_t>(digests.size() - 1));
      } else {
        const uint32_t i = static_cast<uint32_t>(pick(static_cast<int>(digests.size())));
        WorkloadDigest changed = digests[i];
        if (op == 1) {
          changed.priority = pick(3) * 100;
          changed.borrowing_start_delta = pick(2) == 0 ? 0 : -100;
        } else if (op == 2) {
          const bool placed = changed.allocation >= 0;
          changed.allocation = placed ? -1 : 0;
          changed.state = placed ? WorkloadState::kPending : WorkloadState::kRunning;
        } else if (op == 3) {
          changed.min_pods = 1 + pick(3);
        }
        if (op != 4) {
          order.Update(&digests[i], &changed, i);
          digests[i] = changed;
        } else {
          order.Update(&digests[i], nullptr, i);
          const uint32_t last = static_cast<uint32_t>(digests.size() - 1);
          if (i != last) {
            digests[i] = digests[last];
            order.Move(digests[i], i);
          }
          digests.pop_back();
        }
      }
      ASSERT_EQ(order, WaitingOrder::Of(digests)) << "seed " << seed << " step " << step << " op " << op;
    }
  }
}

// The log names every insert, finds each entry where it is now, and is
// trimmed to twice the order's size plus kMinLog; a copy numbers its log
// apart from the original.
TEST(WaitingOrderTest, TheLogNamesEachInsertAndFindsItWhereItIsNow) {
  WaitingOrder order;
  WorkloadDigest a = Waiting(1, 100, 5, 1, 8);
  const WorkloadDigest b = Waiting(2, 200, 5, 1, 8);
  order.Update(nullptr, &a, 0);
  order.Update(nullptr, &b, 1);
  EXPECT_EQ(order.inserts(), 2u);
  const auto all = order.InsertsFrom(0);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 2u);
  const WaitingOrder::Inserted first = (*all)[0];
  // Job 2 ranks first, so job 1 is the group's second entry.
  EXPECT_EQ(order.Locate(first), std::make_pair(size_t{0}, size_t{1}));
  // Moved to another index: found, with its new index.
  order.Move(a, 7);
  EXPECT_EQ(order.groups()[0].entries[order.Locate(first)->second].workload, 7u);
  // A new priority inserts it again: the old insert no longer finds it.
  WorkloadDigest raised = a;
  raised.priority = 300;
  order.Update(&a, &raised, 7);
  EXPECT_FALSE(order.Locate(first).has_value());
  EXPECT_EQ(order.InsertsFrom(2)->size(), 1u);
  EXPECT_EQ(order.Locate((*order.InsertsFrom(2))[0]), std::make_pair(size_t{0}, size_t{0}));
  EXPECT_FALSE(order.InsertsFrom(4).has_value());  // not yet
  // A copy's log is another's: its lineage differs.
  const WaitingOrder copy = order;
  EXPECT_NE(copy.log_lineage(), order.log_lineage());
  EXPECT_EQ(copy, order);
  // Churn far past the bound: the oldest inserts are gone.
  for (uint64_t id = 10; id < 10 + 2 * WaitingOrder::kMinLog; ++id) {
    const WorkloadDigest d = Waiting(id, 0, 0, 1, 1);
    order.Update(nullptr, &d, 2);
    order.Update(&d, nullptr, 2);
  }
  EXPECT_FALSE(order.InsertsFrom(0).has_value());
  EXPECT_TRUE(order.InsertsFrom(order.inserts())->empty());
}

// A 4-node cluster whose queue is guaranteed 24 GPUs, 16 of them held:
// waiting work asking more than 8 GPUs at once would borrow, and carries a
// borrowing delta of -200, so it ranks below work of lower stored priority
// that does not.
state::State Backlog() {
  Snapshot s = testing::SimpleCluster(1, 4);
  s.queues[0].guaranteed_gpus = 24;
  state::State st(s.cluster, s.queues, s.projects);
  const auto submit = [&](Workload w) { EXPECT_TRUE(st.Apply(state::SubmitEdit{std::move(w)}).ok()); };
  submit(Job(1, QueueId(0), 1, 8, hours(1)));
  submit(Job(2, QueueId(0), 1, 8, hours(1)));
  EXPECT_TRUE(st.Apply(state::PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 8)}}}).ok());
  EXPECT_TRUE(st.Apply(state::PlaceEdit{WorkloadId(2), {{NodeId(1), GpuRange(0, 8)}}}).ok());
  for (uint64_t id = 10; id < 40; ++id) {
    const int gang = 1 << (id % 3);  // 1, 2 or 4 pods of 4 GPUs: 4, 8 or 16 GPUs
    Workload w = Job(id, QueueId(0), gang, 4, hours(1), static_cast<int>(id % 4) * 50, Time(seconds(id % 7)));
    w.priority.borrowing_start_delta = id % 2 == 0 ? -200 : 0;
    submit(std::move(w));
  }
  return st;
}

Decisions Pass(const Snapshot& s, bool take_the_order, bool explain, bool* took = nullptr) {
  static const PolicyConfig kPolicy;
  engine::SchedulingPass pass(kPolicy, s);
  pass.set_explain_waits(explain);
  pass.set_take_the_waiting_order(take_the_order);
  Decisions out = pass.Run();
  if (took != nullptr) *took = pass.took_the_waiting_order();
  return out;
}

TEST(WaitingOrderTest, APassThatTakesTheOrderDecidesWhatASortingPassDecides) {
  const state::State st = Backlog();
  const Snapshot& s = st.snapshot();
  ASSERT_EQ(s.waiting_order.size(), 30u);
  for (const bool explain : {true, false}) {
    bool took = false;
    const Decisions taken = Pass(s, /*take_the_order=*/true, explain, &took);
    EXPECT_TRUE(took);
    const Decisions sorted = Pass(s, /*take_the_order=*/false, explain);
    EXPECT_EQ(taken, sorted) << "explain " << explain;
    // The placements (16 free GPUs) and, when explained, a wait for every
    // other workload, in the order both walked.
    EXPECT_FALSE(taken.places.empty());
    if (explain) EXPECT_EQ(taken.places.size() + taken.waits.size(), 30u);
  }
}

TEST(WaitingOrderTest, WorkThatWouldBorrowRanksBelowLowerPriorityWorkThatWouldNot) {
  // Two free nodes; the queue holds 16 of its 24 guaranteed GPUs. Job 50
  // (priority 100, 16 GPUs) would borrow and ranks 100 - 200 = -100; job 51
  // (priority 0, 8 GPUs) would not, and goes first.
  Snapshot s = testing::SimpleCluster(1, 4);
  s.queues[0].guaranteed_gpus = 24;
  state::State st(s.cluster, s.queues, s.projects);
  ASSERT_TRUE(st.Apply(state::SubmitEdit{Job(1, QueueId(0), 2, 8, hours(1))}).ok());
  ASSERT_TRUE(st.Apply(state::PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 8)}, {NodeId(1), GpuRange(0, 8)}}}).ok());
  Workload big = Job(50, QueueId(0), 2, 8, hours(1), 100);
  big.priority.borrowing_start_delta = -200;
  ASSERT_TRUE(st.Apply(state::SubmitEdit{big}).ok());
  ASSERT_TRUE(st.Apply(state::SubmitEdit{Job(51, QueueId(0), 1, 8, hours(1), 0)}).ok());
  const Decisions d = Pass(st.snapshot(), /*take_the_order=*/true, /*explain=*/true);
  ASSERT_FALSE(d.places.empty());
  EXPECT_EQ(d.places[0].workload, WorkloadId(51));
  EXPECT_EQ(d, Pass(st.snapshot(), /*take_the_order=*/false, /*explain=*/true));
}

TEST(WaitingOrderTest, APassOverTheStatesSnapshotDecidesWhatOneOverItsRecordsDecides) {
  // The State's snapshot gives digests, a kept waiting order and each
  // allocation's workload: the pass finds placed work from the allocations
  // and waiting work from the order. A copy without them makes the pass
  // read every record.
  state::State st = Backlog();
  // A third allocation, so that the allocations are not in workload order.
  ASSERT_TRUE(st.Apply(state::PlaceEdit{WorkloadId(11), {{NodeId(2), GpuRange(0, 4)}, {NodeId(2), GpuRange(4, 4)},
                                                         {NodeId(3), GpuRange(0, 4)}, {NodeId(3), GpuRange(4, 4)}}})
                  .ok());
  ASSERT_TRUE(st.Apply(state::ReleaseEdit{WorkloadId(1), WorkloadState::kSucceeded}).ok());
  ASSERT_EQ(st.snapshot().allocation_workloads.size(), st.snapshot().allocations.size());
  Snapshot bare = st.snapshot();
  bare.ClearDerived();
  for (const bool explain : {true, false}) {
    EXPECT_EQ(Pass(st.snapshot(), /*take_the_order=*/true, explain), Pass(bare, /*take_the_order=*/true, explain))
        << "explain " << explain;
  }
}

// Two full nodes and a backlog of one shape after another: once nothing
// more can start, a pass that explains without details decides the waits
// of the rest by key, and gives every workload the reason and estimated
// start the whole walk gives it.
Snapshot FullNodesAndABacklog() {
  Snapshot s = testing::SimpleCluster(1, 2);
  s.now = Time(hours(1));
  // Running at priority 100: nothing waiting may preempt them.
  testing::AddRunning(s, Job(1, QueueId(0), 1, 8, hours(1), 100), {{NodeId(0), GpuRange(0, 8)}}, Time(), Time());
  testing::AddRunning(s, Job(2, QueueId(0), 1, 8, hours(2), 100), {{NodeId(1), GpuRange(0, 8)}}, Time(), Time());
  for (uint64_t id = 10; id < 70; ++id) {
    s.workloads.push_back(Job(id, QueueId(0), 1 + static_cast<int>(id % 2), 1 << (id % 4), hours(1),
                              static_cast<int>(id % 3) * 10, Time(seconds(id))));
  }
  return s;
}

TEST(WaitingOrderTest, WaitsExplainedWithoutDetailsHaveTheWholeWalksReasonsAndStarts) {
  const Snapshot s = FullNodesAndABacklog();
  static const PolicyConfig kPolicy;
  const auto run = [&](bool details, bool* shortcut) {
    engine::SchedulingPass pass(kPolicy, s);
    pass.set_explain_waits(true);
    pass.set_wait_details(details);
    Decisions out = pass.Run();
    *shortcut = pass.took_a_shortcut();
    return out;
  };
  bool keyed = false;
  bool whole_shortcut = true;
  const Decisions by_key = run(/*details=*/false, &keyed);
  const Decisions whole = run(/*details=*/true, &whole_shortcut);
  EXPECT_TRUE(keyed);  // no waiting order here: the shortcut is the key
  EXPECT_FALSE(whole_shortcut);
  ASSERT_EQ(by_key.waits.size(), 60u);
  ASSERT_EQ(whole.waits.size(), 60u);
  for (size_t i = 0; i < whole.waits.size(); ++i) {
    EXPECT_EQ(by_key.waits[i].workload, whole.waits[i].workload) << i;
    EXPECT_EQ(by_key.waits[i].reason, whole.waits[i].reason) << i;
    EXPECT_EQ(by_key.waits[i].estimated_start, whole.waits[i].estimated_start) << i;
    EXPECT_TRUE(by_key.waits[i].detail.empty());
    EXPECT_FALSE(whole.waits[i].detail.empty());
  }
  EXPECT_EQ(by_key.places, whole.places);
  EXPECT_EQ(by_key.rejects, whole.rejects);
}

// The caller holds the reasons of the even ids (and a stale one for id
// 11): a pass without details leaves out exactly the waits it holds, and
// decides the same; with details it leaves out nothing.
TEST(WaitingOrderTest, WaitsTheCallerHoldsAreLeftOut) {
  const Snapshot s = FullNodesAndABacklog();
  static const PolicyConfig kPolicy;
  const auto run = [&](bool details, std::span<const uint8_t> told) {
    engine::SchedulingPass pass(kPolicy, s);
    pass.set_explain_waits(true);
    pass.set_wait_details(details);
    pass.set_told_reasons(told);
    return pass.Run();
  };
  const Decisions all = run(/*details=*/false, {});
  ASSERT_EQ(all.waits.size(), 60u);
  std::vector<uint8_t> told(100, 0xff);  // 0xff: no reason held
  for (const WaitDecision& w : all.waits) {
    if (w.workload.value() % 2 == 0) told[w.workload.value()] = static_cast<uint8_t>(w.reason);
  }
  told[11] = static_cast<uint8_t>(ReasonCode::kAwaitingApproval);  // not its reason
  const Decisions left = run(/*details=*/false, told);
  std::vector<WaitDecision> want;
  for (const WaitDecision& w : all.waits) {
    if (w.workload.value() % 2 == 1) want.push_back(w);
  }
  EXPECT_EQ(left.waits, want);  // odd ids only, id 11 included
  EXPECT_EQ(left.places, all.places);
  EXPECT_EQ(left.rejects, all.rejects);
  EXPECT_EQ(run(/*details=*/true, told).waits.size(), 60u);
}

}  // namespace
}  // namespace tidal
