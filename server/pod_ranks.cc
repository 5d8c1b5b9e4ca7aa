#include "server/pod_ranks.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>

namespace tidal::server {

bool KeepsRanks(WorkloadKind kind) { return kind == WorkloadKind::kInference; }

std::vector<int> RankPods(const std::vector<PodPlacement>& before, const std::vector<int>& before_ranks,
                          const std::vector<PodPlacement>& after, int* next_rank) {
  std::vector<int> ranks(after.size());
  if (before.empty()) {
    std::iota(ranks.begin(), ranks.end(), 0);
    *next_rank = static_cast<int>(after.size());
    return ranks;
  }
  std::map<std::pair<uint32_t, GpuMask>, int> rank_of;
  for (size_t i = 0; i < before.size(); ++i) {
    const int rank = i < before_ranks.size() ? before_ranks[i] : static_cast<int>(i);
    rank_of[{before[i].node.value(), before[i].gpus}] = rank;
    // Never below a rank in use (`before_ranks` empty: ranks by place).
    *next_rank = std::max(*next_rank, rank + 1);
  }
  for (size_t i = 0; i < after.size(); ++i) {
    auto it = rank_of.find({after[i].node.value(), after[i].gpus});
    ranks[i] = it != rank_of.end() ? it->second : (*next_rank)++;
  }
  return ranks;
}

bool RanksHoldTogether(WorkloadKind kind, const std::vector<int>& ranks, size_t pod_count) {
  if (ranks.size() != pod_count) return false;
  if (!KeepsRanks(kind)) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] != static_cast<int>(i)) return false;
    }
    return true;
  }
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= protocol::kMaxPodRank || !seen.insert(r).second) return false;
  }
  return true;
}

}  // namespace tidal::server
