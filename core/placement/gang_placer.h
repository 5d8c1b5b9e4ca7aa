// Topology-aware best-fit placement of `pods` identical pods, all at once.
//
// A request of T = pods x gpus_per_pod GPUs goes into the smallest topology
// domain that holds it, trying in order:
//   1. one NVLink domain: the node whose fitting domain has the fewest free
//      GPUs, among nodes with the fewest free GPUs (best fit);
//   2. one node: the node with the fewest free GPUs that fits every pod;
//   3. one rack, 4. one zone, 5. the cluster: the domain with the least pod
//      capacity that still fits (best fit, so large free domains stay whole);
//      inside it, nodes that hold the most pods first (fewest nodes), and the
//      last pods on the smallest node that holds them all.
// A required TopologyConstraint stops the walk after its level; a preferred
// one changes nothing (finer levels are always tried first). Inside a node a
// pod takes GPUs from the fullest NVLink domain that holds it whole, else the
// node's lowest free GPUs. Eligible classes are tried by rank (eligibility.h):
// first only rank-0 classes, then up to rank 1, and so on, so degraded nodes
// and borrowed pools are used last. Nothing is placed unless every pod is.
#ifndef TIDAL_CORE_PLACEMENT_GANG_PLACER_H_
#define TIDAL_CORE_PLACEMENT_GANG_PLACER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "core/model/allocation.h"
#include "core/model/workload.h"
#include "core/placement/cluster_state.h"
#include "core/placement/eligibility.h"

namespace tidal::placement {

struct PlacementRequest {
  int pods = 1;
  int gpus_per_pod = 1;
  TopologyConstraint topology;
  int total_gpus() const { return pods * gpus_per_pod; }
};

// Why a request did not fit, with numbers for the explanation.
struct FitDiagnosis {
  int free_gpus = 0;         // free GPUs on eligible, unblocked nodes
  int placeable_gpus = 0;    // of those, in whole pods
  int best_domain_gpus = 0;  // most placeable GPUs inside one domain of the
                             // required topology level (0 when none is set)
};

class GangPlacer {
 public:
  // `blocked[node] != 0` keeps a node out (held by a reservation); null = none.
  std::optional<std::vector<PodPlacement>> Place(const engine::ClusterState& state,
                                                 const Eligibility& eligibility,
                                                 const PlacementRequest& request,
                                                 const std::vector<uint8_t>* blocked);

  FitDiagnosis Diagnose(const engine::ClusterState& state, const Eligibility& eligibility,
                        const PlacementRequest& request, const std::vector<uint8_t>* blocked);

 private:
  struct Candidate {
    uint32_t node;
    int pods;  // how many of the request's pods it holds
  };

  bool PlaceUpToRank(const engine::ClusterState& state, const Eligibility& e, int max_rank,
                     const PlacementRequest& r, const std::vector<uint8_t>* blocked,
                     std::vector<PodPlacement>& out);
  bool PlaceInOneDomain(const engine::ClusterState& state, const Eligibility& e, int max_rank,
                        const PlacementRequest& r, const std::vector<uint8_t>* blocked,
                        std::vector<PodPlacement>& out);
  bool PlaceOnOneNode(const engine::ClusterState& state, const Eligibility& e, int max_rank,
                      const PlacementRequest& r, const std::vector<uint8_t>* blocked,
                      std::vector<PodPlacement>& out);
  // Fills `out` from candidates_[begin, end), which hold at least `pods`.
  void FillFrom(const engine::ClusterState& state, size_t begin, size_t end, int pods,
                int gpus_per_pod, std::vector<PodPlacement>& out);

  std::vector<Candidate> candidates_;  // scratch, reused across calls
  std::vector<int> domain_pods_;
};

// Takes `pods` pods of `gpus_per_pod` GPUs from `free` on one node: each from
// the fullest NVLink domain that holds it whole, else the lowest free GPUs.
// Returns false (and appends nothing) when they do not fit.
bool AssignPodsOnNode(NodeId node, GpuMask free, const std::vector<GpuMask>& domains, int pods,
                      int gpus_per_pod, std::vector<PodPlacement>& out);

}  // namespace tidal::placement

#endif  // TIDAL_CORE_PLACEMENT_GANG_PLACER_H_
