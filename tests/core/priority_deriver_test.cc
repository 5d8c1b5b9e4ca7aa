#include "core/priority/priority_deriver.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace tidal {
namespace {

// Tiers: critical 1000 (never, approval), standard 500, experiment 100
// (reclaimable); kind bonus inference +500, batch -50, debug +100;
// non-interruptible +100, checkpointed +50, near deadline +200 (1 h window);
// budget within 0, borrowing -200, over budget -400.
PriorityTemplate DefaultTemplate() {
  PriorityTemplate t;
  t.name = "default";
  t.tiers["critical"] = TierRule{1000, PreemptibilityClass::kNever, true};
  t.tiers["standard"] = TierRule{500, PreemptibilityClass::kPreemptible, false};
  t.tiers["experiment"] = TierRule{100, PreemptibilityClass::kReclaimable, false};
  t.fallback_tier = "standard";
  t.attributes.kind_bonus = {{WorkloadKind::kTraining, 0},
                             {WorkloadKind::kInference, 500},
                             {WorkloadKind::kBatchInference, -50},
                             {WorkloadKind::kDebug, 100}};
  t.attributes.non_interruptible_bonus = 100;
  t.attributes.checkpointed_bonus = 50;
  t.attributes.near_deadline_bonus = 200;
  t.attributes.near_deadline_window = hours(1);
  t.budget = BudgetRules{0, -200, -400};
  t.require_checkpoint_to_borrow = true;
  return t;
}

Project MakeProject(std::string tier, bool approved = false) {
  Project p;
  p.id = ProjectId(0);
  p.name = "proj";
  p.tenant = "acme";
  p.tier = std::move(tier);
  p.default_queue = QueueId(0);
  p.top_tier_approved = approved;
  return p;
}

Workload MakeWorkload(WorkloadKind kind) {
  Workload w;
  w.id = WorkloadId(1);
  w.name = "job";
  w.tenant = "acme";
  w.project = ProjectId(0);
  w.queue = QueueId(0);
  w.kind = kind;
  return w;
}

bool HasLine(const Priority& p, const std::string& line) {
  return std::find(p.derivation.begin(), p.derivation.end(), line) != p.derivation.end();
}

const Time kNow = TimeFromMillis(1'000'000);

TEST(PriorityDeriverTest, CriticalInferenceBorrowingMatchesTheWorkedExample) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  auto p = DerivePriority(templates, MakeWorkload(WorkloadKind::kInference), MakeProject("critical", true),
                          BudgetState::kBorrowing, kNow);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // 1000 (critical) + 500 (inference) - 200 (borrowing) = 1300.
  EXPECT_EQ(p->value, 1300);
  EXPECT_EQ(p->preemptibility, PreemptibilityClass::kNever);
  EXPECT_FALSE(p->awaiting_approval);
  EXPECT_EQ(p->template_name, "default");
  EXPECT_TRUE(HasLine(*p, "tier critical: base 1000"));
  EXPECT_TRUE(HasLine(*p, "kind inference: +500"));
  EXPECT_TRUE(HasLine(*p, "budget borrowing: -200"));
  EXPECT_EQ(p->derivation.back(), "total 1300");
}

TEST(PriorityDeriverTest, UnapprovedTopTierIsValuedAtTheFallbackMeanwhile) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  w.training.checkpoint_interval = minutes(30);
  auto p = DerivePriority(templates, w, MakeProject("critical", false), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(p.ok());
  // 500 (standard, the fallback) + 0 (training) + 50 (checkpointed) + 0 = 550.
  EXPECT_EQ(p->value, 550);
  EXPECT_TRUE(p->awaiting_approval);
  // The fallback's class, not critical's kNever.
  EXPECT_EQ(p->preemptibility, PreemptibilityClass::kPreemptible);
  EXPECT_TRUE(HasLine(*p, "tier critical awaits approval: valued at tier standard: base 500"));

  auto approved = DerivePriority(templates, w, MakeProject("critical", true), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(approved.ok());
  // 1000 + 0 + 50 = 1050, and critical training is never preempted.
  EXPECT_EQ(approved->value, 1050);
  EXPECT_FALSE(approved->awaiting_approval);
  EXPECT_EQ(approved->preemptibility, PreemptibilityClass::kNever);
}

TEST(PriorityDeriverTest, KindDecidesTheClassOfInferenceAndDebug) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  auto inference = DerivePriority(templates, MakeWorkload(WorkloadKind::kInference), MakeProject("experiment"),
                                  BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(inference.ok());
  EXPECT_EQ(inference->preemptibility, PreemptibilityClass::kNever);
  EXPECT_EQ(inference->value, 600);  // 100 + 500

  auto debug = DerivePriority(templates, MakeWorkload(WorkloadKind::kDebug), MakeProject("critical", true),
                              BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(debug.ok());
  EXPECT_EQ(debug->preemptibility, PreemptibilityClass::kReclaimable);
  EXPECT_EQ(debug->value, 1100);  // 1000 + 100
}

TEST(PriorityDeriverTest, NonPreemptibleTrainingEarnsTheBonusButOnlyTheTierGrantsNever) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  w.preemptible = false;
  auto standard = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(standard.ok());
  EXPECT_EQ(standard->value, 600);  // 500 + 0 + 100 (non-interruptible)
  EXPECT_EQ(standard->preemptibility, PreemptibilityClass::kPreemptible);
  EXPECT_TRUE(HasLine(*standard, "non-interruptible: +100"));

  auto experiment = DerivePriority(templates, w, MakeProject("experiment"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(experiment.ok());
  EXPECT_EQ(experiment->preemptibility, PreemptibilityClass::kReclaimable);

  auto critical = DerivePriority(templates, w, MakeProject("critical", true), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(critical.ok());
  EXPECT_EQ(critical->preemptibility, PreemptibilityClass::kNever);
  EXPECT_EQ(critical->value, 1100);  // 1000 + 0 + 100
}

TEST(PriorityDeriverTest, NearDeadlineBonusDependsOnSlack) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  Workload w = MakeWorkload(WorkloadKind::kBatchInference);
  w.expected_duration = minutes(90);
  // Slack = 2 h - 0 - 90 min = 30 min < 60 min: bonus.
  w.batch.deadline = kNow + hours(2);
  auto tight = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->value, 650);  // 500 - 50 + 200
  EXPECT_TRUE(HasLine(*tight, "near deadline (slack 30 min < 60 min): +200"));

  // Slack = 3 h - 90 min = 90 min >= 60 min: no bonus.
  w.batch.deadline = kNow + hours(3);
  auto loose = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose->value, 450);  // 500 - 50

  // No deadline at all: no bonus either.
  w.batch.deadline = kInfiniteFuture;
  auto none = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->value, 450);
}

