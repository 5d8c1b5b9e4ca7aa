#include "core/placement/eligibility.h"

#include <gtest/gtest.h>

#include "tests/support/cluster_builder.h"

namespace tidal::placement {
namespace {

using testing::ClusterBuilder;
using testing::Job;
using testing::NodeSpec;

struct Fixture {
  ClusterBuilder b;
  PoolId reserved, shared, training, dedicated, semi;
  QueueId nlp, vision;
  Fixture() {
    nlp = b.AddQueue("nlp", 16);
    vision = b.AddQueue("vision", 16);
    reserved = b.AddPool("inference-reserved", PoolKind::kInferenceReserved);
    shared = b.AddPool("shared", PoolKind::kShared);
    training = b.AddPool("training", PoolKind::kTraining);
    dedicated = b.AddPool("dedicated:nlp", PoolKind::kDedicated, nlp);
    semi = b.AddPool("semi:nlp", PoolKind::kSemiDedicated, nlp);
    const RackId r = b.AddRack("r0");
    for (PoolId p : {reserved, shared, training, dedicated, semi}) b.AddNodes(1, p, r);
  }
};

// Classes are created in node order: one per pool here.
TEST(EligibilityTest, PoolKindsFollowTheWorkloadKindAndOwner) {
  Fixture f;
  Snapshot s = f.b.Build();
  s.lent_nodes = {false, true, false, false, false};  // the shared node is lent
  engine::ClusterState state(s);
  EligibilityIndex index(s, state);

  Workload train = Job(1, f.vision, 1, 1, seconds(1));
  const Eligibility& t = index.For(train);
  EXPECT_EQ(t.verdict[0], ClassVerdict::kPool);  // inference-reserved
  EXPECT_TRUE(t.ok(1));                           // shared and lent
  EXPECT_TRUE(t.ok(2));                           // training
  EXPECT_EQ(t.verdict[3], ClassVerdict::kPool);  // nlp's dedicated pool
  EXPECT_TRUE(t.ok(4));                           // semi-dedicated, borrowed
  // Ranks: training 0; lent shared and foreign semi-dedicated are borrowed: 4.
  EXPECT_EQ(t.rank[2], 0);
  EXPECT_EQ(t.rank[1], 4);
  EXPECT_EQ(t.rank[4], 4);

  Workload owner = Job(2, f.nlp, 1, 1, seconds(1));
  const Eligibility& o = index.For(owner);
  EXPECT_TRUE(o.ok(3));
  EXPECT_EQ(o.rank[3], 0);
  EXPECT_EQ(o.rank[4], 0);
  EXPECT_EQ(o.rank[2], 2);  // the common training pool comes after its own

  Workload serve = Job(3, f.vision, 1, 1, seconds(1));
  serve.kind = WorkloadKind::kInference;
  const Eligibility& i = index.For(serve);
  EXPECT_TRUE(i.ok(0));
  EXPECT_TRUE(i.ok(1));
  EXPECT_EQ(i.verdict[2], ClassVerdict::kPool);
}

TEST(EligibilityTest, SharedNodesNotLentRefuseTrainingWithReasonLoan) {
  Fixture f;
  Snapshot s = f.b.Build();
  s.queues[f.vision.value()].pools = {f.shared};
  engine::ClusterState state(s);
  EligibilityIndex index(s, state);
  const Eligibility& e = index.For(Job(1, f.vision, 1, 1, seconds(1)));
  EXPECT_FALSE(e.any_ok);
  EXPECT_EQ(e.furthest, ClassVerdict::kLoan);
  EXPECT_EQ(e.static_gpus, 8);  // it could run once the node is lent
}

TEST(EligibilityTest, ModelSelectorAndTaintsFilterNodes) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const RackId r = b.AddRack("r0");
  b.AddNodes(1, pool, r);  // class 0: H100, no labels
  NodeSpec a100;
  a100.model = "A100";
  a100.labels = {{"ib", "yes"}};
  b.AddNodes(1, pool, r, a100);  // class 1
  NodeSpec tainted;
  tainted.taints = {{"maintenance", "true"}};
  b.AddNodes(1, pool, r, tainted);  // class 2
  const QueueId q = b.AddQueue("q", 0);
  Snapshot s = b.Build();
  engine::ClusterState state(s);
  EligibilityIndex index(s, state);

