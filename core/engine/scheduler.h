// The engine's one entry point. Schedule() is a pure function of the policy
// and the snapshot: the same inputs always give the same decisions, which is
// what lets the simulator predict production.
#ifndef TIDAL_CORE_ENGINE_SCHEDULER_H_
#define TIDAL_CORE_ENGINE_SCHEDULER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "core/model/decision.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"
#include "core/engine/fits_someday.h"
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
  // With explain_waits: whether each WaitDecision carries its detail text
  // (numbers, estimated start aside). The simulator's long-wait diagnosis
  // reads only the reasons, and formatting a text per waiting workload was
  // a tenth of its explained passes.
  bool wait_details = true;
  // With explain_waits and without wait_details: per WorkloadId value, the
  // reason the caller already holds for that workload's wait (a ReasonCode
  // as a byte; any other value holds none). A wait for the same reason is
  // left out of Decisions::waits: over a deep backlog almost every wait
  // repeats its last reason, and the simulator's wait tallies take only
  // changes (diagnosis::WaitTally). The span must outlive the call.
  std::span<const uint8_t> told_reasons;
};

// The only state kept between passes is a cache of node classes, keyed by
// Snapshot::cluster_version (never used when it is 0), the last pass's
// start ClusterState, which the next pass catches up to its snapshot by the
// nodes whose free GPUs changed (ClusterState::CatchUp) instead of building
// it over every node, and the last quiet pass: both give what a build from
// the snapshot gives, so the decisions stay a pure function of policy and
// snapshot. Concurrent passes share the cache under a spin lock held only to
// copy a pointer (core/ has no mutex), and at worst both build it; the kept
// state is taken out for the length of a pass, so a concurrent pass builds
// its own. So is the set of waiting workloads found able to fit some day
// (engine::FitsSomeday), for passes that stop early.
//
// Quiet passes. Over a deep backlog on a full cluster most passes change
// nothing: a timer wakes the loop, nothing was edited, and every waiting
// workload waits again. A pass that decides no action (no place, preempt,
// resize or reject) remembers the version of its snapshot
// (Snapshot::stamp) and until when its comparisons of the clock hold
// (SchedulingPass::quiet_until). A later pass that asks for no wait
// explanations, over the same version, before that time, would decide
// exactly the same nothing, so it returns no decisions without walking the
// backlog. Builds with expensive checks run it anyway and check that it
// decides no action.
class Scheduler {
 public:
  explicit Scheduler(PolicyConfig policy) : policy_(std::move(policy)) {}
  // A copy starts with an empty cache.
  Scheduler(const Scheduler& other) : policy_(other.policy_) {}
  Scheduler& operator=(const Scheduler& other) {
    if (this != &other) {
      policy_ = other.policy_;
      ForgetKept();
    }
    return *this;
  }

  const PolicyConfig& policy() const { return policy_; }

  // One pass: decisions for every pending workload in `snapshot`.
  Decisions Schedule(const Snapshot& snapshot, ScheduleOptions options = {}) const;
  // How many passes were skipped as quiet (see above).
  uint64_t skipped_passes() const { return skipped_.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<const engine::StaticNodeClasses> NodeClasses(const Snapshot& snapshot) const;

  // The last pass that decided no action: its snapshot's version and how
  // long its decisions hold.
  struct QuietPass {
    uint64_t lineage = 0;
    uint64_t changes = 0;
    Time at;
    Time until;
  };
  // Whether a pass over `snapshot` would repeat the last quiet pass.
  bool StillQuiet(const Snapshot& snapshot) const;
  // Remembers a pass over `snapshot` that decided `decided`, its clock
  // comparisons holding until `until`: quiet when it decided no action.
  void RememberPass(const Snapshot& snapshot, const Decisions& decided, Time until) const;
  void ForgetQuiet() const;
  // One pass, run in full; its quiet_until in `*quiet_until`.
  Decisions RunPass(const Snapshot& snapshot, ScheduleOptions options, Time* quiet_until) const;

  struct ClassCache {
    uint64_t version = 0;
    size_t nodes = 0;
    std::shared_ptr<const engine::StaticNodeClasses> classes;
  };

  std::shared_ptr<const ClassCache> GetCache() const;
  void SetCache(std::shared_ptr<const ClassCache> cache) const;
  // Drops the node classes, the kept start state, the fits-someday set and
  // the last quiet pass.
  void ForgetKept() const;
  // Takes something kept between passes out of its slot (null when none or
  // another pass has it), and puts one back.
  template <typename T>
  std::unique_ptr<T> Take(std::unique_ptr<T>& slot) const;
  template <typename T>
  void Put(std::unique_ptr<T>& slot, std::unique_ptr<T> kept) const;

  PolicyConfig policy_;
  mutable std::atomic_flag cache_busy_ = ATOMIC_FLAG_INIT;  // guards cache_
  mutable std::shared_ptr<const ClassCache> cache_;
  mutable std::unique_ptr<engine::ClusterState> kept_;  // guarded by cache_busy_
  mutable std::unique_ptr<engine::FitsSomeday> fits_;   // guarded by cache_busy_
  mutable QuietPass quiet_;                             // guarded by cache_busy_
  mutable std::atomic<uint64_t> skipped_{0};
};

}  // namespace tidal

#endif  // TIDAL_CORE_ENGINE_SCHEDULER_H_
