// Which node classes a workload may use, and in what order of preference.
//
// Each class passes four checks in order; a class that fails stops at the
// first one, and the furthest check any class reached names the reason when
// no class passes:
//   1. pool: inference-reserved takes inference only; training pools take
//      anything but inference; dedicated pools take only their owner queue
//      (or its descendants); shared and semi-dedicated pools take anyone. A
//      queue's `pools` list, when set, further restricts.
//   2. constraints: required GPU model, node selector (every label must
//      match) and taints (every node taint needs a toleration with its key and
//      an empty or equal value).
//   3. loan: a shared-pool node takes non-inference work only while lent.
//   4. health: failed or cordoned nodes take nothing.
// Passing classes get a rank; placement tries the lowest ranks first:
//   rank = 8 * degraded + 4 * borrowed pool + 2 * not its own pool
//          + 1 * not a preferred GPU model,
// where "borrowed pool" is another owner's semi-dedicated pool or a lent
// shared node, and "not its own pool" applies when the queue owns a
// (semi-)dedicated pool and this is another one. So work lands on its own
// capacity before common capacity, and on both before borrowing.
#ifndef TIDAL_CORE_PLACEMENT_ELIGIBILITY_H_
#define TIDAL_CORE_PLACEMENT_ELIGIBILITY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/model/policy.h"
#include "core/model/snapshot.h"
#include "core/model/workload_digest.h"
#include "core/placement/cluster_state.h"

namespace tidal::placement {

// Ordered: a class's verdict is the first check it fails, or kOk.
enum class ClassVerdict : uint8_t { kPool, kConstraints, kLoan, kHealth, kOk };

struct Eligibility {
  int key_id = 0;                     // dense id of the cache entry
  std::vector<ClassVerdict> verdict;  // per class
  std::vector<uint8_t> rank;          // per class; meaningful for kOk
  std::vector<uint8_t> ranks;         // distinct ranks of kOk classes, ascending
  std::vector<uint8_t> borrowed_pool; // per class: placing here is borrowing
  bool any_ok = false;
  ClassVerdict furthest = ClassVerdict::kPool;
  int nodes_failing_health = 0;  // nodes that pass 1-3 but are failed/cordoned

  // Capacity of nodes passing checks 1 and 2, whatever their use, health or
  // loan: a workload bigger than these can never run.
  int static_gpus = 0;
  int static_max_node_gpus = 0;
  int static_max_domain_gpus = 0;
  int static_max_rack_gpus = 0;
  int static_max_zone_gpus = 0;

  bool ok(int c) const { return verdict[c] == ClassVerdict::kOk; }
};

// Check 2: the node's GPU model is one of the required ones (if any), every
// node_selector label matches, and every node taint has a toleration with its
// key and an empty or equal value. The co-location loan planner applies the
// same rule to inference replicas.
bool MatchesConstraints(const Node& node, const PlacementConstraints& constraints);
// Whether `tolerations` let a pod onto a node with `taint`.
bool Tolerates(const std::vector<Taint>& tolerations, const Taint& taint);

// Whether queue q is `ancestor` or lies below it (bounded against cycles).
bool QueueWithin(const std::vector<Queue>& queues, QueueId q, QueueId ancestor);

class EligibilityIndex {
 public:
  // All must outlive the index. `templates` (may be null) carries the
  // policy's require_checkpoint_to_borrow rule for the shared pool.
  EligibilityIndex(const Snapshot& snapshot, const engine::ClusterState& state,
                   const std::vector<PriorityTemplate>* templates = nullptr);
  EligibilityIndex(Snapshot&&, const engine::ClusterState&,
                   const std::vector<PriorityTemplate>* = nullptr) = delete;

  // Cached by (inference or not, queue, constraints, may borrow the shared
  // pool): the many workloads of one shape share one entry. The reference
  // stays valid as long as the index.
  const Eligibility& For(const Workload& w);
  // The same, reading `w`'s digest `d` where it can: over a backlog
  // thousands deep, the record is read only for work with constraints, or
  // whose template lookup matters (WorkloadDigest::
  // preemptible_without_checkpoint).
  // Inline for work that is plain and not preemptible without checkpoints
  // whose entry is made: an explained pass asks this of every waiting
  // workload.
  const Eligibility& For(const Workload& w, const WorkloadDigest& d) {
    if (d.plain_constraints && !d.preemptible_without_checkpoint && d.queue.valid()) {
      const size_t slot = PlainSlot(d.queue.value(), d.kind == WorkloadKind::kInference, true);
      if (slot < plain_by_queue_.size() && plain_by_queue_[slot] >= 0) return *entries_[plain_by_queue_[slot]];
    }
    return ForDigest(w, d);
  }
  int size() const { return static_cast<int>(entries_.size()); }

 private:
  Eligibility Compute(const Workload& w, int key_id, bool may_borrow_shared) const;
  // For(w, d) once its inline part found no entry.
  const Eligibility& ForDigest(const Workload& w, const WorkloadDigest& d);
  // The index in plain_by_queue_ of plain work of known queue `q`.
  static size_t PlainSlot(uint32_t q, bool inference, bool may_borrow_shared) {
    return 4 * size_t{q} + 2 * size_t{inference} + size_t{may_borrow_shared};
  }
  // The entry of plain work (no constraints): `w` is read only to make it.
  const Eligibility& Plain(const Workload& w, bool inference, QueueId queue, bool may_borrow_shared);
  bool MayBorrowSharedPool(const Workload& w) const;

  const Snapshot& snapshot_;
  const engine::ClusterState& state_;
  const std::vector<PriorityTemplate>* templates_;
  std::map<std::string, int> ids_;
  // The same for work with no constraints (most): (inference, queue, may
  // borrow the shared pool), no string to build.
  // By queue (a known one), inference and may-borrow (4 per queue), or -1;
  // plain_ids_ for an unknown queue.
  std::vector<int> plain_by_queue_;
  std::map<std::tuple<bool, uint32_t, bool>, int> plain_ids_;
  std::vector<std::unique_ptr<Eligibility>> entries_;
  std::string key_;  // reused buffer
};

}  // namespace tidal::placement

#endif  // TIDAL_CORE_PLACEMENT_ELIGIBILITY_H_
