// Randomized invariants of the engine and the state machine: seeded random
// clusters, queues and arrival streams, stepped through the same applier the
// simulator and the server use. After every pass:
//  - the state's own invariants hold (no GPU bound twice, free GPUs and GPUs
//    per queue and allocation match a full recount; EngineDriver checks);
//  - no decision was refused (the engine never emits two decisions for one
//    workload, nor one that double-books a GPU or lands on a bad node);
//  - no gang starts partial;
//  - every priority or reclaim preemption names a live beneficiary;
//  - no queue holds more than its guarantee plus its borrowing limit;
//  - shrink before evict (ShrinkBeforeEvictViolation);
//  - priority order inside a queue (PriorityOrderViolation);
//  - on the first 250 seeds, a pass without wait explanations (the
//    simulator's) decides exactly what the explained pass decided.
// At the end, replaying the journal of applied edits on a fresh state gives
// the live state back. A failure names its seed: rerun one seed with
// --gtest_filter=EngineInvariantsTest.* and TIDAL_SEED=N.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/common/rng.h"
#include "tests/support/cluster_builder.h"
#include "tests/support/decision_fingerprint.h"
#include "tests/support/engine_driver.h"

namespace tidal {
namespace {

using testing::ClusterBuilder;
using testing::EngineDriver;
using testing::NodeSpec;

struct RandomCase {
  Snapshot snapshot;
  std::vector<Workload> arrivals;  // submit_time ascending
};

RandomCase MakeCase(uint64_t seed) {
  Rng rng(seed);
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.gpus = rng.Bernoulli(0.5) ? 8 : 4;
  spec.nvlink_domains = rng.Bernoulli(0.5) ? 1 : 2;
  const int racks = static_cast<int>(rng.UniformInt(1, 3));
  for (int r = 0; r < racks; ++r) {
    b.AddNodes(static_cast<int>(rng.UniformInt(1, 5)), pool, b.AddRack("r" + std::to_string(r)), spec);
  }
  int total = 0;
  for (const Node& n : b.snapshot().cluster.nodes) total += n.gpu_count;
  const int queues = static_cast<int>(rng.UniformInt(1, 3));
  for (int q = 0; q < queues; ++q) {
    const int guarantee = static_cast<int>(rng.UniformInt(0, total / queues));
    const int borrowing = rng.Bernoulli(0.5) ? kUnlimited : static_cast<int>(rng.UniformInt(0, total));
    b.AddQueue("q" + std::to_string(q), guarantee, QueueId(), 1.0 + static_cast<double>(q), kUnlimited,
               borrowing);
  }
  RandomCase c;
  c.snapshot = b.Build();
  const int jobs = static_cast<int>(rng.UniformInt(5, 40));
  Time t;
  for (int i = 0; i < jobs; ++i) {
    t += seconds(rng.UniformInt(0, 300));
    const int gpus = static_cast<int>(std::min<int64_t>(spec.gpus, int64_t{1} << rng.UniformInt(0, 3)));
    const int pods = rng.Bernoulli(0.3) ? static_cast<int>(rng.UniformInt(2, 6)) : 1;
    Workload w = testing::Job(static_cast<uint64_t>(i + 1), QueueId(static_cast<uint32_t>(rng.UniformInt(0, queues - 1))),
                              pods, gpus, seconds(rng.UniformInt(60, 3 * 3600)),
                              static_cast<int>(rng.UniformInt(0, 3)) * 100, t);
    if (pods > 1 && rng.Bernoulli(0.4)) {  // elastic: min below, max above
      w.min_pods = std::max(1, pods / 2);
      w.max_pods = pods + 2;
    }
    if (rng.Bernoulli(0.5)) w.training.checkpoint_interval = minutes(rng.UniformInt(5, 30));
    w.preemptible = rng.Bernoulli(0.8);
    c.arrivals.push_back(std::move(w));
  }
  return c;
}

// Each node's free GPU mask in `s`: its GPUs minus failed GPUs minus every
// allocation's pods (terminating ones too: they hold their GPUs).
std::vector<GpuMask> FreeMasks(const Snapshot& s) {
  std::vector<GpuMask> free(s.cluster.nodes.size());
  for (size_t n = 0; n < free.size(); ++n) {
    free[n] = s.cluster.nodes[n].all_gpus() & ~s.cluster.nodes[n].failed_gpus;
  }
  for (const Allocation& a : s.allocations) {
    for (const PodPlacement& p : a.pods) {
      if (p.node.value() < free.size()) free[p.node.value()] &= ~p.gpus;
    }
  }
  return free;
}

const Workload* Find(const Snapshot& s, WorkloadId id) {
  for (const Workload& w : s.workloads) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

const Allocation* FindAllocation(const Snapshot& s, WorkloadId id) {
  for (const Allocation& a : s.allocations) {
    if (a.workload == id) return &a;
  }
  return nullptr;
}

bool Usable(const Node& n) { return n.health == Health::kHealthy && !n.cordoned; }

// The free masks after the pass's placements and grows: every GPU they took is
// gone, and nothing comes back inside a pass (victims and shrunk pods keep
// their GPUs until the caller applies the decisions), so these GPUs were free
// at every moment of the pass.
std::vector<GpuMask> FreeAfterPass(const Snapshot& before, const Decisions& d) {
  std::vector<GpuMask> free = FreeMasks(before);
  auto take = [&](const std::vector<PodPlacement>& pods) {
    for (const PodPlacement& p : pods) {
      if (p.node.value() < free.size()) free[p.node.value()] &= ~p.gpus;
    }
  };
  for (const PlaceDecision& p : d.places) take(p.pods);
  for (const ResizeDecision& r : d.resizes) take(r.added);
  return free;
}

// Shrink before evict (docs/engine.md, Preemption: candidates in tiers free,
// shrinks, evictions; for a one-node request the node freed without an
// eviction wins). Deliberately narrow so that it has no false positives: a
// pass with exactly one beneficiary B (every priority/reclaim preempt and
// every shrink names B, no other workload waits for victims, no waiting
// workload holds a possible reservation that could block nodes, no pending
// multi-GPU workload of B's queue ranks at or before B, so no head
// reservation blocks it either), B a single
// pod of g GPUs, and a priority or reclaim eviction of V. It is a violation
// when one usable node holds, in GPUs free through the whole pass plus the
// shrinkable pods (the last pods above max(1, min_pods), as the engine takes
// them) of other running, non-terminating, non-leaving, preemptible elastic
// jobs E, at least g GPUs, where E may surely lose those pods for B:
//  - E in B's queue: priority gap to B and min_runtime hold (the priority
//    rule, no quota guard in one queue);
//  - E in V's queue (not B's), E.priority <= V.priority, min_runtime holds,
//    and all of V's queue's shrinkable pods on that node add up to at most
//    V's GPUs (counted only then): whichever
//    rule let V go (reclaim guard or priority gap with the queue guard)
//    lets fewer GPUs of the same queue go too.
std::optional<std::string> ShrinkBeforeEvictViolation(const Snapshot& before, const Decisions& d,
                                                      const PolicyConfig& policy) {
  const PreemptionConfig& cfg = policy.preemption;
  WorkloadId beneficiary;
  for (const PreemptDecision& p : d.preempts) {
    if (p.cause != PreemptCause::kPriority && p.cause != PreemptCause::kReclaim) continue;
    if (beneficiary.valid() && p.preemptor != beneficiary) return std::nullopt;
    beneficiary = p.preemptor;
  }
  if (!beneficiary.valid()) return std::nullopt;
  for (const ResizeDecision& r : d.resizes) {
    if (!r.removed.empty() && r.beneficiary != beneficiary) return std::nullopt;
  }
  for (const WaitDecision& w : d.waits) {
    if (w.workload == beneficiary) continue;
    if (w.reason == ReasonCode::kAwaitingVictims || w.estimated_start.has_value()) return std::nullopt;
  }
  const Workload* b = Find(before, beneficiary);
  if (b == nullptr || b->pods != 1 || b->min_pods > 1 || b->state != WorkloadState::kPending) {
    return std::nullopt;
  }
  // A head reservation (a pending multi-GPU workload of B's queue that ranks
  // at or before B) may hold nodes against B without waiting: leave it out.
  for (const Workload& w : before.workloads) {
    if (w.id != b->id && w.queue == b->queue && w.state == WorkloadState::kPending &&
        w.pods * w.gpus_per_pod > 1 && w.priority.value >= b->priority.value) {
      return std::nullopt;
    }
  }
  const int g = b->gpus_per_pod;
  const std::vector<GpuMask> free = FreeAfterPass(before, d);
  for (const PreemptDecision& p : d.preempts) {
    if (p.cause != PreemptCause::kPriority && p.cause != PreemptCause::kReclaim) continue;
    const Workload* v = Find(before, p.victim);
    const Allocation* va = FindAllocation(before, p.victim);
    if (v == nullptr || va == nullptr) continue;
    const int v_gpus = va->gpu_count();
    // Per node: shrinkable GPUs from B's queue, and from V's queue.
    std::map<uint32_t, int> own, victims_queue;
    for (const Allocation& a : before.allocations) {
      if (a.workload == v->id || a.terminating || !a.leaving.empty()) continue;
      const Workload* e = Find(before, a.workload);
      if (e == nullptr || e->state != WorkloadState::kRunning || !e->is_elastic()) continue;
      if (e->kind != WorkloadKind::kTraining || !e->preemptible ||
          e->priority.preemptibility != PreemptibilityClass::kPreemptible) {
        continue;
      }
      if (before.now - a.start_time < cfg.min_runtime) continue;
      std::map<uint32_t, int>* into = nullptr;
      if (e->queue == b->queue) {
        if (b->priority.value - e->priority.value >= cfg.min_priority_gap) into = &own;
      } else if (e->queue == v->queue && e->priority.value <= v->priority.value) {
        into = &victims_queue;
      }
      if (into == nullptr) continue;
      const int shrinkable = static_cast<int>(a.pods.size()) - std::max(1, e->min_pods);
      for (int k = 0; k < shrinkable; ++k) {
        const PodPlacement& pod = a.pods[a.pods.size() - 1 - k];
        (*into)[pod.node.value()] += std::popcount(pod.gpus);
      }
    }
    for (size_t n = 0; n < free.size(); ++n) {
      if (!Usable(before.cluster.nodes[n]) || before.cluster.nodes[n].gpu_count < g) continue;
      const uint32_t node = static_cast<uint32_t>(n);
      // The selector guards V's queue on the running total, pod by pod, so
      // count V's queue's pods only when all of them fit under V's GPUs.
      const int from_victims_queue = victims_queue[node] <= v_gpus ? victims_queue[node] : 0;
      const int have = std::popcount(free[n]) + own[node] + from_victims_queue;
      if (have >= g) {
        return "workload " + std::to_string(v->id.value()) + " evicted (" +
               std::string(PreemptCauseName(p.cause)) + ") for " +
               std::to_string(beneficiary.value()) + " (" + std::to_string(g) +
               " GPUs), but node " + before.cluster.nodes[n].name + " had " +
               std::to_string(std::popcount(free[n])) + " free and " +
               std::to_string(own[node] + victims_queue[node]) +
               " GPUs in shrinkable elastic pods";
      }
    }
  }
  return std::nullopt;
}

// Priority order inside a queue (docs/engine.md, Order of a pass: the main
// phase takes pending work by priority). Narrow, so without false positives:
// a pending single-pod workload H (g GPUs) that stays pending while a
// strictly lower-priority pending workload P of the same queue is placed.
// Excluded, as documented: H waits for quota, a reservation (P may backfill
// held nodes), victims, approval, a loan or node health; or H might need to
// borrow (then it is served in the borrow phase, after P: the queue's usage
// at pass start plus every GPU the queue is given in the pass, plus its
// waiters for victims, plus g exceeds its guarantee). Otherwise H was
// processed before P in the main phase, when every GPU free at the end of the
// pass and every GPU P took were free: if one usable node had g of those, H
// would have been placed.
std::optional<std::string> PriorityOrderViolation(const Snapshot& before, const Decisions& d) {
  const std::vector<GpuMask> free = FreeAfterPass(before, d);
  std::map<uint32_t, int> queue_gpus;  // at pass start plus what the pass gives
  for (const Allocation& a : before.allocations) {
    if (const Workload* w = Find(before, a.workload)) queue_gpus[w->queue.value()] += a.gpu_count();
  }
  auto count = [](const std::vector<PodPlacement>& pods) {
    int n = 0;
    for (const PodPlacement& p : pods) n += std::popcount(p.gpus);
    return n;
  };
  for (const PlaceDecision& p : d.places) {
    if (const Workload* w = Find(before, p.workload)) queue_gpus[w->queue.value()] += count(p.pods);
  }
  for (const ResizeDecision& r : d.resizes) {
    if (const Workload* w = Find(before, r.workload)) queue_gpus[w->queue.value()] += count(r.added);
  }
  for (const WaitDecision& wd : d.waits) {
    if (wd.reason != ReasonCode::kAwaitingVictims) continue;
    if (const Workload* w = Find(before, wd.workload)) {
      queue_gpus[w->queue.value()] += w->pods * w->gpus_per_pod;
    }
  }
  std::map<WorkloadId, ReasonCode> waiting;
  for (const WaitDecision& wd : d.waits) waiting[wd.workload] = wd.reason;
  for (const auto& [id, reason] : waiting) {
    switch (reason) {
      case ReasonCode::kQuota:
      case ReasonCode::kReservation:
      case ReasonCode::kAwaitingVictims:
      case ReasonCode::kAwaitingApproval:
      case ReasonCode::kLoan:
      case ReasonCode::kNodeHealth:
        continue;
      default:
        break;
    }
    const Workload* h = Find(before, id);
    if (h == nullptr || h->state != WorkloadState::kPending || h->pods != 1 || h->min_pods > 1 ||
        h->kind != WorkloadKind::kTraining) {
      continue;
    }
    const int g = h->gpus_per_pod;
    const Queue& q = before.queues[h->queue.value()];
    if (queue_gpus[h->queue.value()] + g > q.guaranteed_gpus) continue;
    for (const PlaceDecision& p : d.places) {
      const Workload* lower = Find(before, p.workload);
      if (lower == nullptr || lower->queue != h->queue || lower->state != WorkloadState::kPending ||
          lower->priority.value >= h->priority.value) {
        continue;
      }
      std::vector<GpuMask> then = free;
      for (const PodPlacement& pod : p.pods) {
        if (pod.node.value() < then.size()) then[pod.node.value()] |= pod.gpus;
      }
      for (size_t n = 0; n < then.size(); ++n) {
        if (!Usable(before.cluster.nodes[n]) || std::popcount(then[n]) < g) continue;
        return "workload " + std::to_string(p.workload.value()) + " (priority " +
               std::to_string(lower->priority.value) + ") placed while " +
               std::to_string(h->id.value()) + " (priority " + std::to_string(h->priority.value) +
               ", " + std::to_string(g) + " GPUs, same queue) waits " +
               std::string(ReasonCodeName(reason)) + "; node " + before.cluster.nodes[n].name +
               " had " + std::to_string(std::popcount(then[n])) + " GPUs for it";
      }
    }
  }
  return std::nullopt;
}

// What the seeds exercised, so that a generator gone dull fails the test.
struct Coverage {
  int gang_places = 0;
  int preempts = 0;
  int resizes = 0;
};

void RunCase(uint64_t seed, Coverage& seen) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  RandomCase c = MakeCase(seed);
  PolicyConfig policy;
  policy.preemption.default_grace = seconds(30);
  EngineDriver driver(c.snapshot, policy);
  // The same passes without wait explanations (the simulator's) must decide
  // the same, on the first seeds (each doubles the engine's work).
  const bool check_quiet = seed <= 250;
  const Scheduler quiet(policy);
  const Time end = c.arrivals.back().submit_time + hours(12);
  size_t next = 0;
  int steps = 0;
  while (driver.now() < end && !::testing::Test::HasFailure()) {
    while (next < c.arrivals.size() && c.arrivals[next].submit_time <= driver.now()) {
      driver.Submit(c.arrivals[next++]);
    }
    const Snapshot before = driver.snapshot();
    const Decisions& d = driver.Step();
    ++steps;
    if (check_quiet) {
      const Decisions q = quiet.Schedule(before, ScheduleOptions{.explain_waits = false});
      EXPECT_TRUE(q.waits.empty()) << "pass " << steps;
      Decisions explained = d;
      explained.waits.clear();
      ASSERT_EQ(testing::DecisionFingerprint(q), testing::DecisionFingerprint(explained))
          << "a pass without wait explanations decided otherwise, at pass " << steps;
    }
    ASSERT_EQ(driver.refused(), 0) << "a decision the state refused, at pass " << steps;
    seen.preempts += static_cast<int>(d.preempts.size());
    seen.resizes += static_cast<int>(d.resizes.size());
    for (const PlaceDecision& p : d.places) {
      const Workload* w = driver.workload(p.workload);
      seen.gang_places += p.pods.size() > 1 ? 1 : 0;
      ASSERT_NE(w, nullptr);
      EXPECT_GE(static_cast<int>(p.pods.size()), w->min_pods) << "partial gang " << p.workload.value();
    }
    for (const PreemptDecision& p : d.preempts) {
      if (p.cause != PreemptCause::kPriority && p.cause != PreemptCause::kReclaim) continue;
      EXPECT_TRUE(p.preemptor.valid() && driver.workload(p.preemptor) != nullptr)
          << "preemption of " << p.victim.value() << " for nobody: " << p.detail;
    }
    for (const Queue& q : driver.snapshot().queues) {
      if (q.borrowing_limit_gpus == kUnlimited) continue;
      EXPECT_LE(driver.QueueGpus(q.id), q.guaranteed_gpus + q.borrowing_limit_gpus)
          << "queue " << q.name << " past its borrowing limit at pass " << steps;
    }
    if (const auto why = ShrinkBeforeEvictViolation(before, d, policy)) {
      ADD_FAILURE() << "shrink before evict, seed " << seed << " pass " << steps << ": " << *why;
    }
    if (const auto why = PriorityOrderViolation(before, d)) {
      ADD_FAILURE() << "priority order, seed " << seed << " pass " << steps << ": " << *why;
    }
    driver.AdvanceTo(driver.now() + seconds(60));
  }
  // The journal rebuilds what the machine holds.
  StatusOr<state::State> replayed = state::State::FromSnapshot(c.snapshot);
  ASSERT_TRUE(replayed.ok());
  for (const state::JournalEntry& e : driver.journal()) {
    replayed->AdvanceTo(e.at);
    ASSERT_TRUE(replayed->Apply(e.edit).ok()) << state::EditName(e.edit);
  }
  const Snapshot& live = driver.snapshot();
  const Snapshot& again = replayed->snapshot();
  ASSERT_EQ(live.workloads.size(), again.workloads.size());
  for (size_t i = 0; i < live.workloads.size(); ++i) {
    EXPECT_EQ(live.workloads[i].id, again.workloads[i].id);
    EXPECT_EQ(live.workloads[i].state, again.workloads[i].state);
  }
  ASSERT_EQ(live.allocations.size(), again.allocations.size());
  for (size_t i = 0; i < live.allocations.size(); ++i) {
    EXPECT_EQ(live.allocations[i].pods, again.allocations[i].pods);
    EXPECT_EQ(live.allocations[i].leaving, again.allocations[i].leaving);
  }
  EXPECT_EQ(live.free_gpus, again.free_gpus);
}

// The checkers themselves must be able to fail: hand-made bad passes.
Snapshot TwoNodes(int guarantee) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.gpus = 8;
  b.AddNodes(2, pool, b.AddRack("r0"), spec);
  b.AddQueue("q0", guarantee);
  Snapshot s = b.Build();
  s.now += hours(1);
  return s;
}

TEST(EngineInvariantsCheckTest, ShrinkBeforeEvictFlagsAnEvictionAShrinkCouldAvoid) {
  // Node 0 holds elastic job 1 (4 x 2 GPUs, min 2), node 1 rigid job 2
  // (1 x 8); both priority 0, running an hour. Job 3 (priority 200) needs
  // 1 x 4: shrinking job 1's last two pods frees 2 + 2 = 4 GPUs on node 0,
  // so evicting job 2 is a violation; shrinking is not.
  Snapshot s = TwoNodes(16);
  Workload elastic = testing::Job(1, QueueId(0), 4, 2, hours(5));
  elastic.min_pods = 2;
  elastic.max_pods = 6;
  std::vector<PodPlacement> pods;
  for (int p = 0; p < 4; ++p) pods.push_back({NodeId(0), testing::GpuRange(2 * p, 2)});
  testing::AddRunning(s, elastic, pods, Time(), Time());
  testing::AddRunning(s, testing::Job(2, QueueId(0), 1, 8, hours(5)),
                      {{NodeId(1), testing::GpuRange(0, 8)}}, Time(), Time());
  s.workloads.push_back(testing::Job(3, QueueId(0), 1, 4, hours(1), 200, s.now));
  PolicyConfig policy;

  Decisions evict;
  evict.preempts.push_back({WorkloadId(2), WorkloadId(3), PreemptCause::kPriority});
  evict.waits.push_back({WorkloadId(3), ReasonCode::kAwaitingVictims});
  EXPECT_TRUE(ShrinkBeforeEvictViolation(s, evict, policy).has_value());

  Decisions shrink;
  ResizeDecision r;
  r.workload = WorkloadId(1);
  r.from_pods = 4;
  r.to_pods = 2;
  r.removed = {pods[3], pods[2]};
  r.beneficiary = WorkloadId(3);
  shrink.resizes.push_back(r);
  shrink.waits.push_back({WorkloadId(3), ReasonCode::kAwaitingVictims});
  EXPECT_FALSE(ShrinkBeforeEvictViolation(s, shrink, policy).has_value());

  // At its minimum already (min 4 of 4 pods), job 1 has nothing to give:
  // the eviction stands.
  Snapshot at_min = s;
  at_min.workloads[0].min_pods = 4;
  EXPECT_FALSE(ShrinkBeforeEvictViolation(at_min, evict, policy).has_value());
}

TEST(EngineInvariantsCheckTest, PriorityOrderFlagsALowerPlacementAheadOfAFittingHigherOne) {
  // Two empty 8-GPU nodes, queue guarantee 16. Job 1 (priority 200) and job 2
  // (priority 100) each need 1 x 4. Placing job 2 while job 1 waits for
  // capacity is a violation (4 + 8 + 8 GPUs were there for job 1); job 1
  // waiting for quota or a reservation is not.
  Snapshot s = TwoNodes(16);
  s.workloads.push_back(testing::Job(1, QueueId(0), 1, 4, hours(1), 200, s.now));
  s.workloads.push_back(testing::Job(2, QueueId(0), 1, 4, hours(1), 100, s.now));
  Decisions bad;
  bad.places.push_back({WorkloadId(2), {{NodeId(0), testing::GpuRange(0, 4)}}});
  bad.waits.push_back({WorkloadId(1), ReasonCode::kCapacity});
  EXPECT_TRUE(PriorityOrderViolation(s, bad).has_value());

  Decisions reserved = bad;
  reserved.waits[0].reason = ReasonCode::kReservation;
  EXPECT_FALSE(PriorityOrderViolation(s, reserved).has_value());

  // Job 1 would need to borrow (guarantee 4, job 2 took it): the borrow
  // phase serves it after job 2, as documented.
  Snapshot small = TwoNodes(4);
  small.workloads = s.workloads;
  EXPECT_FALSE(PriorityOrderViolation(small, bad).has_value());

  // The other way round (job 1 placed, job 2 waiting) is fine.
  Decisions good;
  good.places.push_back({WorkloadId(1), {{NodeId(0), testing::GpuRange(0, 4)}}});
  good.waits.push_back({WorkloadId(2), ReasonCode::kCapacity});
  EXPECT_FALSE(PriorityOrderViolation(s, good).has_value());
}

TEST(EngineInvariantsTest, ThousandSeeds) {
  Coverage seen;
  if (const char* one = std::getenv("TIDAL_SEED")) {
    RunCase(std::strtoull(one, nullptr, 10), seen);
    return;
  }
  for (uint64_t seed = 1; seed <= 1000 && !HasFailure(); ++seed) RunCase(seed, seen);
  // The streams must reach the interesting paths, not only easy placements.
  EXPECT_GT(seen.gang_places, 1000);
  EXPECT_GT(seen.preempts, 100);
  EXPECT_GT(seen.resizes, 100);
  std::printf("seeds covered %d gang starts, %d preemptions, %d resizes\n", seen.gang_places,
              seen.preempts, seen.resizes);
}

}  // namespace
}  // namespace tidal
