#include "config/policy_loader.h"

#include <set>

#include <fmt/format.h>

#include "config/embedded_examples.h"
#include "config/field_reader.h"
#include "config/yaml_document.h"
#include "core/common/check.h"

namespace tidal::config {
namespace {

using nlohmann::json;

constexpr int kMaxPriorityTerm = 1000000;

const std::initializer_list<std::pair<std::string_view, WorkloadKind>> kKinds = {
    {"training", WorkloadKind::kTraining},
    {"inference", WorkloadKind::kInference},
    {"batch_inference", WorkloadKind::kBatchInference},
    {"debug", WorkloadKind::kDebug}};

StatusOr<WorkloadKind> KindByName(const json& v, const std::string& path) {
  if (v.is_string()) {
    for (const auto& [name, kind] : kKinds) {
      if (v.get_ref<const std::string&>() == name) return kind;
    }
  }
  return FieldError(path, "expected one of training|inference|batch_inference|debug, got " + Shown(v));
}

Status ParseTiers(const ObjectReader& r, PriorityTemplate* t) {
  if (!r.Has("tiers")) return FieldError(r.FieldPath("tiers"), "required field is missing");
  const json& tiers = r.at("tiers");
  if (!tiers.is_object() || tiers.empty()) {
    return FieldError(r.FieldPath("tiers"), "expected a map of tier name to rule, got " + Shown(tiers));
  }
  for (const auto& [name, rule] : tiers.items()) {
    const std::string path = JoinPath(r.FieldPath("tiers"), name);
    TIDAL_ASSIGN_OR_RETURN(ObjectReader tr,
                           ObjectReader::Open(rule, path, {"base", "preemptibility", "requires_approval"}));
    TierRule tier;
    TIDAL_RETURN_IF_ERROR(tr.Int("base", &tier.base, -kMaxPriorityTerm, kMaxPriorityTerm, /*required=*/true));
    TIDAL_RETURN_IF_ERROR(tr.Enum<PreemptibilityClass>(
        "preemptibility", &tier.preemptibility,
        {{"never", PreemptibilityClass::kNever},
         {"preemptible", PreemptibilityClass::kPreemptible},
         {"reclaimable", PreemptibilityClass::kReclaimable}}));
    TIDAL_RETURN_IF_ERROR(tr.Bool("requires_approval", &tier.requires_approval));
    t->tiers[name] = tier;
  }
  return Status::Ok();
}

Status ParseAttributes(const ObjectReader& r, AttributeRules* a) {
  if (!r.Has("attributes")) return Status::Ok();
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader ar,
      ObjectReader::Open(r.at("attributes"), r.FieldPath("attributes"),
                         {"kind_bonus", "non_interruptible_bonus", "checkpointed_bonus",
                          "near_deadline_bonus", "near_deadline_window_s", "requeued_bonus"}));
  if (ar.Has("kind_bonus")) {
    const json& bonus = ar.at("kind_bonus");
    if (!bonus.is_object()) {
      return FieldError(ar.FieldPath("kind_bonus"), "expected a map of kind to bonus, got " + Shown(bonus));
    }
    TIDAL_ASSIGN_OR_RETURN(ObjectReader br, ObjectReader::Open(bonus, ar.FieldPath("kind_bonus"),
                                                               {"training", "inference", "batch_inference", "debug"}));
    for (const auto& [name, kind] : kKinds) {
      int v = 0;
      if (!br.Has(name)) continue;
      TIDAL_RETURN_IF_ERROR(br.Int(name, &v, -kMaxPriorityTerm, kMaxPriorityTerm));
      a->kind_bonus[kind] = v;
    }
  }
  TIDAL_RETURN_IF_ERROR(ar.Int("non_interruptible_bonus", &a->non_interruptible_bonus, -kMaxPriorityTerm, kMaxPriorityTerm));
  TIDAL_RETURN_IF_ERROR(ar.Int("checkpointed_bonus", &a->checkpointed_bonus, -kMaxPriorityTerm, kMaxPriorityTerm));
  TIDAL_RETURN_IF_ERROR(ar.Int("near_deadline_bonus", &a->near_deadline_bonus, -kMaxPriorityTerm, kMaxPriorityTerm));
  TIDAL_RETURN_IF_ERROR(ar.Seconds("near_deadline_window_s", &a->near_deadline_window));
  // A preference, never a penalty: 0 (none) up to one priority term.
  TIDAL_RETURN_IF_ERROR(ar.Int("requeued_bonus", &a->requeued_bonus, 0, kMaxPriorityTerm));
  return Status::Ok();
}

Status ParseBudget(const ObjectReader& r, BudgetRules* b) {
  if (!r.Has("budget")) return Status::Ok();
  TIDAL_ASSIGN_OR_RETURN(ObjectReader br, ObjectReader::Open(r.at("budget"), r.FieldPath("budget"),
                                                             {"within_guarantee", "borrowing", "over_budget"}));
  TIDAL_RETURN_IF_ERROR(br.Int("within_guarantee", &b->within_guarantee, -kMaxPriorityTerm, kMaxPriorityTerm));
  TIDAL_RETURN_IF_ERROR(br.Int("borrowing", &b->borrowing, -kMaxPriorityTerm, kMaxPriorityTerm));
  TIDAL_RETURN_IF_ERROR(br.Int("over_budget", &b->over_budget, -kMaxPriorityTerm, kMaxPriorityTerm));
  return Status::Ok();
}

StatusOr<PriorityTemplate> ParseTemplate(const json& item, const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(item, path,
                         {"name", "kinds", "tenants", "tiers", "fallback_tier", "attributes", "budget",
                          "require_checkpoint_to_borrow"}));
  PriorityTemplate t;
  TIDAL_RETURN_IF_ERROR(r.String("name", &t.name, /*required=*/true));
  if (r.Has("kinds")) {
    const json& kinds = r.at("kinds");
    TIDAL_RETURN_IF_ERROR(ExpectArray(kinds, r.FieldPath("kinds")));
    for (size_t i = 0; i < kinds.size(); ++i) {
      TIDAL_ASSIGN_OR_RETURN(WorkloadKind k, KindByName(kinds[i], IndexPath(r.FieldPath("kinds"), i)));
      t.kinds.push_back(k);
    }
  }
  TIDAL_RETURN_IF_ERROR(r.StringList("tenants", &t.tenants));
  TIDAL_RETURN_IF_ERROR(ParseTiers(r, &t));
  TIDAL_RETURN_IF_ERROR(r.String("fallback_tier", &t.fallback_tier));
  TIDAL_RETURN_IF_ERROR(ParseAttributes(r, &t.attributes));
  TIDAL_RETURN_IF_ERROR(ParseBudget(r, &t.budget));
  TIDAL_RETURN_IF_ERROR(r.Bool("require_checkpoint_to_borrow", &t.require_checkpoint_to_borrow));