  Workload w = Job(1, q, 1, 1, seconds(1));
  w.constraints.required_gpu_models = {"A100"};
  const Eligibility& model = index.For(w);
  EXPECT_EQ(model.verdict[0], ClassVerdict::kConstraints);
  EXPECT_TRUE(model.ok(1));

  Workload sel = Job(2, q, 1, 1, seconds(1));
  sel.constraints.node_selector = {{"ib", "no"}};
  EXPECT_FALSE(index.For(sel).any_ok);
  EXPECT_EQ(index.For(sel).furthest, ClassVerdict::kConstraints);

  Workload plain = Job(3, q, 1, 1, seconds(1));
  EXPECT_EQ(index.For(plain).verdict[2], ClassVerdict::kConstraints);  // taint not tolerated
  Workload tolerant = Job(4, q, 1, 1, seconds(1));
  tolerant.constraints.tolerations = {{"maintenance", ""}};  // empty value tolerates any
  EXPECT_TRUE(index.For(tolerant).ok(2));

  Workload prefers = Job(5, q, 1, 1, seconds(1));
  prefers.constraints.preferred_gpu_models = {"A100"};
  const Eligibility& p = index.For(prefers);
  EXPECT_EQ(p.rank[0], 1);  // H100 is not preferred
  EXPECT_EQ(p.rank[1], 0);
}

TEST(EligibilityTest, FailedAndCordonedNodesFailHealthAndDegradedRankLast) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  const RackId r = b.AddRack("r0");
  NodeSpec failed;
  failed.health = Health::kFailed;
  b.AddNodes(2, pool, r, failed);
  NodeSpec cordoned;
  cordoned.cordoned = true;
  b.AddNodes(1, pool, r, cordoned);
  NodeSpec degraded;
  degraded.health = Health::kDegraded;
  b.AddNodes(1, pool, r, degraded);
  const QueueId q = b.AddQueue("q", 0);
  Snapshot s = b.Build();
  engine::ClusterState state(s);
  EligibilityIndex index(s, state);
  const Eligibility& e = index.For(Job(1, q, 1, 1, seconds(1)));
  EXPECT_EQ(e.nodes_failing_health, 3);
  EXPECT_TRUE(e.ok(2));
  EXPECT_EQ(e.rank[2], 8);
  // Static capacity counts every matching node: 4 x 8 = 32.
  EXPECT_EQ(e.static_gpus, 32);
}

TEST(EligibilityTest, SameShapeSharesOneCacheEntry) {
  Snapshot s = testing::SimpleCluster(1, 2);
  engine::ClusterState state(s);
  EligibilityIndex index(s, state);
  index.For(Job(1, QueueId(0), 1, 1, seconds(1)));
  index.For(Job(2, QueueId(0), 4, 8, seconds(9)));
  EXPECT_EQ(index.size(), 1);
}

}  // namespace
}  // namespace tidal::placement

