// Least-cost victims for a workload that does not fit.
//
// Candidates are sorted into three tiers, cheapest first inside each:
//   1. allocations already terminating and claimed by nobody: their GPUs are
//      coming back anyway, so waiting for them costs nothing new;
//   2. single pods of elastic training jobs above their minimum (a shrink);
//   3. whole allocations (a gang is evicted whole, never in part).
// Inside a tier the order is: least lost work (core/model/lost_work.h: GPUs
// x (now - last checkpoint), or GPUs x the save for a victim that saves on
// request), then least unsaved work (GPUs x (now - last checkpoint): among
// victims that save on request, the one a failed save would cost least),
// then lower priority, then younger (later start), then workload id.
// Selection releases candidates in that order on a copy of the cluster state
// until the request fits, then drops, most costly first, every victim the
// request still fits without. A candidate whose queue is guarded keeps that
// queue at or above its guarantee, counting victims already chosen. The caller decides which allocations may be candidates
// (priority gap, minimum runtime, reclaim rules).
#ifndef TIDAL_CORE_PREEMPTION_VICTIM_SELECTOR_H_
#define TIDAL_CORE_PREEMPTION_VICTIM_SELECTOR_H_

#include <optional>
#include <vector>

#include "core/model/decision.h"
#include "core/placement/cluster_state.h"
#include "core/placement/eligibility.h"
#include "core/placement/gang_placer.h"
#include "core/quota/quota_tracker.h"

namespace tidal::preemption {

// What a candidate frees, one variant per candidate. One allocation may give
// several candidates (its shrink pods and its whole self); a selection frees
// the union of their GPUs and keeps at most one decision per allocation (an
// eviction subsumes the shrinks of the same allocation).
enum class CandidateKind : uint8_t {
  kTerminating,  // a terminating allocation nobody has claimed: free
  kLeaving,      // an allocation's Allocation::leaving pods nobody has claimed: free
  kShrink,       // one pod of an elastic job above its minimum
  kEvict,        // the whole allocation (gangs go whole)
};

struct Candidate {
  uint32_t allocation = 0;  // index in Snapshot::allocations
  WorkloadId workload;
  QueueId queue;
  CandidateKind kind = CandidateKind::kEvict;
  // What it frees: a range of the allocation's pods (all of them, the one
  // pod a shrink removes, or its leaving pods). The allocation outlives the
  // selection.
  const PodPlacement* pods = nullptr;
  uint32_t pod_count = 0;
  int gpus = 0;
  double lost_gpu_seconds = 0;    // core/model/lost_work.h
  // GPUs x time since its last checkpoint: what a failed save would lose.
  // Equal to the loss unless the victim saves on request; then, on equal
  // loss, the one with less unsaved goes first.
  double unsaved_gpu_seconds = 0;
  int priority = 0;
  Time start;
  PreemptCause cause = PreemptCause::kPriority;
  bool guard_queue = false;  // keep its queue at or above its guarantee
};

void SortCandidates(std::vector<Candidate>& candidates);

struct Selection {
  // Indices into the candidates, in sorted order; never an allocation's
  // shrink next to its eviction.
  std::vector<int> chosen;
  std::vector<PodPlacement> plan;  // where the request lands once they are gone
};

// The same for a request that fits on one node, without copying the cluster:
// for every node, its own candidates in cost order until the request fits
// there, then the cheapest node wins, compared by (evicts a whole gang, lost
// GPU-seconds, unsaved GPU-seconds, highest victim priority, node id).
// `sorted` need not be sorted.
std::optional<Selection> SelectVictimsOnOneNode(const engine::ClusterState& state,
                                                const placement::Eligibility& eligibility,
                                                const placement::PlacementRequest& request,
                                                const std::vector<uint8_t>* blocked,
                                                const std::vector<Candidate>& candidates,
                                                const quota::QuotaTracker& quota);

std::optional<Selection> SelectVictims(const engine::ClusterState& state,
                                       const placement::Eligibility& eligibility,
                                       const placement::PlacementRequest& request,
                                       const std::vector<uint8_t>* blocked,
                                       const std::vector<Candidate>& sorted,
                                       const quota::QuotaTracker& quota,
                                       placement::GangPlacer& placer);

}  // namespace tidal::preemption

#endif  // TIDAL_CORE_PREEMPTION_VICTIM_SELECTOR_H_
