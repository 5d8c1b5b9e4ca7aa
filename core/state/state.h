// The committed state: the cluster, the queue tree and projects, every live
// workload, every allocation, the loans, and the bookkeeping the engine reads
// (free GPUs per node, GPUs per allocation, GPUs per queue, each workload's
// digest). It changes only through State::Apply(Edit) (core/state/edit.h),
// so the server, the simulator and a replay of the server's journal change
// it the same way.
//
// The state keeps its Snapshot live: snapshot() is the engine's input as is,
// never rebuilt or copied per pass. Workloads and allocations leave their
// vectors by swap-remove, so the order is a pure function of the edits
// applied (and a replay sees the same order the original run did). Lookups
// by workload id are O(1).
//
// Checks: an edit that does not fit the current state (a stale decision: the
// workload finished meanwhile, a GPU is taken) is refused whole with
// FailedPrecondition; a malformed one (an unknown node) with InvalidArgument.
// CheckInvariants() recomputes every derived number from scratch; tests call
// it after every step.
#ifndef TIDAL_CORE_STATE_STATE_H_
#define TIDAL_CORE_STATE_STATE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/status.h"
#include "core/model/snapshot.h"
#include "core/state/edit.h"

namespace tidal::state {

// Why a terminating workload was told to stop; kept until it exits.
struct StopNotice {
  PreemptCause cause = PreemptCause::kPriority;
  WorkloadId preemptor;
  Time notice_time;
  Time grace_deadline = kInfiniteFuture;
  double lost_gpu_seconds = 0;
  bool requeue = true;
};

// An inference service's scale-up still waiting for its replicas: opened
// when its target rises while it runs (SetTargetEdit), it waits for
// min(to, current target) ready replicas (ReplicaReadyEdit). Each rise is a
// scale-up of its own, timed from its own request: a service scaled ahead
// of its load in steps is judged step by step, not charged from the first
// step's request for the last step's goal. (Two rises in one instant are
// one.) The state only records when the count was reached (`ready_at`); the
// Lifecycle judges each (ScaleUpEndEdit), once, for the server and the
// simulator alike.
struct PendingScaleUp {
  WorkloadId workload;
  int from = 0;  // pods it held when the target rose
  int to = 0;    // the target it rose to
  Time requested_at;
  Time ready_at = kInfiniteFuture;  // when enough replicas were ready
};

// Told of every GPU binding as edits apply, so a caller can keep its own
// incremental figures (the simulator's GPU-hours, the server's node index)
// without rescanning allocations.
class StateObserver {
 public:
  virtual ~StateObserver() = default;
  virtual void OnPodBound(const Workload& w, const PodPlacement& pod) = 0;
  virtual void OnPodFreed(const Workload& w, const PodPlacement& pod) = 0;
};

class State {
 public:
  State(Cluster cluster, std::vector<Queue> queues, std::vector<Project> projects);
  // A state holding everything `snapshot` holds (its workloads, allocations
  // and loans), checked: for tests that start mid-story, and for a dry run
  // on a copy of the server's state. A terminating allocation's notice is
  // taken to requeue, with its cause unknown (kPriority).
  static StatusOr<State> FromSnapshot(const Snapshot& snapshot);

