#include "core/state/priority_refresher.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/priority/priority_deriver.h"

namespace tidal::state {
namespace {

constexpr uint64_t kDenseIdLimit = uint64_t{1} << 25;

// The workload an edit touched in a way that can move its budget state or
// its approval; none for priority, checkpoint and node edits.
WorkloadId Touched(const Edit& edit) {
  return std::visit(
      [](const auto& e) -> WorkloadId {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, SubmitEdit>) {
          return e.workload.id;
        } else if constexpr (std::is_same_v<E, ApproveEdit> || std::is_same_v<E, SetTargetEdit> ||
                             std::is_same_v<E, PlaceEdit> || std::is_same_v<E, GrowEdit> ||
                             std::is_same_v<E, NoticeEdit> || std::is_same_v<E, ShrinkEdit> ||
                             std::is_same_v<E, PodExitEdit> || std::is_same_v<E, RequeueEdit>) {
          return e.workload;
        } else {
          return WorkloadId();
        }
      },
      edit);
}

bool SamePriority(const Priority& a, const Priority& b, bool timed) {
  return a.value == b.value && a.resume_bonus == b.resume_bonus &&
         a.borrowing_start_delta == b.borrowing_start_delta && a.preemptibility == b.preemptibility &&
         a.awaiting_approval == b.awaiting_approval && a.template_name == b.template_name &&
         (timed || a.derivation == b.derivation);
}

}  // namespace

PriorityRefresher::PriorityRefresher(std::vector<PriorityTemplate> templates)
    : templates_(std::move(templates)),
      requeued_bonus_(std::any_of(templates_.begin(), templates_.end(),
                                  [](const PriorityTemplate& t) { return t.attributes.requeued_bonus != 0; })) {}

PriorityRefresher::Entry& PriorityRefresher::EntryOf(WorkloadId id) {
  const uint64_t v = id.value();
  if (v >= kDenseIdLimit) return sparse_[v];
  if (v >= dense_.size()) dense_.resize(std::max<uint64_t>(v + 1, dense_.size() * 2));
  return dense_[v];
}

void PriorityRefresher::Watch(WorkloadId id) {
  Entry& e = EntryOf(id);
  if (e.watched) return;
  e.watched = true;
  watch_.push_back(id);
}

void PriorityRefresher::Observe(const Edit& edit) {
  if (templates_.empty()) return;
  if (const auto* release = std::get_if<ReleaseEdit>(&edit)) {
    // Gone for good: its entry is cleared when the watch list drops it.
    if (release->workload.value() >= kDenseIdLimit && !EntryOf(release->workload).watched) {
      sparse_.erase(release->workload.value());
    }
    return;
  }
  if (const WorkloadId id = Touched(edit); id.valid()) {
    // New, or approved (the same budget state now derives another tier):
    // derive again even when the budget state did not move.
    // A requeue starts the requeued bonus and a placement ends it.
    const bool resumes = requeued_bonus_ && (std::holds_alternative<RequeueEdit>(edit) ||
                                             std::holds_alternative<PlaceEdit>(edit));
    if (std::holds_alternative<SubmitEdit>(edit) || std::holds_alternative<ApproveEdit>(edit) || resumes) {
      EntryOf(id).derived = false;
    }
    Watch(id);
  }
}

PriorityRefresh PriorityRefresher::Refresh(const State& state) {
  PriorityRefresh out;
  if (templates_.empty()) return out;
  const Snapshot& s = state.snapshot();
  const std::vector<int>& queue_used = state.queue_used_gpus();
  // 1. Budget flags.
  bool flags_changed = !flags_known_;
  project_over_.resize(s.projects.size(), 0);
  queue_over_.resize(s.queues.size(), 0);
  for (size_t p = 0; p < s.projects.size(); ++p) {
    const Project& project = s.projects[p];
    const uint8_t over = project.budget_gpu_hours > 0 && project.used_gpu_hours >= project.budget_gpu_hours;
    flags_changed = flags_changed || over != project_over_[p];
    project_over_[p] = over;
  }
  for (size_t q = 0; q < s.queues.size(); ++q) {
    const uint8_t over = queue_used[q] > s.queues[q].guaranteed_gpus;
    flags_changed = flags_changed || over != queue_over_[q];
    queue_over_[q] = over;
  }
  flags_known_ = true;

  // 3. Derivation of one candidate.
  auto refresh = [&](const Workload& w) {
    if (w.state == WorkloadState::kTerminating) return;
    Entry& entry = EntryOf(w.id);
    // Awaiting approval: derived once (the fallback tier), then left alone
    // until an admin approves it; it cannot run meanwhile.
    if (w.state == WorkloadState::kAwaitingApproval && entry.derived) return;
    const Queue& queue = s.queues[w.queue.value()];
    static const Project kNoProject;
    const Project& project = w.project.valid() ? s.projects[w.project.value()] : kNoProject;
    const BudgetState budget = ComputeBudgetState(project, queue, queue_used[w.queue.value()]);
    const bool timed = w.batch.deadline != kInfiniteFuture;
    if (entry.derived && entry.budget == budget && !timed) return;
    // Copied only to derive, and only when an admin's approval must show in
    // it: a pass checks every pending workload, and a Project holds strings.
    StatusOr<Priority> derived = [&] {
      if (!w.top_tier_approved || project.top_tier_approved) {
        return DerivePriority(templates_, w, project, budget, s.now);
      }
      Project approved = project;
      approved.top_tier_approved = true;
      return DerivePriority(templates_, w, approved, budget, s.now);
    }();
    if (!derived.ok()) {
      if (out.first_error.ok()) out.first_error = derived.status();
      return;
    }
    entry.derived = true;
    entry.budget = budget;
    if (SamePriority(*derived, w.priority, timed)) return;
    out.edits.push_back(SetPriorityEdit{w.id, *std::move(derived)});
  };

  // 2. Candidates.
  if (flags_changed) {
    for (const Workload& w : s.workloads) refresh(w);
  } else {
    for (WorkloadId id : watch_) {
      if (const Workload* w = state.workload(id)) refresh(*w);
    }
  }
  // Keep watching what depends on time.
  size_t kept = 0;
  for (WorkloadId id : watch_) {
    const Workload* w = state.workload(id);
    const bool keep = w != nullptr && w->batch.deadline != kInfiniteFuture;
    if (keep) {
      watch_[kept++] = id;
    } else if (w == nullptr && id.value() >= kDenseIdLimit) {
      sparse_.erase(id.value());
    } else {
      EntryOf(id).watched = false;
    }
  }
  watch_.resize(kept);
  return out;
}

}  // namespace tidal::state
