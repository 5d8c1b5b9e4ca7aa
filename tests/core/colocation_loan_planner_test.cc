#include "core/colocation/loan_planner.h"

#include <gtest/gtest.h>

#include "tests/support/colocation_fixtures.h"

namespace tidal {
namespace {

using colocation_testing::ColocationSnapshot;
using colocation_testing::Gpus;
using colocation_testing::InferenceService;
using colocation_testing::AddRunning;
using colocation_testing::TrainingJob;

Time At(Duration d) { return Time(d); }
NodeId N(uint32_t i) { return NodeId(i); }
constexpr Duration kGrace = seconds(60);  // what a return's victims get

InferenceDemand Demand(uint64_t service, int gpus_per_pod, int replicas) {
  InferenceDemand d;
  d.service = WorkloadId(service);
  d.gpus_per_pod = gpus_per_pod;
  d.replicas = replicas;
  return d;
}

// Node 0 inference-reserved, nodes 1..4 shared; 8 GPUs each; now = 1 h.
class LoanPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snapshot_ = ColocationSnapshot(1, 4, 0);
    snapshot_.now = At(hours(1));
  }
  std::vector<bool> AllSharedLent() const { return {false, true, true, true, true}; }
  Snapshot snapshot_;
};

TEST_F(LoanPlannerTest, StaticLendsNothingAndReturnsWhatWasLent) {
  const LoanPlan plan =
      PlanLoans(ColocationMode::kStatic, snapshot_, kGrace, {false, false, true, false, false}, {});
  EXPECT_EQ(plan.lent_nodes, std::vector<bool>(5, false));
  EXPECT_EQ(plan.lent_count, 0);
  EXPECT_EQ(plan.shared_nodes, 4);
  EXPECT_EQ(plan.returned, std::vector<NodeId>{N(2)});
}

TEST_F(LoanPlannerTest, IdleSharedNodesAreAllLent) {
  const LoanPlan plan = PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, {}, {Demand(1, 8, 1)});
  // The one 8-GPU replica fits the reserved node; all four shared are lent.
  EXPECT_EQ(plan.lent_nodes, (std::vector<bool>{false, true, true, true, true}));
  EXPECT_EQ(plan.newly_lent, (std::vector<NodeId>{N(1), N(2), N(3), N(4)}));
  EXPECT_TRUE(plan.returned.empty());
}

TEST_F(LoanPlannerTest, NodesWithRunningReplicasAreNotLent) {
  AddRunning(snapshot_, InferenceService(1, 2, 10, 1, 8), {{N(0), Gpus(0, 8)}, {N(3), Gpus(0, 2)}},
      At(hours(0)), At(hours(0)));
  // Demand equals what runs: nothing to place, but node 3 stays with inference.
  const LoanPlan plan = PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, {}, {Demand(1, 2, 2)});
  EXPECT_EQ(plan.lent_nodes, (std::vector<bool>{false, true, true, false, true}));
}

TEST_F(LoanPlannerTest, AReplicaOnALentNodeDoesNotRecallItAlone) {
  // The engine put a replica on free GPUs of lent node 3, next to training.
  AddRunning(snapshot_, InferenceService(1, 2, 10, 1, 8), {{N(3), Gpus(0, 2)}}, At(hours(0)),
             At(hours(0)));
  AddRunning(snapshot_, TrainingJob(10, 4, 1), {{N(3), Gpus(2, 4)}}, At(hours(0)), At(hours(0)));
  const LoanPlan plan =
      PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {Demand(1, 2, 1)});
  EXPECT_TRUE(plan.returned.empty());
  EXPECT_TRUE(plan.lent_nodes[3]);
  // Two more 2-GPU replicas: the reserved node (8 free) takes both; five
  // more: 4 on the reserved node, the fifth on an idle lent node (1, the
  // lowest id of the cost-0 empty nodes 1, 2, 4), not on node 3 whose
  // training would be stopped.
  EXPECT_TRUE(PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {Demand(1, 2, 3)})
                  .returned.empty());
  EXPECT_EQ(PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {Demand(1, 2, 6)})
                .returned,
            std::vector<NodeId>{N(1)});
}