namespace tidal::placement {
namespace {

// A template with require_checkpoint_to_borrow keeps preemptible training
// that never checkpoints off the shared pool, even when it is lent; the same
// job with checkpoints may borrow it.
// The fixture's cluster with its shared node lent, and one template that
// requires checkpoints to borrow it.
struct StrictLentCluster {
  Fixture f;
  Snapshot s = [this] {
    Snapshot built = f.b.Build();
    built.lent_nodes = {false, true, false, false, false};  // the shared node is lent
    return built;
  }();
  engine::ClusterState state{s};
  std::vector<PriorityTemplate> templates = [] {
    PriorityTemplate tmpl;
    tmpl.name = "strict";
    tmpl.require_checkpoint_to_borrow = true;
    return std::vector<PriorityTemplate>{tmpl};
  }();
};

TEST(EligibilityTest, TemplateRequiresCheckpointsToBorrowTheSharedPool) {
  StrictLentCluster c;
  Fixture& f = c.f;
  EligibilityIndex index(c.s, c.state, &c.templates);

  Workload no_checkpoints = Job(1, f.vision, 1, 1, seconds(1));
  no_checkpoints.training.checkpoint_interval = seconds(0);
  const Eligibility& refused = index.For(no_checkpoints);
  EXPECT_EQ(refused.verdict[1], ClassVerdict::kPool);  // shared: refused
  EXPECT_TRUE(refused.ok(2));                           // training pool still fine

  Workload checkpoints = Job(2, f.vision, 1, 1, seconds(1));
  checkpoints.training.checkpoint_interval = minutes(30);
  EXPECT_TRUE(index.For(checkpoints).ok(1));
}

// A pass looks eligibility up through the digest (For(w, digest)), reading
// the record only for constraints or a template lookup that matters: it
// finds the entry the record finds, the template's checkpoint rule and
// constraints included.
TEST(EligibilityTest, TheDigestFindsTheEntryTheRecordFinds) {
  StrictLentCluster c;
  Fixture& f = c.f;
  EligibilityIndex by_digest(c.s, c.state, &c.templates);
  EligibilityIndex by_record(c.s, c.state, &c.templates);

  Workload no_checkpoints = Job(1, f.vision, 1, 1, seconds(1));
  no_checkpoints.training.checkpoint_interval = seconds(0);
  Workload checkpoints = Job(2, f.vision, 1, 1, seconds(1));
  checkpoints.training.checkpoint_interval = minutes(30);
  Workload not_preemptible = no_checkpoints;
  not_preemptible.id = WorkloadId(3);
  not_preemptible.preemptible = false;
  Workload service = Job(4, f.nlp, 1, 1, seconds(1));
  service.kind = WorkloadKind::kInference;
  Workload tolerant = Job(5, f.nlp, 1, 1, seconds(1));
  tolerant.constraints.tolerations.push_back({"gpu", "a100"});
  Workload unknown_queue = Job(6, QueueId(77), 1, 1, seconds(1));
  for (const Workload& w : {no_checkpoints, checkpoints, not_preemptible, service, tolerant, unknown_queue}) {
    const Eligibility& digest_found = by_digest.For(w, WorkloadDigest::Of(w, -1, nullptr));
    const Eligibility& record_found = by_record.For(w);
    EXPECT_EQ(digest_found.verdict, record_found.verdict) << "workload " << w.id.value();
    EXPECT_EQ(digest_found.rank, record_found.rank) << "workload " << w.id.value();
    EXPECT_EQ(digest_found.key_id, record_found.key_id) << "workload " << w.id.value();
  }
  // The shared node refuses the one without checkpoints only.
  EXPECT_FALSE(by_digest.For(no_checkpoints, WorkloadDigest::Of(no_checkpoints, -1, nullptr)).ok(1));
  EXPECT_TRUE(by_digest.For(not_preemptible, WorkloadDigest::Of(not_preemptible, -1, nullptr)).ok(1));
}

}  // namespace
}  // namespace tidal::placement

namespace tidal::placement {
namespace {

// Inference ranks a lent shared node (rank 4) after the reserved pool and an
// unlent shared node (rank 0), so its replicas do not stop loaned training.
TEST(EligibilityTest, InferencePrefersSharedNodesThatAreNotLent) {
  Fixture f;
  Workload serve = Job(1, f.vision, 1, 1, seconds(1));
  serve.kind = WorkloadKind::kInference;

  Snapshot lent = f.b.Build();
  lent.lent_nodes = {false, true, false, false, false};
  engine::ClusterState lent_state(lent);
  EligibilityIndex lent_index(lent, lent_state);
  const Eligibility& on_loan = lent_index.For(serve);
  EXPECT_TRUE(on_loan.ok(1));
  EXPECT_EQ(on_loan.rank[0], 0);
  EXPECT_EQ(on_loan.rank[1], 4);

  Snapshot returned = f.b.Build();
  engine::ClusterState returned_state(returned);
  EligibilityIndex returned_index(returned, returned_state);
  EXPECT_EQ(returned_index.For(serve).rank[1], 0);
}

}  // namespace
}  // namespace tidal::placement