  // What a state holds beyond its Snapshot: each allocation's notice,
  // leaving deadline and idle reclaim time (parallel to
  // snapshot().allocations, with its ready pods), the pending scale-ups,
  // each node's lease, and each project's
  // spend as the state accrues it (the base it started from and the
  // GPU-seconds since, kept apart because base + s/3600 is not associative
  // in floating point). A journal snapshot (protocol/journal_snapshot.h)
  // keeps them, so that a state restored from it is the state it was, and a
  // replay from it decides exactly as the server did.
  struct AllocationExtras {
    bool has_stop = false;
    StopNotice stop;
    Time leaving_deadline = kInfiniteFuture;
    Time idle_reclaim_at = kInfiniteFuture;
    std::vector<PodPlacement> ready;  // its pods that are ready (ReplicaReadyEdit)
  };
  struct Extras {
    std::vector<AllocationExtras> allocations;  // parallel to snapshot().allocations
    std::vector<PendingScaleUp> scale_ups;      // by workload id, then request time
    std::vector<Time> lease_until;              // by node (LeaseEdit); may be shorter
    std::vector<double> project_base_hours;     // by project
    std::vector<double> project_gpu_s;          // by project
  };
  Extras extras() const;
  // The state `snapshot` and `extras` describe, checked like FromSnapshot:
  // Restore(s.snapshot(), s.extras()) equals `s` in everything it reads
  // (the cluster version included).
  static StatusOr<State> Restore(const Snapshot& snapshot, const Extras& extras);

  // The engine's input: always consistent with the edits applied so far.
  const Snapshot& snapshot() const { return snap_; }
  Time now() const { return snap_.now; }
  // Moves the clock; it never goes back (a wall clock that steps back is
  // held at the last time seen).
  void AdvanceTo(Time t);

  Status Apply(const Edit& edit);

  void set_observer(StateObserver* observer) { observer_ = observer; }

  const Workload* workload(WorkloadId id) const;
  const Allocation* allocation(WorkloadId id) const;
  // The notice a terminating workload got; null when it has none.
  const StopNotice* stop(WorkloadId id) const;
  // When a shrink's leaving pods must be gone; kInfiniteFuture when none.
  Time leaving_deadline(WorkloadId id) const;
  // When an idle workload is reclaimed if it stays idle (IdleEdit);
  // kInfiniteFuture when it holds no GPUs or is not idle.
  Time idle_reclaim_at(WorkloadId id) const;
  // The workload's newest open scale-up; null when none is open.
  const PendingScaleUp* scale_up(WorkloadId id) const;
  // Its open scale-up requested at `requested_at`; null when none.
  const PendingScaleUp* scale_up(WorkloadId id, Time requested_at) const;
  // Every open scale-up of the workload, oldest first.
  std::vector<PendingScaleUp> open_scale_ups(WorkloadId id) const;
  // How many of its pods are ready (ReplicaReadyEdit); 0 when it holds none.
  int ready_replicas(WorkloadId id) const;
  // Until when the node's agent lease holds (LeaseEdit); kInfiniteFuture
  // for a node no lease was given.
  Time lease_until(NodeId n) const {
    return n.value() < lease_until_.size() ? lease_until_[n.value()] : kInfiniteFuture;
  }
  // GPUs held (running or terminating) by the queue's own workloads.
  int queue_used_gpus(QueueId q) const { return queue_used_[q.value()]; }
  GpuMask used_gpus(NodeId n) const { return used_[n.value()]; }
  const std::vector<int>& queue_used_gpus() const { return queue_used_; }

  // A project's spend (Project::used_gpu_hours in the snapshot) is what it
  // had when the state was made plus the GPUs its workloads held × the time
  // they held them, as the clock advances: a pure function of the edits and
  // the clock, so the server, the simulator and a replay agree on it.
  int project_used_gpus(ProjectId p) const { return project_gpus_[p.value()]; }

  // Recomputes free GPUs, GPUs per allocation and per queue, the id indexes
  // and the state/allocation agreement from scratch; the first mismatch.
  Status CheckInvariants() const;

 private:
  struct Slot {
    int32_t workload = -1;    // index in snap_.workloads
    int32_t allocation = -1;  // index in snap_.allocations (and meta_)
  };
  struct AllocationMeta {
    StopNotice stop;
    bool has_stop = false;
    Time leaving_deadline = kInfiniteFuture;
    Time idle_reclaim_at = kInfiniteFuture;
    std::vector<PodPlacement> ready;
  };

