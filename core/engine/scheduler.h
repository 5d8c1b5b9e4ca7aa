// The engine's one entry point. Schedule() is a pure function of the policy
// and the snapshot: the same inputs always give the same decisions, which is
// what lets the simulator predict production.
#ifndef TIDAL_CORE_ENGINE_SCHEDULER_H_
#define TIDAL_CORE_ENGINE_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/model/decision.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"
#include "core/placement/cluster_state.h"

namespace tidal {

// What a pass returns besides its actions.
struct ScheduleOptions {
  // A WaitDecision (dominant reason, detail with numbers, estimated start)
  // for every workload that waits: what explain and the API show. The
  // simulator reads none, and over a deep backlog building one per waiting
  // workload per pass is a large part of the pass. Without them the pass
  // decides exactly the same (EngineInvariantsTest.ThousandSeeds checks).
  bool explain_waits = true;
};

// The only state kept between passes is a cache of node classes, keyed by
// Snapshot::cluster_version (never used when it is 0), and the last pass's
// start ClusterState, which the next pass catches up to its snapshot by the
// nodes whose free GPUs changed (ClusterState::CatchUp) instead of building
// it over every node: both give what a build from the snapshot gives, so the
// decisions stay a pure function of policy and snapshot. Concurrent passes
// share the cache under a spin lock held only to copy a pointer (core/ has no
// mutex), and at worst both build it; the kept state is taken out for the
// length of a pass, so a concurrent pass builds its own.
class Scheduler {
 public:
  explicit Scheduler(PolicyConfig policy) : policy_(std::move(policy)) {}
  // A copy starts with an empty cache.
  Scheduler(const Scheduler& other) : policy_(other.policy_) {}
  Scheduler& operator=(const Scheduler& other) {
    if (this != &other) {
      policy_ = other.policy_;
      SetCache(nullptr);
      PutKept(nullptr);
    }
    return *this;
  }

  const PolicyConfig& policy() const { return policy_; }

  // One pass: decisions for every pending workload in `snapshot`.
  Decisions Schedule(const Snapshot& snapshot, ScheduleOptions options = {}) const;

 private:
  std::shared_ptr<const engine::StaticNodeClasses> NodeClasses(const Snapshot& snapshot) const;

  struct ClassCache {
    uint64_t version = 0;
    size_t nodes = 0;
    std::shared_ptr<const engine::StaticNodeClasses> classes;
  };

  std::shared_ptr<const ClassCache> GetCache() const;
  void SetCache(std::shared_ptr<const ClassCache> cache) const;
  // Takes the kept start state out (null when none or another pass has it),
  // and puts one back.
  std::unique_ptr<engine::ClusterState> TakeKept() const;
  void PutKept(std::unique_ptr<engine::ClusterState> kept) const;

  PolicyConfig policy_;
  mutable std::atomic_flag cache_busy_ = ATOMIC_FLAG_INIT;  // guards cache_
  mutable std::shared_ptr<const ClassCache> cache_;
  mutable std::unique_ptr<engine::ClusterState> kept_;  // guarded by cache_busy_
};

}  // namespace tidal

#endif  // TIDAL_CORE_ENGINE_SCHEDULER_H_
