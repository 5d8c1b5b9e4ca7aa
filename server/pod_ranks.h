// How the server numbers a workload's pods: the rank in the agents' pod key
// (workload, rank, attempt) and in the pod's environment (RANK).
//
// A distributed job's ranks are its pods' places in the allocation,
// 0..world-1. When one of its pods leaves, the pods after it are renumbered,
// and their agents restart them under their new keys: a job whose world
// changes restarts its workers anyway.
//
// An inference service's replicas are interchangeable copies, and each takes
// a cold start to come up. A replica keeps its rank while others come and go,
// and a new one takes the next rank of its placement. Renumbered, every
// replica after one that exited would be restarted: a capacity dip the
// simulator, where replicas have no ranks, would never show.
#ifndef TIDAL_SERVER_POD_RANKS_H_
#define TIDAL_SERVER_POD_RANKS_H_

#include <vector>

#include "core/model/allocation.h"
#include "core/model/workload.h"
#include "protocol/pod_assignment.h"

namespace tidal::server {

// Whether a kind's pods keep their ranks when other pods leave.
bool KeepsRanks(WorkloadKind kind);

// For a kind that keeps ranks: the ranks of `after`'s pods, given those of
// `before`'s (parallel to it). A pod of both lists keeps its rank (a pod is
// named by its node and GPUs, since no two pods of an allocation share a
// GPU). New pods, in their order, take ranks from `*next_rank` on (raised
// above every rank of `before` first); a first allocation (`before` empty)
// is ranked 0..n-1. Without `before_ranks`, `before` is ranked by place.
std::vector<int> RankPods(const std::vector<PodPlacement>& before, const std::vector<int>& before_ranks,
                          const std::vector<PodPlacement>& after, int* next_rank);

// Whether `ranks` can number `pod_count` pods of `kind`: one each, and
// distinct; 0..pod_count-1 in order where ranks are not kept, else each below
// protocol::kMaxPodRank. A stored record is read back only with ranks that do.
bool RanksHoldTogether(WorkloadKind kind, const std::vector<int>& ranks, size_t pod_count);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_POD_RANKS_H_
