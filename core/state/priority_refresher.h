// Keeps derived priorities current as the budget moves and the clock runs.
// It is the one refresher: the server and the simulator both call it through
// StateMachine::RefreshPriorities, once per pass, before the engine runs.
//
// Algorithm (each pass):
//  1. Budget flags. For every project, "over budget" (a budget, and
//     used_gpu_hours >= it); for every queue, "over guarantee" (GPUs in use
//     > guaranteed). A workload's budget state depends only on these two
//     flags. Whether a waiting workload's own start would borrow moves with
//     every start and exit in its queue; it is not stored but settled by
//     the engine each pass (Priority::borrowing_start_delta).
//  2. Candidates. When any flag changed since the last pass, every live
//     workload. Otherwise only the watched ones: a workload is watched from
//     the edit that touched it (submit, approve, place, grow, shrink, pod
//     exit, notice, requeue, target change) until a pass has refreshed it,
//     and for as long as it is time-dependent (a deadline: its
//     near-deadline bonus moves with the clock).
//  3. Derivation. A candidate (not terminating, and not awaiting approval
//     once derived: it cannot run until an admin approves it, which makes it
//     a candidate again) gets its budget state (ComputeBudgetState); when
//     that equals the one last derived and it is not time-dependent,
//     nothing changes. Submit and approve edits, and, when a template has
//     a requeued bonus, requeue and place edits (the bonus starts and ends
//     with them), make it derive again whatever the budget. Otherwise
//     DerivePriority runs, with
//     the project's top tier approved when an admin approved the workload.
//  4. Edits. A derived priority that differs from the current one (value,
//     class, approval, or the derivation text of a workload without a
//     deadline, whose text does not move with the clock) becomes a
//     SetPriorityEdit. The caller applies them in order.
// A pass costs O(projects + queues + watched), or O(live) when a flag moved.
#ifndef TIDAL_CORE_STATE_PRIORITY_REFRESHER_H_
#define TIDAL_CORE_STATE_PRIORITY_REFRESHER_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/common/status.h"
#include "core/model/policy.h"
#include "core/state/edit.h"
#include "core/state/state.h"

namespace tidal::state {

struct PriorityRefresh {
  std::vector<SetPriorityEdit> edits;
  // The first derivation that failed (no template applies, an unknown tier);
  // the workload keeps its priority. The others are still refreshed.
  Status first_error;
};

class PriorityRefresher {
 public:
  explicit PriorityRefresher(std::vector<PriorityTemplate> templates);

  // Told of every applied edit: watches the workload it touched.
  void Observe(const Edit& edit);
  PriorityRefresh Refresh(const State& state);

 private:
  struct Entry {
    BudgetState budget = BudgetState::kWithinGuarantee;
    bool derived = false;
    bool watched = false;
  };
  Entry& EntryOf(WorkloadId id);
  void Watch(WorkloadId id);

  std::vector<PriorityTemplate> templates_;
  bool requeued_bonus_;  // some template has one
  // Ids are dense in both callers; ids past the vector use the map.
  std::vector<Entry> dense_;
  std::unordered_map<uint64_t, Entry> sparse_;
  std::vector<WorkloadId> watch_;
  std::vector<uint8_t> project_over_;
  std::vector<uint8_t> queue_over_;
  bool flags_known_ = false;
};

}  // namespace tidal::state

#endif  // TIDAL_CORE_STATE_PRIORITY_REFRESHER_H_