  Status ApplyEdit(const SubmitEdit& e);
  Status ApplyEdit(const ApproveEdit& e);
  Status ApplyEdit(const SetPriorityEdit& e);
  Status ApplyEdit(const SetTargetEdit& e);
  Status ApplyEdit(const PlaceEdit& e);
  Status ApplyEdit(const GrowEdit& e);
  Status ApplyEdit(const NoticeEdit& e);
  Status ApplyEdit(const ShrinkEdit& e);
  Status ApplyEdit(const PodExitEdit& e);
  Status ApplyEdit(const CheckpointEdit& e);
  Status ApplyEdit(const RequeueEdit& e);
  Status ApplyEdit(const ReleaseEdit& e);
  Status ApplyEdit(const LendEdit& e);
  Status ApplyEdit(const ReturnEdit& e);
  Status ApplyEdit(const RegisterNodeEdit& e);
  Status ApplyEdit(const NodeHealthEdit& e);
  Status ApplyEdit(const GpuFaultEdit& e);
  Status ApplyEdit(const CordonEdit& e);
  Status ApplyEdit(const LeaseEdit& e);
  Status ApplyEdit(const IdleEdit& e);
  Status ApplyEdit(const ReplicaReadyEdit& e);
  Status ApplyEdit(const ScaleUpEndEdit& e);
  // Records when the workload's pending scale-up has its replicas ready.
  void CheckScaleUpReady(WorkloadId id);

  const Slot* SlotOf(WorkloadId id) const;
  Slot& MutableSlot(WorkloadId id);
  void EraseSlot(WorkloadId id);
  // The live workload and its index, or an error naming the edit.
  StatusOr<int> LiveIndex(WorkloadId id, std::string_view edit) const;
  StatusOr<int> AllocationIndex(WorkloadId id, std::string_view edit) const;
  // Every pod names a GPU that exists, is free, and is not named twice in
  // `pods`; and, if `require_usable`, is healthy on a node that takes work.
  Status CheckFree(const std::vector<PodPlacement>& pods, bool require_usable = true) const;
  Status CheckNode(NodeId n) const;
  void Bind(const Workload& w, int alloc, const PodPlacement& pod);
  void Unbind(const Workload& w, int alloc, const PodPlacement& pod);
  // Frees every pod and swap-removes the allocation.
  void FreeAllocation(const Workload& w, int alloc);
  // Brings workload i's digest (Snapshot::workload_digests) up to date.
  void SyncDigest(int i);
  void RefreshFree(NodeId n);

  Snapshot snap_;
  std::vector<AllocationMeta> meta_;  // parallel to snap_.allocations
  std::vector<GpuMask> used_;         // by node
  std::vector<Time> lease_until_;     // by node; grows on demand (kInfiniteFuture = none)
  // By (workload id, request time): extras() lists them in that order, and
  // a workload's are adjacent. Few are open at a time.
  using ScaleUpKey = std::pair<uint64_t, Time>;
  std::map<ScaleUpKey, PendingScaleUp> scale_ups_;
  // The range of the workload's open scale-ups.
  std::map<ScaleUpKey, PendingScaleUp>::iterator ScaleUpsBegin(WorkloadId id);
  std::map<ScaleUpKey, PendingScaleUp>::const_iterator ScaleUpsBegin(WorkloadId id) const;
  std::vector<int> queue_used_;       // by queue
  std::vector<int> project_gpus_;     // GPUs held, by project
  std::vector<double> project_gpu_s_;       // GPU-seconds held since the state was made, by project
  std::vector<double> project_base_hours_;  // used_gpu_hours when the state was made, by project
  // Dense ids (both callers number workloads in submit order) index a flat
  // vector; ids past it fall back to a hash map.
  std::vector<Slot> dense_;
  std::unordered_map<uint64_t, Slot> sparse_;
  StateObserver* observer_ = nullptr;
};

}  // namespace tidal::state

#endif  // TIDAL_CORE_STATE_STATE_H_