TEST(PriorityDeriverTest, CheckpointBonusIsForTrainingWithAnInterval) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  auto without = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kOverBudget, kNow);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->value, 100);  // 500 + 0 - 400 (over budget)
  EXPECT_TRUE(HasLine(*without, "budget over budget: -400"));
  w.training.checkpoint_interval = minutes(10);
  auto with = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kOverBudget, kNow);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->value, 150);  // 500 + 50 - 400
}

// Declared numbers only count where a real job would have them.
TEST(PriorityDeriverTest, TokenValuesEarnNoBonus) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  // A 1 ms checkpoint interval (what 1e-320 s rounds to, or near it) is not
  // checkpointing: 500 + 0 - 400, no +50.
  w.training.checkpoint_interval = milliseconds(1);
  auto tiny = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kOverBudget, kNow);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->value, 100);
  w.training.checkpoint_interval = seconds(60);  // the bound counts
  EXPECT_EQ(DerivePriority(templates, w, MakeProject("standard"), BudgetState::kOverBudget, kNow)->value, 150);

  // A 99 s job before a deadline: slack 1 s < 60 min, but a duration under
  // 10 min earns no near-deadline bonus: 500 - 50 = 450.
  Workload b = MakeWorkload(WorkloadKind::kBatchInference);
  b.expected_duration = seconds(99);
  b.batch.deadline = kNow + seconds(100);
  auto token = DerivePriority(templates, b, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->value, 450);
  // Unknown duration (0) earns none either.
  b.expected_duration = Duration(0);
  EXPECT_EQ(DerivePriority(templates, b, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow)->value, 450);
  // 10 min of work 5 min before the deadline (slack -5 min): 500 - 50 + 200.
  b.expected_duration = minutes(10);
  b.batch.deadline = kNow + minutes(5);
  EXPECT_EQ(DerivePriority(templates, b, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow)->value, 650);
}

TEST(PriorityDeriverTest, FirstMatchingTemplateWinsByKindAndTenant) {
  PriorityTemplate serving = DefaultTemplate();
  serving.name = "serving";
  serving.kinds = {WorkloadKind::kInference};
  serving.tiers["standard"].base = 700;
  PriorityTemplate ads = DefaultTemplate();
  ads.name = "ads";
  ads.tenants = {"ads"};
  ads.tiers["standard"].base = 300;
  const std::vector<PriorityTemplate> templates = {serving, ads, DefaultTemplate()};

  Workload inference = MakeWorkload(WorkloadKind::kInference);
  EXPECT_EQ(FindTemplate(templates, inference)->name, "serving");
  Workload ads_training = MakeWorkload(WorkloadKind::kTraining);
  ads_training.tenant = "ads";
  EXPECT_EQ(FindTemplate(templates, ads_training)->name, "ads");
  Workload other = MakeWorkload(WorkloadKind::kTraining);
  EXPECT_EQ(FindTemplate(templates, other)->name, "default");

  auto p = DerivePriority(templates, ads_training, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->value, 300);
  EXPECT_EQ(p->template_name, "ads");
}

