// Randomized invariants of the engine and the state machine: seeded random
// clusters, queues and arrival streams, stepped through the same applier the
// simulator and the server use. After every pass:
//  - the state's own invariants hold (no GPU bound twice, free GPUs and GPUs
//    per queue and allocation match a full recount; EngineDriver checks);
//  - no decision was refused (the engine never emits two decisions for one
//    workload, nor one that double-books a GPU or lands on a bad node);
//  - no gang starts partial;
//  - every priority or reclaim preemption names a live beneficiary;
//  - no queue holds more than its guarantee plus its borrowing limit.
// At the end, replaying the journal of applied edits on a fresh state gives
// the live state back. A failure names its seed: rerun one seed with
// --gtest_filter=EngineInvariantsTest.* and TIDAL_SEED=N.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "core/common/rng.h"
#include "tests/support/cluster_builder.h"
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
  const Time end = c.arrivals.back().submit_time + hours(12);
  size_t next = 0;
  int steps = 0;
  while (driver.now() < end && !::testing::Test::HasFailure()) {
    while (next < c.arrivals.size() && c.arrivals[next].submit_time <= driver.now()) {
      driver.Submit(c.arrivals[next++]);
    }
    const Decisions& d = driver.Step();
    ++steps;
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
