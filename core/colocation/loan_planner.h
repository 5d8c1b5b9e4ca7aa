// Which shared-pool nodes are lent to training/batch/debug work.
//
// A loan is a whole node (which covers all its NVLink domains), never part of
// one, so a gang placed on lent nodes is never split by a return.
//   static:     nothing is lent.
//   reactive:   `demand` is each service's current target; every shared node
//               that inference does not use (or is not needed to place a
//               pending replica) is lent; a node comes back only when a
//               replica cannot be placed elsewhere.
//   predictive: same packing, but `demand` is the forecast need over the
//               look-ahead (>= cold start + victims' grace), so nodes come
//               back before the load arrives.
// The packing: unlent nodes hosting running inference replicas stay unlent
// (a lent node the engine put a replica on stays lent until a replica needs
// its room, so engine placement alone never evicts training). Replicas
// still to place (demand minus running, per service, largest pods first, then
// service id) are put first-fit on (1) inference-reserved nodes, (2) shared
// nodes not lent now, those already hosting inference first, then (3) lent
// nodes, cheapest to return first. A node's room for inference is its healthy
// GPUs minus inference pods (and minus other work on reserved/training nodes;
// borrowed work on a shared node is evicted when the node returns). Return cost
// of a lent node = lost GPU-seconds of the borrowed work it would stop: 0 for
// an elastic job that can shrink off the node (above its min_pods), else
// what stopping the victim with `grace` to leave loses (core/model/
// lost_work.h: its save, if it saves on request, else its GPUs x time since
// its last checkpoint); a victim already stopped by an earlier pick costs
// nothing again. The cost is shared over the lent nodes
// the return empties (stopping a gang frees all its nodes), counting only as
// many as the GPUs still to place can fill. Lowest cost wins, then fewest
// borrowed GPUs on the node (an empty node before one whose elastic work must
// shrink), then the lower node id. Every other healthy shared node is lent.
// Failed or cordoned nodes are not lent. A node in `held` (inference needed
// it within the policy's relend_delay) is not lent anew either, though the
// packing may still give it to inference: hysteresis, so that demand that
// flickers does not lend a node and take it back within the minute.
#ifndef TIDAL_CORE_COLOCATION_LOAN_PLANNER_H_
#define TIDAL_CORE_COLOCATION_LOAN_PLANNER_H_

#include <map>
#include <vector>

#include "core/common/ids.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"
#include "core/model/workload.h"

namespace tidal {

// Room an inference service needs: `replicas` pods of `gpus_per_pod`, in
// total (running ones included).
struct InferenceDemand {
  WorkloadId service;
  int gpus_per_pod = 1;
  int replicas = 0;
  PlacementConstraints constraints;
};

struct LoanPlan {
  std::vector<bool> lent_nodes;    // indexed by NodeId, sized to the cluster
  std::vector<NodeId> returned;    // lent before, not now; ascending
  std::vector<NodeId> newly_lent;  // ascending
  // Shared nodes that neither inference needs nor are lent, only because
  // they are held (see above); ascending.
  std::vector<NodeId> held;
  // For each returned node, the service whose replica claimed it (invalid if
  // none, e.g. when switching to static).
  std::map<NodeId, WorkloadId> claimed_by;
  int shared_nodes = 0;
  int lent_count = 0;
  int unplaced_replicas = 0;  // demand that fits nowhere
};

// True if `node` passes the workload's GPU-model, selector and taint rules:
// placement::MatchesConstraints, the engine's own check.
bool InferenceMayUseNode(const PlacementConstraints& constraints, const Node& node);

// GPUs of `node` that have not failed: what inference could use there.
int HealthyGpus(const Node& node);

// Lost GPU-seconds of returning lent `node` now, its victims given `grace`
// (see above).
double ReturnCost(const Snapshot& snapshot, NodeId node, Duration grace);

// `previously_lent` and `held` are indexed by NodeId (shorter = the rest
// false); `grace` is what a return's victims get to leave.
LoanPlan PlanLoans(ColocationMode mode, const Snapshot& snapshot, Duration grace,
                   const std::vector<bool>& previously_lent,
                   const std::vector<InferenceDemand>& demand,
                   const std::vector<bool>& held = {});

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_LOAN_PLANNER_H_