TEST(PriorityDeriverTest, NoTemplateOrUnknownTierIsAnErrorNamingTheWorkload) {
  PriorityTemplate only_debug = DefaultTemplate();
  only_debug.kinds = {WorkloadKind::kDebug};
  const std::vector<PriorityTemplate> templates = {only_debug};
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  w.name = "resnet";
  auto none = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("resnet"), std::string::npos);

  const std::vector<PriorityTemplate> all = {DefaultTemplate()};
  auto bad_tier = DerivePriority(all, w, MakeProject("platinum"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_FALSE(bad_tier.ok());
  EXPECT_NE(bad_tier.status().message().find("platinum"), std::string::npos);
}

TEST(PriorityDeriverTest, BudgetStateFromQueueUsageAndProjectBudget) {
  Queue q;
  q.id = QueueId(0);
  q.guaranteed_gpus = 16;
  Project p = MakeProject("standard");
  // 16 used <= 16: within.
  EXPECT_EQ(ComputeBudgetState(p, q, 16), BudgetState::kWithinGuarantee);
  // 17 > 16: borrowing.
  EXPECT_EQ(ComputeBudgetState(p, q, 17), BudgetState::kBorrowing);
  // A spent budget wins over queue state.
  p.budget_gpu_hours = 100;
  p.used_gpu_hours = 100;
  EXPECT_EQ(ComputeBudgetState(p, q, 0), BudgetState::kOverBudget);
  p.used_gpu_hours = 99.5;
  EXPECT_EQ(ComputeBudgetState(p, q, 0), BudgetState::kWithinGuarantee);
  // Budget 0 means no budget set.
  p.budget_gpu_hours = 0;
  p.used_gpu_hours = 1e6;
  EXPECT_EQ(ComputeBudgetState(p, q, 0), BudgetState::kWithinGuarantee);
}

TEST(PriorityDeriverTest, WorkWithinTheGuaranteeCarriesTheDeltaOfABorrowingStart) {
  const std::vector<PriorityTemplate> templates = {DefaultTemplate()};
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  w.state = WorkloadState::kPending;
  auto waiting = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(waiting.ok());
  // 500 + 0 + 0 (within); a start above the guarantee: -200 - 0 = -200.
  EXPECT_EQ(waiting->value, 500);
  EXPECT_EQ(waiting->borrowing_start_delta, -200);
  EXPECT_TRUE(HasLine(*waiting, "a start above the queue's guarantee: budget borrowing: -200 instead (-200)"));

  // Already borrowing: nothing is left to settle at its start.
  auto borrowing = DerivePriority(templates, w, MakeProject("standard"), BudgetState::kBorrowing, kNow);
  ASSERT_TRUE(borrowing.ok());
  EXPECT_EQ(borrowing->value, 300);
  EXPECT_EQ(borrowing->borrowing_start_delta, 0);
}

TEST(PriorityDeriverTest, OnlyCheckpointingPreemptibleTrainingMayBorrowShared) {
  PriorityTemplate t = DefaultTemplate();
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  EXPECT_FALSE(MayBorrowShared(w, t));  // preemptible, never checkpoints
  w.training.checkpoint_interval = minutes(15);
  EXPECT_TRUE(MayBorrowShared(w, t));
  w.training.checkpoint_interval = Duration(0);
  w.preemptible = false;
  EXPECT_TRUE(MayBorrowShared(w, t));  // not preemptible: rule is about losing work
  EXPECT_TRUE(MayBorrowShared(MakeWorkload(WorkloadKind::kBatchInference), t));
  t.require_checkpoint_to_borrow = false;
  EXPECT_TRUE(MayBorrowShared(MakeWorkload(WorkloadKind::kTraining), t));
}

TEST(PriorityDeriverTest, ARequeuedWorkloadIsPreferredWhileItWaitsButNotToPreempt) {
  std::vector<PriorityTemplate> t = {DefaultTemplate()};
  t[0].attributes.requeued_bonus = 100;
  const Project proj = MakeProject("standard");
  Workload w = MakeWorkload(WorkloadKind::kTraining);
  w.state = WorkloadState::kPending;
  // Never requeued: standard 500 + training 0, no bonus.
  auto fresh = DerivePriority(t, w, proj, BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->value, 500);
  EXPECT_EQ(fresh->resume_bonus, 0);

  // Preempted twice and waiting: 500 + 100 = 600, of which 100 is the
  // resume bonus, so it preempts as 600 - 100 = 500.
  w.requeues = 2;
  auto waiting = DerivePriority(t, w, proj, BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->value, 600);
  EXPECT_EQ(waiting->resume_bonus, 100);
  EXPECT_EQ(waiting->value - waiting->resume_bonus, 500);
  EXPECT_TRUE(HasLine(*waiting, "requeued 2x, waiting to resume: +100"));
  EXPECT_EQ(waiting->derivation.back(), "total 600");

  // Running again: the bonus ends.
  w.state = WorkloadState::kRunning;
  auto running = DerivePriority(t, w, proj, BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->value, 500);
  EXPECT_EQ(running->resume_bonus, 0);

  // A template without the bonus writes no line for it.
  w.state = WorkloadState::kPending;
  auto none = DerivePriority({DefaultTemplate()}, w, proj, BudgetState::kWithinGuarantee, kNow);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->value, 500);
  EXPECT_FALSE(std::any_of(none->derivation.begin(), none->derivation.end(),
                           [](const std::string& line) { return line.rfind("requeued", 0) == 0; }));
}

}  // namespace
}  // namespace tidal