  bool any_approval = false;
  for (const auto& [name, tier] : t.tiers) any_approval = any_approval || tier.requires_approval;
  if (!t.fallback_tier.empty()) {
    auto it = t.tiers.find(t.fallback_tier);
    if (it == t.tiers.end()) {
      return FieldError(r.FieldPath("fallback_tier"), "unknown tier '" + t.fallback_tier + "'");
    }
    if (it->second.requires_approval) {
      return FieldError(r.FieldPath("fallback_tier"),
                        "tier '" + t.fallback_tier + "' itself requires approval");
    }
  } else if (any_approval) {
    return FieldError(r.FieldPath("fallback_tier"),
                      "required when a tier requires approval (the tier granted meanwhile)");
  }
  return t;
}

}  // namespace

StatusOr<PolicyConfig> ParsePolicyJson(const json& root) {
  PolicyConfig policy;
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(root, "", {"templates", "preemption", "colocation", "backfill"}));
  if (!r.Has("templates")) return FieldError("templates", "required field is missing");
  const json& templates = r.at("templates");
  TIDAL_RETURN_IF_ERROR(ExpectArray(templates, "templates"));
  if (templates.empty()) return FieldError("templates", "must list at least one template");
  std::set<std::string> names;
  for (size_t i = 0; i < templates.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(PriorityTemplate t, ParseTemplate(templates[i], IndexPath("templates", i)));
    if (!names.insert(t.name).second) {
      return FieldError(IndexPath("templates", i), "duplicate template '" + t.name + "'");
    }
    policy.templates.push_back(std::move(t));
  }
  if (r.Has("preemption")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader pr, ObjectReader::Open(r.at("preemption"), "preemption",
                                                               {"default_grace_s", "min_runtime_s", "min_priority_gap",
                                                                "max_checkpoint_wait_s"}));
    TIDAL_RETURN_IF_ERROR(pr.Seconds("default_grace_s", &policy.preemption.default_grace));
    TIDAL_RETURN_IF_ERROR(pr.Seconds("min_runtime_s", &policy.preemption.min_runtime));
    TIDAL_RETURN_IF_ERROR(pr.Int("min_priority_gap", &policy.preemption.min_priority_gap, 0, kMaxPriorityTerm));
    TIDAL_RETURN_IF_ERROR(pr.Seconds("max_checkpoint_wait_s", &policy.preemption.max_checkpoint_wait, 86400));
  }
  // A requeued victim ordered ahead of its preemptor by a bonus of at least
  // the gap would take the GPUs back, and be preempted again, forever.
  for (size_t i = 0; i < policy.templates.size(); ++i) {
    const int bonus = policy.templates[i].attributes.requeued_bonus;
    if (bonus > 0 && bonus >= policy.preemption.min_priority_gap) {
      return FieldError(IndexPath("templates", i) + ".attributes.requeued_bonus",
                        "must be below preemption.min_priority_gap (" +
                            std::to_string(policy.preemption.min_priority_gap) + "), got " + std::to_string(bonus) +
                            ": a victim ordered ahead of its preemptor would take its GPUs back and be "
                            "preempted again");
    }
  }
  if (r.Has("colocation")) {
    TIDAL_ASSIGN_OR_RETURN(
        ObjectReader cr,
        ObjectReader::Open(r.at("colocation"), "colocation",
                           {"mode", "headroom", "scale_down_delay_s", "forecast_horizon_s", "scale_up_timeout_s",
                            "relend_delay_s"}));
    TIDAL_RETURN_IF_ERROR(cr.Enum<ColocationMode>("mode", &policy.colocation.mode,
                                                  {{"static", ColocationMode::kStatic},
                                                   {"reactive", ColocationMode::kReactive},
                                                   {"predictive", ColocationMode::kPredictive}}));
    TIDAL_RETURN_IF_ERROR(cr.Double("headroom", &policy.colocation.headroom, 0, 10));
    TIDAL_RETURN_IF_ERROR(cr.Seconds("scale_down_delay_s", &policy.colocation.scale_down_delay));
    TIDAL_RETURN_IF_ERROR(cr.Seconds("forecast_horizon_s", &policy.colocation.forecast_horizon));
    TIDAL_RETURN_IF_ERROR(cr.Seconds("scale_up_timeout_s", &policy.colocation.scale_up_timeout));
    TIDAL_RETURN_IF_ERROR(cr.Seconds("relend_delay_s", &policy.colocation.relend_delay));
  }
  TIDAL_RETURN_IF_ERROR(r.Bool("backfill", &policy.backfill));
  return policy;
}

StatusOr<PolicyConfig> ParsePolicyYaml(std::string_view text, std::string source_name) {
  TIDAL_ASSIGN_OR_RETURN(YamlDocument doc, YamlDocument::Parse(text, std::move(source_name)));
  StatusOr<PolicyConfig> policy = ParsePolicyJson(doc.root());
  if (!policy.ok()) return doc.Locate(policy.status());
  return policy;
}

StatusOr<PolicyConfig> LoadPolicyFile(const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(YamlDocument doc, YamlDocument::Load(path));
  StatusOr<PolicyConfig> policy = ParsePolicyJson(doc.root());
  if (!policy.ok()) return doc.Locate(policy.status());
  return policy;
}

PolicyConfig DefaultPolicy() {
  // The default is the same text as examples/basic/policy.yaml, so the file
  // a user copies and the compiled-in policy can never drift apart.
  StatusOr<PolicyConfig> policy = ParsePolicyYaml(kBasicPolicyYaml, "<default policy>");
  TIDAL_CHECK(policy.ok()) << policy.status().ToString();
  return *std::move(policy);
}

}  // namespace tidal::config
