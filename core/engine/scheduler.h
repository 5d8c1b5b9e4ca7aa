// The engine's one entry point. Schedule() is a pure function of the policy
// and the snapshot: the same inputs always give the same decisions, which is
// what lets the simulator predict production.
#ifndef TIDAL_CORE_ENGINE_SCHEDULER_H_
#define TIDAL_CORE_ENGINE_SCHEDULER_H_

#include "core/engine/decision.h"
#include "core/engine/snapshot.h"
#include "core/model/policy.h"

namespace tidal {

class Scheduler {
 public:
  explicit Scheduler(PolicyConfig policy) : policy_(std::move(policy)) {}

  const PolicyConfig& policy() const { return policy_; }

  // One pass: decisions for every pending workload in `snapshot`.
  Decisions Schedule(const Snapshot& snapshot) const;

 private:
  PolicyConfig policy_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_ENGINE_SCHEDULER_H_