TEST_F(LoanPlannerTest, ReturnsCheapestNodesFirstAsWholeNodes) {
  // Node 1: rigid training, 4 GPUs, last checkpoint 30 min ago: 4 * 1800 = 7200 GPU-s.
  AddRunning(snapshot_, TrainingJob(10, 4, 1), {{N(1), Gpus(0, 4)}}, At(minutes(0)), At(minutes(30)));
  // Node 2: idle.
  // Node 3: an elastic job (min 1, 2 pods) that keeps 1 pod on node 4 if it
  // leaves node 3: it shrinks, losing nothing.
  Workload elastic = TrainingJob(11, 2, 2);
  elastic.min_pods = 1;
  elastic.max_pods = 4;
  AddRunning(snapshot_, elastic, {{N(3), Gpus(0, 2)}, {N(4), Gpus(0, 2)}}, At(minutes(0)),
      At(minutes(0)));
  // Node 4 also: rigid training, 2 GPUs, checkpoint 10 min ago: 2 * 600 = 1200 GPU-s.
  AddRunning(snapshot_, TrainingJob(12, 2, 1), {{N(4), Gpus(2, 2)}}, At(minutes(0)), At(minutes(50)));
  EXPECT_DOUBLE_EQ(ReturnCost(snapshot_, N(1), kGrace), 7200.0);
  EXPECT_DOUBLE_EQ(ReturnCost(snapshot_, N(3), kGrace), 0.0);
  EXPECT_DOUBLE_EQ(ReturnCost(snapshot_, N(4), kGrace), 1200.0);

  // k + 1 replicas of 8 GPUs: the first fills the reserved node, the other k
  // need k whole shared nodes, taken in the order 2 (empty), 3 (shrink, 0
  // lost), 4 (1200), 1 (7200).
  const std::vector<std::vector<NodeId>> expected = {
      {N(2)}, {N(2), N(3)}, {N(2), N(3), N(4)}, {N(1), N(2), N(3), N(4)}};
  for (int k = 1; k <= 4; ++k) {
    const LoanPlan plan = PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(),
                                    {Demand(1, 8, k + 1)});
    EXPECT_EQ(plan.returned, expected[k - 1]) << k << " nodes";
    for (NodeId n : plan.returned) {
      EXPECT_FALSE(plan.lent_nodes[n.value()]);
      EXPECT_EQ(plan.claimed_by.at(n), WorkloadId(1));
    }
    EXPECT_EQ(plan.lent_count, 4 - k);
    EXPECT_EQ(plan.unplaced_replicas, 0);
  }
  // A fifth 8-GPU replica fits nowhere.
  const LoanPlan over =
      PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {Demand(1, 8, 6)});
  EXPECT_EQ(over.unplaced_replicas, 1);
}

TEST_F(LoanPlannerTest, StoppingAGangFreesAllItsNodes) {
  // Gang 20 on nodes 1 and 2, 16 GPUs, checkpoint 40 s ago: 16 * 40 = 640 GPU-s.
  AddRunning(snapshot_, TrainingJob(20, 8, 2), {{N(1), Gpus(0, 8)}, {N(2), Gpus(0, 8)}},
      At(minutes(0)), snapshot_.now - seconds(40));
  // Node 3: 8 GPUs, 50 s: 400 GPU-s. Node 4: 8 GPUs, 60 s: 480 GPU-s.
  AddRunning(snapshot_, TrainingJob(21, 8, 1), {{N(3), Gpus(0, 8)}}, At(minutes(0)),
      snapshot_.now - seconds(50));
  AddRunning(snapshot_, TrainingJob(22, 8, 1), {{N(4), Gpus(0, 8)}}, At(minutes(0)),
      snapshot_.now - seconds(60));
  // Two nodes needed (reserved takes the first replica): the gang's two nodes
  // lose 640 in all, 320 per node, less than nodes 3 + 4 (880).
  const LoanPlan two =
      PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {Demand(1, 8, 3)});
  EXPECT_EQ(two.returned, (std::vector<NodeId>{N(1), N(2)}));
  // One node needed: only one of the gang's nodes would be used, so the gang
  // costs 640 for it, more than node 3's 400.
  const LoanPlan one =
      PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {Demand(1, 8, 2)});
  EXPECT_EQ(one.returned, (std::vector<NodeId>{N(3)}));
}

TEST_F(LoanPlannerTest, UnlentSharedNodesFillBeforeAnyReturn) {
  // Node 2 is not lent (e.g. returned earlier, victims leaving): a pending
  // replica goes there, not to a lent node.
  AddRunning(snapshot_, InferenceService(1, 8, 10, 1, 8), {{N(0), Gpus(0, 8)}}, At(hours(0)),
      At(hours(0)));
  const LoanPlan plan = PlanLoans(ColocationMode::kPredictive, snapshot_, kGrace,
                                  {false, true, false, true, true}, {Demand(1, 8, 2)});
  EXPECT_TRUE(plan.returned.empty());
  EXPECT_EQ(plan.lent_nodes, (std::vector<bool>{false, true, false, true, true}));
}

TEST_F(LoanPlannerTest, ConstraintsRuleOutNodes) {
  snapshot_.cluster.nodes[4].gpu_model = "L40S";
  InferenceDemand d = Demand(1, 8, 1);
  d.constraints.required_gpu_models = {"L40S"};
  const LoanPlan plan = PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {d});
  EXPECT_EQ(plan.returned, std::vector<NodeId>{N(4)});
  // A taint that the service does not tolerate keeps it off node 4.
  snapshot_.cluster.nodes[4].taints = {{"dedicated", "eval"}};
  EXPECT_EQ(PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {d}).unplaced_replicas,
            1);
  d.constraints.tolerations = {{"dedicated", ""}};
  EXPECT_EQ(PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {d}).returned,
            std::vector<NodeId>{N(4)});
}

TEST_F(LoanPlannerTest, FailedAndCordonedNodesAreNeitherLentNorReturned) {
  snapshot_.cluster.nodes[1].health = Health::kFailed;
  snapshot_.cluster.nodes[2].cordoned = true;
  const LoanPlan plan = PlanLoans(ColocationMode::kReactive, snapshot_, kGrace, AllSharedLent(), {});
  EXPECT_EQ(plan.lent_nodes, (std::vector<bool>{false, false, false, true, true}));
  EXPECT_TRUE(plan.returned.empty());
}

}  // namespace
}  // namespace tidal
