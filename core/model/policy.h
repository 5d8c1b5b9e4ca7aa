// The policy config: priority templates, preemption and co-location settings.
// Loaded from YAML outside core/ and handed to the engine as plain data.
#ifndef TIDAL_CORE_MODEL_POLICY_H_
#define TIDAL_CORE_MODEL_POLICY_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/time.h"
#include "core/model/workload.h"

namespace tidal {

// Layer 1: the project's business tier.
struct TierRule {
  int base = 0;
  PreemptibilityClass preemptibility = PreemptibilityClass::kPreemptible;
  bool requires_approval = false;  // granted only once an admin approved it
};

// Layer 2: the task's attributes, as additive adjustments.
struct AttributeRules {
  std::map<WorkloadKind, int> kind_bonus;
  int non_interruptible_bonus = 0;  // preemptible == false
  int checkpointed_bonus = 0;       // training with checkpoint_interval > 0
  int near_deadline_bonus = 0;      // batch whose slack is under the window
  Duration near_deadline_window = hours(1);
  // Waiting again after it lost its GPUs (preempted, its node lost): ahead
  // of its peers that never ran, so a victim resumes first. It orders work
  // but never counts toward preempting (Priority::resume_bonus). Below
  // PreemptionConfig::min_priority_gap (the loader checks): a victim ordered
  // ahead of its own preemptor would take its GPUs back, and be preempted
  // again, in a loop.
  int requeued_bonus = 0;
};

// Layer 3: the budget state of the workload's queue and project.
enum class BudgetState { kWithinGuarantee, kBorrowing, kOverBudget };
std::string_view BudgetStateName(BudgetState state);

struct BudgetRules {
  int within_guarantee = 0;
  int borrowing = 0;
  int over_budget = 0;
};

struct PriorityTemplate {
  std::string name;
  std::vector<WorkloadKind> kinds;   // empty = applies to every kind
  std::vector<std::string> tenants;  // empty = every tenant
  std::map<std::string, TierRule> tiers;
  // The tier granted when the top tier awaits approval.
  std::string fallback_tier;
  AttributeRules attributes;
  BudgetRules budget;
  // Preemptible training must checkpoint to borrow the shared pool.
  bool require_checkpoint_to_borrow = false;
};

struct PreemptionConfig {
  Duration default_grace = seconds(60);
  // A job younger than this is not preempted by priority (reclaim of an
  // owner's guarantee and inference returns still may).
  Duration min_runtime = minutes(5);
  // A victim's priority must be at least this much lower.
  int min_priority_gap = 1;
  // A training preemptor may wait this long for its victims' next periodic
  // checkpoints when stopping them then loses less
  // (core/preemption/checkpoint_wait.h); 0 stops them at once.
  Duration max_checkpoint_wait = minutes(15);
};

enum class ColocationMode { kStatic, kReactive, kPredictive };
std::string_view ColocationModeName(ColocationMode mode);

struct ColocationConfig {
  ColocationMode mode = ColocationMode::kPredictive;
  double headroom = 0.2;                  // spare capacity above the modelled need
  Duration scale_down_delay = minutes(10);  // hysteresis
  Duration forecast_horizon = minutes(30);
  // A scale-up whose replicas are not all ready this long after it was
  // decided failed (the simulator's score and the server's metric alike).
  Duration scale_up_timeout = minutes(10);
  // A shared node inference needed is lent again only once inference has not
  // needed it for this long, so a flicker of demand cannot lend a node and
  // take it back within the minute (borrowed work placed there would be
  // evicted for nothing). The first loan of a node is not delayed.
  Duration relend_delay = minutes(1);
};

struct PolicyConfig {
  std::vector<PriorityTemplate> templates;
  PreemptionConfig preemption;
  ColocationConfig colocation;
  bool backfill = true;
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_POLICY_H_
