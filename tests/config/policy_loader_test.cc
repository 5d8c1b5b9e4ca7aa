#include "config/policy_loader.h"

#include <gtest/gtest.h>

namespace tidal::config {
namespace {

TEST(PolicyLoaderTest, DefaultPolicyHasTheThreeTiersAndApprovalOnCritical) {
  PolicyConfig p = DefaultPolicy();
  ASSERT_EQ(p.templates.size(), 1u);
  const PriorityTemplate& t = p.templates[0];
  EXPECT_TRUE(t.kinds.empty());
  EXPECT_TRUE(t.tenants.empty());
  ASSERT_EQ(t.tiers.size(), 3u);
  EXPECT_EQ(t.tiers.at("critical").base, 1000);
  EXPECT_TRUE(t.tiers.at("critical").requires_approval);
  EXPECT_EQ(t.tiers.at("critical").preemptibility, PreemptibilityClass::kNever);
  EXPECT_EQ(t.tiers.at("experiment").preemptibility, PreemptibilityClass::kReclaimable);
  EXPECT_EQ(t.fallback_tier, "standard");
  EXPECT_EQ(t.attributes.kind_bonus.at(WorkloadKind::kInference), 500);
  EXPECT_EQ(t.attributes.near_deadline_window, hours(1));
  EXPECT_EQ(t.budget.borrowing, -200);
  EXPECT_TRUE(t.require_checkpoint_to_borrow);
  EXPECT_EQ(p.preemption.default_grace, seconds(60));
  EXPECT_EQ(p.preemption.min_runtime, minutes(5));
  EXPECT_EQ(p.colocation.mode, ColocationMode::kPredictive);
  EXPECT_EQ(p.colocation.scale_down_delay, minutes(10));
  EXPECT_TRUE(p.backfill);
}

const char* kPolicy = R"(templates:
  - name: t
    kinds: [training, debug]
    tenants: [ads]
    tiers:
      gold: {base: 10, preemptibility: never, requires_approval: true}
      silver: {base: 5}
    fallback_tier: silver
preemption: {default_grace_s: 30.5, min_runtime_s: 0, min_priority_gap: 10, max_checkpoint_wait_s: 120}
colocation: {mode: reactive, headroom: 0.5}
backfill: false
)";

std::string ErrorOf(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  auto p = ParsePolicyYaml(text);
  return p.ok() ? "OK" : p.status().message();
}

TEST(PolicyLoaderTest, ParsesEverySection) {
  auto p = ParsePolicyYaml(kPolicy);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const PriorityTemplate& t = p->templates[0];
  EXPECT_EQ(t.kinds, (std::vector<WorkloadKind>{WorkloadKind::kTraining, WorkloadKind::kDebug}));
  EXPECT_EQ(t.tenants, std::vector<std::string>{"ads"});
  EXPECT_EQ(t.tiers.at("silver").preemptibility, PreemptibilityClass::kPreemptible);  // default
  EXPECT_EQ(p->preemption.default_grace, milliseconds(30500));
  EXPECT_EQ(p->preemption.min_runtime, milliseconds(0));
  EXPECT_EQ(p->preemption.min_priority_gap, 10);
  EXPECT_EQ(p->preemption.max_checkpoint_wait, seconds(120));
  EXPECT_EQ(p->colocation.mode, ColocationMode::kReactive);
  EXPECT_DOUBLE_EQ(p->colocation.headroom, 0.5);
  EXPECT_EQ(p->colocation.forecast_horizon, minutes(30));  // default kept
  EXPECT_FALSE(p->backfill);
}

TEST(PolicyLoaderTest, ErrorsNameLineAndField) {
  EXPECT_EQ(ErrorOf(kPolicy, "preemptibility: never", "preemptibility: sometimes"),
            "policy.yaml:6: templates[0].tiers.gold.preemptibility: expected one of "
            "never|preemptible|reclaimable, got \"sometimes\"");
  EXPECT_EQ(ErrorOf(kPolicy, "fallback_tier: silver", "fallback_tier: bronze"),
            "policy.yaml:8: templates[0].fallback_tier: unknown tier 'bronze'");
  EXPECT_EQ(ErrorOf(kPolicy, "    fallback_tier: silver\n", ""),
            "policy.yaml:2: templates[0].fallback_tier: required when a tier requires approval "
            "(the tier granted meanwhile)");
  EXPECT_EQ(ErrorOf(kPolicy, "kinds: [training, debug]", "kinds: [training, serving]"),
            "policy.yaml:3: templates[0].kinds[1]: expected one of "
            "training|inference|batch_inference|debug, got \"serving\"");
  EXPECT_EQ(ErrorOf(kPolicy, "mode: reactive", "mode: magic"),
            "policy.yaml:10: colocation.mode: expected one of static|reactive|predictive, got \"magic\"");
  EXPECT_EQ(ErrorOf(kPolicy, "backfill: false", "backfil: false"),
            "policy.yaml:11: backfil: unknown field 'backfil': did you mean 'backfill'? (known fields: "
            "templates, preemption, colocation, backfill)");
  EXPECT_EQ(ErrorOf(kPolicy, "min_runtime_s: 0", "min_runtime_s: -1"),
            "policy.yaml:9: preemption.min_runtime_s: expected a number from 0 to 1000000000, got -1");
  EXPECT_EQ(ErrorOf(kPolicy, "max_checkpoint_wait_s: 120", "max_checkpoint_wait_s: 86401"),
            "policy.yaml:9: preemption.max_checkpoint_wait_s: expected a number from 0 to 86400, got 86401");
}

TEST(PolicyLoaderTest, TheRequeuedBonusIsAPreferenceBelowThePreemptionGap) {
  const std::string text = R"(templates:
  - name: t
    tiers: {silver: {base: 5}}
    attributes: {requeued_bonus: 25}
preemption: {min_priority_gap: 100}
)";
  auto p = ParsePolicyYaml(text);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->templates[0].attributes.requeued_bonus, 25);
  EXPECT_EQ(ErrorOf(text, "requeued_bonus: 25", "requeued_bonus: -1"),
            "policy.yaml:4: templates[0].attributes.requeued_bonus: expected an integer from 0 to 1000000, got -1");
  // At or above the gap, a victim ordered ahead of its preemptor would take
  // the GPUs back and be preempted again, in a loop.
  EXPECT_EQ(ErrorOf(text, "requeued_bonus: 25", "requeued_bonus: 100"),
            "policy.yaml:4: templates[0].attributes.requeued_bonus: must be below preemption.min_priority_gap "
            "(100), got 100: a victim ordered ahead of its preemptor would take its GPUs back and be preempted "
            "again");
}

}  // namespace
}  // namespace tidal::config
