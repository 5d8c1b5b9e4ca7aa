// The closed set of typed edits to the committed state (core/state/state.h),
// in the spirit of LevelDB's VersionEdit. Everything that changes what the
// engine sees is one of these: a submit, an engine decision turned into an
// edit by the DecisionApplier, a timer fired by the Lifecycle, or a report
// from the world (an agent in production, the simulated workload in the
// simulator). The server journals them; the simulator applies the same ones;
// a replay of a journal rebuilds the same state.
//
// Each edit applies whole or not at all (State::Apply returns the reason).
// Edits apply at the state's clock (State::AdvanceTo), and a journal entry
// records that time with the edit; only a report of something that happened
// earlier (a checkpoint) carries its own time.
#ifndef TIDAL_CORE_STATE_EDIT_H_
#define TIDAL_CORE_STATE_EDIT_H_

#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/model/decision.h"
#include "core/model/workload.h"

namespace tidal::state {

// A new workload joins the live set: pending, or awaiting approval when its
// derived priority says so.
struct SubmitEdit {
  Workload workload;
};

// An admin approved a top-tier workload: awaiting approval -> pending.
struct ApproveEdit {
  WorkloadId workload;
};

// A re-derived priority. A pending workload whose new priority awaits
// approval moves to kAwaitingApproval, and back once it no longer does.
struct SetPriorityEdit {
  WorkloadId workload;
  Priority priority;
};

// The autoscaler's replica target for an inference service, or an owner's
// resize of an elastic job (which may move its bounds too). A demand (pods
// less spares) that rises above the current one of a running inference
// service opens a scale-up (State::scale_up), or raises the open one's goal.
struct SetTargetEdit {
  WorkloadId workload;
  int pods = 0;
  int min_pods = 0;  // 0 = unchanged
  int max_pods = 0;  // 0 = unchanged
  int spare_pods = 0;  // of pods, spares (Workload::spare_pods)
};

// A pending workload starts on these pods, all at once (a gang is never
// partial). Every GPU must exist, be healthy and be free, and no two pods may
// share one.
struct PlaceEdit {
  WorkloadId workload;
  std::vector<PodPlacement> pods;
  bool borrowed = false;
};

// A running workload gains pods (an elastic job grows, a service scales up).
struct GrowEdit {
  WorkloadId workload;
  std::vector<PodPlacement> pods;
};

// A running workload is told to stop: it keeps its GPUs, terminating, until
// it exits or its grace deadline passes. `requeue` false = it ends for good
// when it exits (a debug session at its max runtime or idle).
struct NoticeEdit {
  WorkloadId workload;
  WorkloadId preemptor;  // invalid when no workload takes its place
  PreemptCause cause = PreemptCause::kPriority;
  Time grace_deadline = kInfiniteFuture;
  double lost_gpu_seconds = 0;
  bool requeue = true;
};

// Some pods of a running workload are told to leave (an elastic shrink, a
// service scale-down): they stay listed, holding their GPUs, as
// Allocation::leaving until each exits (PodExitEdit) or the deadline passes.
struct ShrinkEdit {
  WorkloadId workload;
  std::vector<PodPlacement> pods;
  WorkloadId beneficiary;
  Time grace_deadline = kInfiniteFuture;
};

// One leaving pod exited: its GPUs are free.
struct PodExitEdit {
  WorkloadId workload;
  PodPlacement pod;
};

// A running workload saved a checkpoint at `at` (reported with the time it
// was taken; never later than the state's clock).
struct CheckpointEdit {
  WorkloadId workload;
  Time at;
};

// Why an allocation ended when the world did not report it: the lifecycle
// declared it gone. The server's run history and audit name it; an edit the
// world reported (an exit, a cancel) says kReported.
enum class EndCause : uint8_t {
  kReported,      // the world said so (an exit report, a request)
  kGraceExpired,  // its grace deadline passed (the agent SIGKILLs it)
  kNodeLost,      // its node's lease ran out (Lifecycle: NodeHealth not ready)
};

// A running or terminating workload loses its GPUs and waits again
// (a preempted victim exited, its node was lost).
struct RequeueEdit {
  WorkloadId workload;
  EndCause cause = EndCause::kReported;
};

// A workload leaves the live set for good, with its GPUs if it holds any.
// `final_state` is kSucceeded, kFailed or kCancelled.
struct ReleaseEdit {
  WorkloadId workload;
  WorkloadState final_state = WorkloadState::kSucceeded;
  EndCause cause = EndCause::kReported;
};

// A shared-pool node is lent to training, or returned to inference.
struct LendEdit {
  NodeId node;
};
struct ReturnEdit {
  NodeId node;
};

// A node's agent registered: a node new to the cluster joins it (its id is
// the next one), or a known node is described again (its hardware, labels,
// place). `zones` and `racks` are the cluster's lists after the join. A node
// whose GPUs are in use may not lose them.
struct RegisterNodeEdit {
  Node node;
  std::vector<Zone> zones;
  std::vector<Rack> racks;
};

// A node failed (kFailed), lost its agent's lease (kNotReady, made by the
// Lifecycle when the lease runs out), or came back (kHealthy, kDegraded).
struct NodeHealthEdit {
  NodeId node;
  Health health = Health::kHealthy;
};

// GPUs of a node report a fatal error. The node is cordoned (drained): no new
// work lands on it until an operator uncordons it.
struct GpuFaultEdit {
  NodeId node;
  GpuMask gpus = 0;
};

// An operator cordons or uncordons a node.
struct CordonEdit {
  NodeId node;
  bool cordoned = true;
};

// A node's agent lease runs until `until` (its last heartbeat plus the
// lease); kInfiniteFuture = it never runs out (a node without an agent
// lease: the simulator's nodes, tests). Once the clock passes `until` with no
// newer lease, the Lifecycle declares the node lost. The server does not
// apply one per heartbeat: it renews only when the lease it applied before
// falls due (ControlPlane::RenewLeases), so the journal holds about one
// renewal per node per lease, not one per heartbeat, and a replay sees every
// lease that the server's lifecycle saw.
struct LeaseEdit {
  NodeId node;
  Time until = kInfiniteFuture;
};

// A workload's GPUs went idle (its utilization fell below the idle
// threshold) at the state's clock: if it is a debug session still idle at
// `reclaim_at`, the Lifecycle reclaims it (notice, cause kIdle, no requeue).
// kInfiniteFuture = busy again. Sent on a change only, never per sample, so
// the journal grows with transitions, not with the utilization stream.
struct IdleEdit {
  WorkloadId workload;
  Time reclaim_at = kInfiniteFuture;
};

// A replica (pod) of a running workload became ready to serve, or stopped
// being ready (`ready` false). The server applies one on an agent's "ready"
// pod event, the simulator when its cold-start model says a replica is up.
// Ready replicas are what a pending scale-up waits for (State::scale_up); a
// pod that exits, or an allocation that ends, is no longer ready.
struct ReplicaReadyEdit {
  WorkloadId workload;
  PodPlacement pod;
  bool ready = true;
};

// How a scale-up ended. Typed, so the server's audit and metrics and the
// simulator's summary read one judgment instead of each making its own.
enum class ScaleUpResult : uint8_t {
  kReady,     // its replicas were all ready within policy.colocation.scale_up_timeout
  kTimedOut,  // they were not (the Lifecycle ended it at requested_at + timeout)
};

// A pending scale-up ends (made by the Lifecycle only): it carries the
// scale-up whole (the state forgets it once this applies), so whoever reads
// the journal or the sink has the figures without a second computation:
// time to capacity is ready_at - requested_at.
struct ScaleUpEndEdit {
  WorkloadId workload;
  ScaleUpResult result = ScaleUpResult::kReady;
  int from = 0;
  int to = 0;
  Time requested_at;
  Time ready_at = kInfiniteFuture;  // when `to` replicas were ready; kInfiniteFuture = not (yet)
};

using Edit = std::variant<SubmitEdit, ApproveEdit, SetPriorityEdit, SetTargetEdit, PlaceEdit,
                          GrowEdit, NoticeEdit, ShrinkEdit, PodExitEdit, CheckpointEdit,
                          RequeueEdit, ReleaseEdit, LendEdit, ReturnEdit, RegisterNodeEdit,
                          NodeHealthEdit, GpuFaultEdit, CordonEdit, LeaseEdit, IdleEdit,
                          ReplicaReadyEdit, ScaleUpEndEdit>;

// "submit", "approve", ..., as written in the journal.
std::string_view EditName(const Edit& edit);
// "reported", "grace_expired", "node_lost".
std::string_view EndCauseName(EndCause cause);
// "ready", "timed_out".
std::string_view ScaleUpResultName(ScaleUpResult result);

// Who made an edit. A replay feeds the world's edits (and the priority
// refresher's, when the policy is unchanged) back in, reruns the lifecycle,
// co-location and the engine, and compares what they make with the journal.
enum class EditOrigin : uint8_t {
  kWorld,       // a request or report: submit, approve, cancel, pod exit, node health
  kPriority,    // the priority refresher re-derived a priority
  kLifecycle,   // a timer fired (Lifecycle::Tick)
  kColocation,  // the co-location plan (targets, loans, its notices)
  kEngine,      // a scheduling decision
};
// "world", "priority", "lifecycle", "colocation", "engine".
std::string_view EditOriginName(EditOrigin origin);

// One journaled edit, the clock it applied at and who made it.
struct JournalEntry {
  Time at;
  EditOrigin origin = EditOrigin::kWorld;
  Edit edit;
};

}  // namespace tidal::state

#endif  // TIDAL_CORE_STATE_EDIT_H_
