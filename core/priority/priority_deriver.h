// Derived priority. Users never type a priority: it is computed from the
// project's business tier, the task's attributes and the budget state, using
// the policy's priority templates (core/model/policy.h).
//
// Algorithm:
//  0. Template: the first template in policy order whose `kinds` contains the
//     workload's kind and whose `tenants` contains its tenant (an empty list
//     matches anything). No match is an error naming the workload.
//  1. Tier (layer 1): the project's tier selects a TierRule, which gives the
//     base value and the preemptibility class. A tier that requires approval,
//     for a project not yet `top_tier_approved`, is replaced by the template's
//     `fallback_tier` (base and class) and the result is `awaiting_approval`.
//  2. Attributes (layer 2), added to the base: kind bonus (0 when the kind is
//     not listed); non-interruptible bonus when `preemptible` is false;
//     checkpointed bonus for training with a checkpoint interval; near-
//     deadline bonus for batch inference and training with a deadline whose
//     slack (deadline - now - expected duration) is under the window.
//  3. Budget (layer 3): the adjustment for the caller's BudgetState. Within
//     the guarantee, the difference borrowing would make is kept too
//     (Priority::borrowing_start_delta): the engine adds it to a waiting
//     workload in a pass where its gang minimum would take the queue above
//     the guarantee. Whether a start borrows depends on the queue's exact
//     usage, which moves with every start and exit, so it is settled per
//     pass rather than stored. (A running workload keeps it unused: deriving
//     again at every start would cost a journal row per placement.)
//  Class: inference is always kNever and debug always kReclaimable. Training
//  and batch inference take the tier's class; `preemptible: false` does not
//  change the class (it only earns the non-interruptible bonus), so only a
//  tier whose class is kNever makes a job unpreemptible.
//  Every step adds one derivation line with its number, ending in "total N".
#ifndef TIDAL_CORE_PRIORITY_PRIORITY_DERIVER_H_
#define TIDAL_CORE_PRIORITY_PRIORITY_DERIVER_H_

#include <vector>

#include "core/common/status.h"
#include "core/common/time.h"
#include "core/model/policy.h"
#include "core/model/queue.h"
#include "core/model/workload.h"

namespace tidal {

// The first template that applies to `workload`, or nullptr.
const PriorityTemplate* FindTemplate(const std::vector<PriorityTemplate>& templates,
                                     const Workload& workload);

// Over budget when the project has a budget and has used all of it; else
// borrowing when the queue's GPUs in use exceed its guarantee; else within
// guarantee.
BudgetState ComputeBudgetState(const Project& project, const Queue& queue, int queue_used_gpus);

// Bounds on the declared fields that move priority (docs/priority.md
// "Bounds"): a submitter must not buy a bonus with a number no real job has.
// A checkpoint interval shorter than this does not count as checkpointing
// (1e-320 s is not a checkpoint policy).
inline constexpr Duration kMinCheckpointIntervalForBonus = seconds(60);
// The near-deadline bonus needs a declared duration of at least this: a job
// of unknown or token length (99 s before a 100 s deadline) earns nothing.
inline constexpr Duration kMinDurationForDeadlineBonus = minutes(10);
// Admission and the workload loader refuse a deadline closer than this to
// the submission (config/json_codec.cc).
inline constexpr Duration kMinDeadlineLead = minutes(10);

// Derives the priority of `workload` (of `project`) at `now`. Errors: no
// template applies, or the project's tier (or the fallback tier) is not in
// the chosen template.
StatusOr<Priority> DerivePriority(const std::vector<PriorityTemplate>& templates,
                                  const Workload& workload, const Project& project,
                                  BudgetState budget, Time now);

// False only for preemptible training without checkpoints when the template
// sets `require_checkpoint_to_borrow`: losing such a job to an inference
// return throws away all its work, so it stays off the shared pool's loan.
bool MayBorrowShared(const Workload& workload, const PriorityTemplate& tmpl);

}  // namespace tidal

#endif  // TIDAL_CORE_PRIORITY_PRIORITY_DERIVER_H_
