#include "core/priority/priority_deriver.h"

#include <algorithm>
#include <string>

namespace tidal {
namespace {

std::string Signed(int v) { return (v >= 0 ? "+" : "") + std::to_string(v); }

std::string Minutes(Duration d) {
  // Whole minutes, rounded toward zero, are enough for a reader.
  return std::to_string(std::chrono::duration_cast<minutes>(d).count()) + " min";
}

std::string QuotedName(const Workload& w) {
  return "workload '" + w.name + "'";
}

}  // namespace

const PriorityTemplate* FindTemplate(const std::vector<PriorityTemplate>& templates,
                                     const Workload& workload) {
  for (const PriorityTemplate& t : templates) {
    const bool kind_ok =
        t.kinds.empty() || std::find(t.kinds.begin(), t.kinds.end(), workload.kind) != t.kinds.end();
    const bool tenant_ok = t.tenants.empty() ||
                           std::find(t.tenants.begin(), t.tenants.end(), workload.tenant) !=
                               t.tenants.end();
    if (kind_ok && tenant_ok) return &t;
  }
  return nullptr;
}

BudgetState ComputeBudgetState(const Project& project, const Queue& queue, int queue_used_gpus) {
  if (project.budget_gpu_hours > 0 && project.used_gpu_hours >= project.budget_gpu_hours) {
    return BudgetState::kOverBudget;
  }
  if (queue_used_gpus > queue.guaranteed_gpus) return BudgetState::kBorrowing;
  return BudgetState::kWithinGuarantee;
}

StatusOr<Priority> DerivePriority(const std::vector<PriorityTemplate>& templates,
                                  const Workload& workload, const Project& project,
                                  BudgetState budget, Time now) {
  const PriorityTemplate* tmpl = FindTemplate(templates, workload);
  if (tmpl == nullptr) {
    return NotFound("no priority template applies to " + QuotedName(workload) + " (kind " +
                    std::string(WorkloadKindName(workload.kind)) + ", tenant '" +
                    workload.tenant + "')");
  }
  Priority p;
  p.template_name = tmpl->name;
  p.derivation.push_back("template " + tmpl->name);

  // Layer 1: tier.
  auto tier_it = tmpl->tiers.find(project.tier);
  if (tier_it == tmpl->tiers.end()) {
    return NotFound(QuotedName(workload) + ": project '" + project.name + "' has tier '" +
                    project.tier + "', which template '" + tmpl->name + "' does not define");
  }
  const TierRule* tier = &tier_it->second;
  if (tier->requires_approval && !project.top_tier_approved) {
    auto fallback_it = tmpl->tiers.find(tmpl->fallback_tier);
    if (fallback_it == tmpl->tiers.end()) {
      return NotFound(QuotedName(workload) + ": tier '" + project.tier +
                      "' awaits approval and template '" + tmpl->name +
                      "' has no fallback tier '" + tmpl->fallback_tier + "'");
    }
    tier = &fallback_it->second;
    p.awaiting_approval = true;
    p.derivation.push_back("tier " + project.tier + " awaits approval: valued at tier " +
                           tmpl->fallback_tier + ": base " + std::to_string(tier->base));
  } else {
    p.derivation.push_back("tier " + project.tier + ": base " + std::to_string(tier->base));
  }
  int value = tier->base;

  // Layer 2: attributes.
  const AttributeRules& attrs = tmpl->attributes;
  auto kind_it = attrs.kind_bonus.find(workload.kind);
  const int kind_bonus = kind_it == attrs.kind_bonus.end() ? 0 : kind_it->second;
  value += kind_bonus;
  p.derivation.push_back("kind " + std::string(WorkloadKindName(workload.kind)) + ": " +
                         Signed(kind_bonus));
  if (!workload.preemptible) {
    value += attrs.non_interruptible_bonus;
    p.derivation.push_back("non-interruptible: " + Signed(attrs.non_interruptible_bonus));
  }
  if (workload.kind == WorkloadKind::kTraining &&
      workload.training.checkpoint_interval >= kMinCheckpointIntervalForBonus) {
    value += attrs.checkpointed_bonus;
    p.derivation.push_back("checkpointed: " + Signed(attrs.checkpointed_bonus));
  }
  const bool has_deadline_kind = workload.kind == WorkloadKind::kBatchInference ||
                                 workload.kind == WorkloadKind::kTraining;
  if (has_deadline_kind && workload.batch.deadline != kInfiniteFuture &&
      workload.expected_duration >= kMinDurationForDeadlineBonus) {
    const Duration slack = workload.batch.deadline - now - workload.expected_duration;
    if (slack < attrs.near_deadline_window) {
      value += attrs.near_deadline_bonus;
      p.derivation.push_back("near deadline (slack " + Minutes(slack) + " < " +
                             Minutes(attrs.near_deadline_window) +
                             "): " + Signed(attrs.near_deadline_bonus));
    }
  }

  const bool waits = workload.state == WorkloadState::kPending ||
                     workload.state == WorkloadState::kAwaitingApproval;
  if (attrs.requeued_bonus != 0 && workload.requeues > 0 && waits) {
    value += attrs.requeued_bonus;
    p.resume_bonus = attrs.requeued_bonus;
    p.derivation.push_back("requeued " + std::to_string(workload.requeues) + "x, waiting to resume: " +
                           Signed(attrs.requeued_bonus));
  }

  // Layer 3: budget.
  int budget_adjust = 0;
  switch (budget) {
    case BudgetState::kWithinGuarantee: budget_adjust = tmpl->budget.within_guarantee; break;
    case BudgetState::kBorrowing: budget_adjust = tmpl->budget.borrowing; break;
    case BudgetState::kOverBudget: budget_adjust = tmpl->budget.over_budget; break;
  }
  value += budget_adjust;
  std::string budget_name(BudgetStateName(budget));
  std::replace(budget_name.begin(), budget_name.end(), '_', ' ');
  p.derivation.push_back("budget " + budget_name + ": " + Signed(budget_adjust));
  if (budget == BudgetState::kWithinGuarantee && tmpl->budget.borrowing != tmpl->budget.within_guarantee) {
    p.borrowing_start_delta = tmpl->budget.borrowing - tmpl->budget.within_guarantee;
    p.derivation.push_back("a start above the queue's guarantee: budget borrowing: " +
                           Signed(tmpl->budget.borrowing) + " instead (" +
                           Signed(p.borrowing_start_delta) + ")");
  }

  // Preemptibility class.
  switch (workload.kind) {
    case WorkloadKind::kInference:
      p.preemptibility = PreemptibilityClass::kNever;
      p.derivation.push_back("class never: inference is never preempted");
      break;
    case WorkloadKind::kDebug:
      p.preemptibility = PreemptibilityClass::kReclaimable;
      p.derivation.push_back("class reclaimable: debug is always reclaimable");
      break;
    case WorkloadKind::kTraining:
    case WorkloadKind::kBatchInference: {
      p.preemptibility = tier->preemptibility;
      std::string line = "class " + std::string(PreemptibilityClassName(tier->preemptibility)) +
                         ": from the tier";
      if (!workload.preemptible && tier->preemptibility != PreemptibilityClass::kNever) {
        line += " (preemptible=false is not granted by this tier)";
      }
      p.derivation.push_back(line);
      break;
    }
  }

  p.value = value;
  p.derivation.push_back("total " + std::to_string(value));
  return p;
}

bool MayBorrowShared(const Workload& workload, const PriorityTemplate& tmpl) {
  if (!tmpl.require_checkpoint_to_borrow) return true;
  return !workload.preemptible_without_checkpoint();
}

}  // namespace tidal
