#include "server/pod_ranks.h"

#include <gtest/gtest.h>

namespace tidal::server {
namespace {

PodPlacement On(uint32_t node, GpuMask gpus = 1) { return {NodeId(node), gpus}; }

TEST(PodRanks, OnlyAServicesReplicasKeepTheirRanks) {
  EXPECT_TRUE(KeepsRanks(WorkloadKind::kInference));
  EXPECT_FALSE(KeepsRanks(WorkloadKind::kTraining));
  EXPECT_FALSE(KeepsRanks(WorkloadKind::kBatchInference));
  EXPECT_FALSE(KeepsRanks(WorkloadKind::kDebug));
}

TEST(PodRanks, AFirstPlacementIsRankedInOrder) {
  int next = 99;
  EXPECT_EQ(RankPods({}, {}, {On(4), On(2), On(7)}, &next), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(next, 3);
}

TEST(PodRanks, ReplicasKeepTheirRanksAndNewOnesTakeTheNext) {
  int next = 3;
  // Rank 0 (node 4) exits: the others keep 1 and 2.
  const std::vector<PodPlacement> three = {On(4), On(2), On(7)};
  const std::vector<PodPlacement> two = {On(2), On(7)};
  std::vector<int> ranks = RankPods(three, {0, 1, 2}, two, &next);
  EXPECT_EQ(ranks, (std::vector<int>{1, 2}));
  // Its replacement lands where it was, on node 4's GPU: a new pod, rank 3
  // (rank 0 again would be the exited pod's key to the agent).
  const std::vector<PodPlacement> again = {On(2), On(7), On(4)};
  ranks = RankPods(two, ranks, again, &next);
  EXPECT_EQ(ranks, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(next, 4);
  // Two pods on one node are told apart by their GPUs.
  const std::vector<PodPlacement> shared = {On(2), On(7), On(4), On(4, 2)};
  EXPECT_EQ(RankPods(again, ranks, shared, &next), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(next, 5);
}

// A record read back without ranks that held together numbers its pods by
// place: a new pod must still take a rank none of them has.
TEST(PodRanks, WithoutKnownRanksANewPodTakesARankAboveThePlaces) {
  int next = 0;
  EXPECT_EQ(RankPods({On(4), On(2)}, {}, {On(4), On(2), On(7)}, &next), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(next, 3);
}

TEST(PodRanks, StoredRanksHoldTogetherOrAreNotUsed) {
  EXPECT_TRUE(RanksHoldTogether(WorkloadKind::kInference, {5, 2}, 2));
  EXPECT_FALSE(RanksHoldTogether(WorkloadKind::kInference, {5, 5}, 2));
  EXPECT_FALSE(RanksHoldTogether(WorkloadKind::kInference, {5}, 2));
  EXPECT_FALSE(RanksHoldTogether(WorkloadKind::kInference, {-1, 0}, 2));
  EXPECT_FALSE(RanksHoldTogether(WorkloadKind::kInference, {protocol::kMaxPodRank, 0}, 2));
  EXPECT_TRUE(RanksHoldTogether(WorkloadKind::kTraining, {0, 1}, 2));
  EXPECT_FALSE(RanksHoldTogether(WorkloadKind::kTraining, {1, 0}, 2));
}

}  // namespace
}  // namespace tidal::server
