// The one owner of the state's timers. Each applied edit may arm a timer:
//  - a notice (NoticeEdit) arms its grace deadline: a victim still holding
//    GPUs then is gone (the agent SIGKILLs it), so it is requeued, or
//    released as cancelled when the notice said it stops for good;
//  - a shrink (ShrinkEdit) arms its leaving deadline: leaving pods still
//    listed then exit (PodExitEdit);
//  - a debug session placed (PlaceEdit) arms its max runtime: one grace
//    period before it, the session gets notice (cause kMaxRuntime, no
//    requeue) so it ends exactly at its max runtime. A max runtime of 0 means
//    unlimited, as it does to the engine;
//  - a lease (LeaseEdit) arms its expiry: a node whose lease ran out with no
//    newer one is lost (NodeHealth not ready), and its work with it: each
//    workload on it is requeued (released as cancelled when its notice said
//    it stops for good), except that pods a shrink was removing just exit;
//  - an idle report (IdleEdit) arms a debug session's reclaim: still idle
//    then, it gets notice (cause kIdle, no requeue, the default grace);
//  - a GPU fault (GpuFaultEdit) arms its node's drain at once: at the next
//    tick, while the node is still cordoned, each workload with a pod there
//    leaves it, with the default grace: one that can run on without its
//    pods there (a service's other replicas, an elastic job still at or
//    above its minimum) loses only those (ShrinkEdit) and grows back
//    elsewhere; any other gets notice (cause kDrain, requeued) and restarts
//    elsewhere whole. Pods a shrink is removing already are left to leave;
//    a workload already terminating keeps its notice. The whole
//    node drains, not only the faulty GPUs: an Xid or an uncorrectable ECC
//    error is often the board's or the NVLink domain's, and a gang on the
//    node's healthy GPUs would stall on its broken peer anyway;
//  - a scale-up (each opened by a SetTargetEdit, State::scale_up) arms its
//    timeout at requested_at + scale_up_timeout: not ready by then, it ends
//    kTimedOut; and the edit that makes its replicas ready (a ReplicaReady,
//    or a target lowered to what is ready) arms it at once, so the next tick
//    ends it kReady (or kTimedOut, had it become ready only past the
//    timeout, with no tick in between). Either way ScaleUpEndEdit carries
//    the scale-up and the instant it was ready, so time to capacity is exact
//    whatever the tick rate, and the server and the simulator read the one
//    judgment (docs/colocation.md, "Scale-up success").
// The deadlines of the last two come with their edits (the server computes
// them from its lease and idle limit), so a replay of its journal needs no
// server config to fire them at the same instants.
// Tick(now) pops every due timer, checks it against the state (a victim that
// already exited, or a session that was preempted and placed again, leaves a
// stale timer that is dropped), and returns the edits to apply. Timers live
// in a min-heap, so a tick costs O(due timers x log n), never a scan of every
// allocation.
//
// `exit_report_slack` is how long after a deadline an exit report is still
// awaited before the lifecycle declares the pod gone: the server waits for
// the agent's report (1 s); the simulator's pods exit exactly on time (0).
#ifndef TIDAL_CORE_STATE_LIFECYCLE_H_
#define TIDAL_CORE_STATE_LIFECYCLE_H_

#include <cstdint>
#include <queue>
#include <vector>

#include "core/model/policy.h"
#include "core/state/edit.h"
#include "core/state/state.h"

namespace tidal::state {

struct LifecycleOptions {
  Duration default_grace = seconds(30);
  Duration exit_report_slack = Duration(0);
  // policy.colocation.scale_up_timeout: how long a scale-up may take.
  Duration scale_up_timeout = minutes(10);
};

// How long the server awaits an agent's exit report after a deadline.
inline constexpr Duration kServerExitReportSlack = seconds(1);
// The options the server's StateMachine runs with: the policy's default
// grace, its scale-up timeout and kServerExitReportSlack. `tidal sim replay` builds its machine
// with the same call, so a replay cannot drift from the server it replays.
LifecycleOptions ServerLifecycleOptions(const PolicyConfig& policy);

class Lifecycle {
 public:
  explicit Lifecycle(LifecycleOptions options) : options_(options) {}

  // Arms the timers of everything `state` already holds (a state built
  // from a snapshot or recovered from a journal's snapshot).
  void ArmExisting(const State& state);
  // Arms the timers `edit` implies; call after it applied to `state`.
  void Observe(const Edit& edit, const State& state);
  // The edits of every timer due at or before `now`, in deadline order.
  std::vector<Edit> Tick(const State& state, Time now);
  // The earliest armed timer (possibly stale); kInfiniteFuture when none.
  Time next_deadline() const { return timers_.empty() ? kInfiniteFuture : timers_.top().at; }

 private:
  enum class TimerKind : uint8_t { kGrace, kLeaving, kMaxRuntime, kLease, kIdle, kScaleUp, kDrain };
  struct Timer {
    Time at;
    uint64_t seq = 0;  // arming order: equal deadlines fire in that order
    TimerKind kind = TimerKind::kGrace;
    WorkloadId workload;  // kLease: none
    Time armed_for;  // the deadline, the allocation's start or the scale-up's request it belongs to
    NodeId node;     // kLease and kDrain only
    bool operator>(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void Arm(Time at, TimerKind kind, WorkloadId w, Time armed_for, NodeId node = NodeId());
  void ArmMaxRuntime(const Workload& w, const Allocation& a);
  void ArmLease(NodeId n, Time until);
  void ArmIdle(const Workload& w, Time reclaim_at);
  // A pending scale-up's timeout, and, once its replicas are ready, now.
  void ArmScaleUp(const PendingScaleUp& su, Time now);
  // The edits of a lost node: it is not ready, and its work is gone.
  void NodeLost(const State& state, NodeId n, std::vector<Edit>& out) const;
  // The notices that drain a faulty node.
  void Drain(const State& state, NodeId n, Time now, std::vector<Edit>& out) const;

  LifecycleOptions options_;
  uint64_t next_seq_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
};

// The cluster as a control plane holds it before any agent registers: every
// node not ready (Health::kNotReady), so nothing is placed where no agent
// would start it. A registration makes a node ready (RegisterNodeEdit). The
// server starts from this, and so does a replay of its journal.
Cluster ClusterAwaitingAgents(Cluster cluster);

// The state a control plane restarts with, from what it kept: `kept`'s
// workloads and allocations in workload-id order (the order its store gives
// them back), and each node as a restart brings it back: one whose agent had
// registered is ready (degraded with failed GPUs), whatever its health was,
// and any other is not ready. No leases: the server gives each registered
// node a fresh one (LeaseEdit) right after, journaled after its
// server_start, so a replay restarts with the same leases. The server recovers
// through it, and a replay of the server's journal through it at the
// server's restart (protocol::ServerStart), so the two cannot drift.
// `registered` is indexed by NodeId (shorter = the rest not registered).
// `open_scale_ups` are the scale-ups open when the server stopped: each of a
// workload still running stays open, with its request time (so its timeout
// stands), but not ready: a restarted state holds no ready replicas, and the
// ones the server re-reports after it make it ready again (at the restart),
// or it times out.
StatusOr<State> RestartedState(Snapshot kept, const std::vector<bool>& registered,
                               std::vector<PendingScaleUp> open_scale_ups);

}  // namespace tidal::state

#endif  // TIDAL_CORE_STATE_LIFECYCLE_H_
