#include "core/state/state.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>

#include "core/common/check.h"

namespace tidal::state {
namespace {

// Ids below this index a flat vector (4 MiB of slots per million ids).
constexpr uint64_t kDenseIdLimit = uint64_t{1} << 25;

std::string Id(WorkloadId id) { return std::to_string(id.value()); }

bool Contains(const std::vector<PodPlacement>& pods, const PodPlacement& p) {
  return std::find(pods.begin(), pods.end(), p) != pods.end();
}

bool Terminal(WorkloadState s) {
  return s == WorkloadState::kSucceeded || s == WorkloadState::kFailed ||
         s == WorkloadState::kCancelled;
}

}  // namespace

std::string_view EditName(const Edit& edit) {
  static constexpr std::string_view kNames[] = {
      "submit", "approve", "set_priority", "set_target", "place",   "grow",
      "notice", "shrink",  "pod_exit",     "checkpoint", "requeue", "release",
      "lend",   "return",  "register_node", "node_health", "gpu_fault", "cordon",
      "lease",  "idle", "replica_ready", "scale_up_end"};
  static_assert(std::size(kNames) == std::variant_size_v<Edit>);
  return kNames[edit.index()];
}

std::string_view EndCauseName(EndCause cause) {
  switch (cause) {
    case EndCause::kReported: return "reported";
    case EndCause::kGraceExpired: return "grace_expired";
    case EndCause::kNodeLost: return "node_lost";
  }
  return "reported";
}

std::string_view ScaleUpResultName(ScaleUpResult result) {
  switch (result) {
    case ScaleUpResult::kReady: return "ready";
    case ScaleUpResult::kTimedOut: return "timed_out";
  }
  return "ready";
}

std::string_view EditOriginName(EditOrigin origin) {
  switch (origin) {
    case EditOrigin::kWorld: return "world";
    case EditOrigin::kPriority: return "priority";
    case EditOrigin::kLifecycle: return "lifecycle";
    case EditOrigin::kColocation: return "colocation";
    case EditOrigin::kEngine: return "engine";
  }
  return "world";
}

State::State(Cluster cluster, std::vector<Queue> queues, std::vector<Project> projects) {
  snap_.cluster = std::move(cluster);
  snap_.queues = std::move(queues);
  snap_.projects = std::move(projects);
  snap_.cluster_version = 1;
  snap_.waiting_order.MarkKept();
  const size_t nodes = snap_.cluster.nodes.size();
  used_.assign(nodes, 0);
  snap_.lent_nodes.assign(nodes, false);
  snap_.free_gpus.resize(nodes);
  for (size_t n = 0; n < nodes; ++n) RefreshFree(NodeId(static_cast<uint32_t>(n)));
  queue_used_.assign(snap_.queues.size(), 0);
  project_gpus_.assign(snap_.projects.size(), 0);
  project_gpu_s_.assign(snap_.projects.size(), 0);
  for (const Project& p : snap_.projects) project_base_hours_.push_back(p.used_gpu_hours);
}

StatusOr<State> State::FromSnapshot(const Snapshot& snapshot) {
  State s(snapshot.cluster, snapshot.queues, snapshot.projects);
  s.snap_.now = snapshot.now;
  for (size_t n = 0; n < snapshot.lent_nodes.size() && n < s.snap_.lent_nodes.size(); ++n) {
    s.snap_.lent_nodes[n] = snapshot.lent_nodes[n];
  }
  for (const Workload& w : snapshot.workloads) {
    Workload pending = w;
    const WorkloadState held = w.state;
    if (held == WorkloadState::kRunning || held == WorkloadState::kTerminating) {
      pending.state = WorkloadState::kPending;
    }
    TIDAL_RETURN_IF_ERROR(s.ApplyEdit(SubmitEdit{std::move(pending)}));
    s.snap_.workloads.back().state = held;
    s.SyncDigest(static_cast<int>(s.snap_.workloads.size()) - 1);
  }
  for (const Allocation& a : snapshot.allocations) {
    const Slot* slot = s.SlotOf(a.workload);
    if (slot == nullptr || slot->workload < 0) {
      return InvalidArgument("allocation of workload " + Id(a.workload) + ", which is not in the snapshot");
    }
    if (slot->allocation >= 0) return InvalidArgument("workload " + Id(a.workload) + " has two allocations");
    if (a.pods.empty()) return InvalidArgument("workload " + Id(a.workload) + " has an empty allocation");
    TIDAL_RETURN_IF_ERROR(s.CheckFree(a.pods, /*require_usable=*/false).WithContext("allocation of workload " + Id(a.workload) + ": "));
    const int alloc = static_cast<int>(s.snap_.allocations.size());
    s.snap_.allocations.push_back(a);
    s.snap_.allocation_gpus.push_back(0);
    s.snap_.allocation_workloads.push_back(static_cast<uint32_t>(slot->workload));
    AllocationMeta meta;
    if (a.terminating) {
      meta.has_stop = true;
      meta.stop.notice_time = snapshot.now;
      meta.stop.grace_deadline = a.grace_deadline;
    }
    s.meta_.push_back(meta);
    s.MutableSlot(a.workload).allocation = alloc;
    s.SyncDigest(slot->workload);
    const Workload& w = s.snap_.workloads[slot->workload];
    for (const PodPlacement& p : a.pods) s.Bind(w, alloc, p);
  }
  TIDAL_RETURN_IF_ERROR(s.CheckInvariants());
  return s;
}

State::Extras State::extras() const {
  Extras e;
  e.allocations.reserve(meta_.size());
  for (const AllocationMeta& m : meta_) {
    e.allocations.push_back({m.has_stop, m.stop, m.leaving_deadline, m.idle_reclaim_at, m.ready});
  }
  for (const auto& entry : scale_ups_) e.scale_ups.push_back(entry.second);
  e.lease_until = lease_until_;
  e.project_base_hours = project_base_hours_;
  e.project_gpu_s = project_gpu_s_;
  return e;
}

StatusOr<State> State::Restore(const Snapshot& snapshot, const Extras& extras) {
  if (extras.allocations.size() != snapshot.allocations.size()) {
    return InvalidArgument("restore: " + std::to_string(extras.allocations.size()) + " allocation extras for " +
                           std::to_string(snapshot.allocations.size()) + " allocations");
  }
  if (extras.project_base_hours.size() != snapshot.projects.size() ||
      extras.project_gpu_s.size() != snapshot.projects.size()) {
    return InvalidArgument("restore: project spend for " + std::to_string(extras.project_gpu_s.size()) +
                           " projects, the state has " + std::to_string(snapshot.projects.size()));
  }
  TIDAL_ASSIGN_OR_RETURN(State s, FromSnapshot(snapshot));
  for (size_t i = 0; i < extras.allocations.size(); ++i) {
    const AllocationExtras& x = extras.allocations[i];
    if (x.has_stop != s.snap_.allocations[i].terminating) {
      return InvalidArgument("restore: allocation of workload " + Id(s.snap_.allocations[i].workload) +
                             (x.has_stop ? " has a notice but is not terminating" : " is terminating without a notice"));
    }
    for (const PodPlacement& p : x.ready) {
      if (!Contains(s.snap_.allocations[i].pods, p) || std::count(x.ready.begin(), x.ready.end(), p) != 1) {
        return InvalidArgument("restore: allocation of workload " + Id(s.snap_.allocations[i].workload) +
                               " lists a ready pod it does not hold, or one twice");
      }
    }
    s.meta_[i] = AllocationMeta{x.stop, x.has_stop, x.leaving_deadline, x.idle_reclaim_at, x.ready};
  }
  for (const PendingScaleUp& su : extras.scale_ups) {
    const ScaleUpKey key{su.workload.value(), su.requested_at};
    if (s.workload(su.workload) == nullptr || s.scale_ups_.count(key) != 0) {
      return InvalidArgument("restore: a scale-up of workload " + Id(su.workload) +
                             " that is not live, or listed twice");
    }
    s.scale_ups_[key] = su;
  }
  if (extras.lease_until.size() > snapshot.cluster.nodes.size()) {
    return InvalidArgument("restore: leases for " + std::to_string(extras.lease_until.size()) + " nodes, the state has " +
                           std::to_string(snapshot.cluster.nodes.size()));
  }
  s.lease_until_ = extras.lease_until;
  s.project_base_hours_ = extras.project_base_hours;
  s.project_gpu_s_ = extras.project_gpu_s;
  s.snap_.cluster_version = snapshot.cluster_version;
  return s;
}

void State::AdvanceTo(Time t) {
  if (t <= snap_.now) return;
  // Spend accrues with the clock: GPUs held × time, per project.
  const double dt_s = std::chrono::duration<double>(t - snap_.now).count();
  for (size_t p = 0; p < project_gpus_.size(); ++p) {
    if (project_gpus_[p] == 0) continue;
    project_gpu_s_[p] += dt_s * project_gpus_[p];
    snap_.projects[p].used_gpu_hours = project_base_hours_[p] + project_gpu_s_[p] / 3600.0;
  }
  snap_.now = t;
}

Status State::Apply(const Edit& edit) {
  // Even a refused edit bumps the stamp: a stamp that moves when nothing
  // changed costs a pass, one that stays when something did costs a wrong
  // one. A checkpoint is the exception: it only prices preemption victims,
  // which a pass that finds no victim candidates never reads, and a pass
  // that finds some is never quiet (SchedulingPass::quiet_until). Running
  // jobs checkpoint every few seconds on a large cluster, so bumping for
  // them would leave no quiet pass to skip.
  if (!std::holds_alternative<CheckpointEdit>(edit)) snap_.stamp.Bump();
  return std::visit([this](const auto& e) { return ApplyEdit(e); }, edit);
}

// ---------------------------------------------------------------------------
// Lookups

const State::Slot* State::SlotOf(WorkloadId id) const {
  const uint64_t v = id.value();
  if (v < kDenseIdLimit) return v < dense_.size() ? &dense_[v] : nullptr;
  auto it = sparse_.find(v);
  return it == sparse_.end() ? nullptr : &it->second;
}

State::Slot& State::MutableSlot(WorkloadId id) {
  const uint64_t v = id.value();
  if (v < kDenseIdLimit) {
    if (v >= dense_.size()) dense_.resize(std::max<size_t>(v + 1, dense_.size() * 2));
    return dense_[v];
  }
  return sparse_[v];
}

void State::EraseSlot(WorkloadId id) {
  const uint64_t v = id.value();
  if (v < kDenseIdLimit) {
    dense_[v] = Slot();
  } else {
    sparse_.erase(v);
  }
}

const Workload* State::workload(WorkloadId id) const {
  const Slot* s = SlotOf(id);
  return s == nullptr || s->workload < 0 ? nullptr : &snap_.workloads[s->workload];
}

const Allocation* State::allocation(WorkloadId id) const {
  const Slot* s = SlotOf(id);
  return s == nullptr || s->allocation < 0 ? nullptr : &snap_.allocations[s->allocation];
}

const StopNotice* State::stop(WorkloadId id) const {
  const Slot* s = SlotOf(id);
  if (s == nullptr || s->allocation < 0 || !meta_[s->allocation].has_stop) return nullptr;
  return &meta_[s->allocation].stop;
}

Time State::leaving_deadline(WorkloadId id) const {
  const Slot* s = SlotOf(id);
  return s == nullptr || s->allocation < 0 ? kInfiniteFuture : meta_[s->allocation].leaving_deadline;
}

Time State::idle_reclaim_at(WorkloadId id) const {
  const Slot* s = SlotOf(id);
  return s == nullptr || s->allocation < 0 ? kInfiniteFuture : meta_[s->allocation].idle_reclaim_at;
}

std::map<State::ScaleUpKey, PendingScaleUp>::iterator State::ScaleUpsBegin(WorkloadId id) {
  return scale_ups_.lower_bound({id.value(), Time::min()});
}

std::map<State::ScaleUpKey, PendingScaleUp>::const_iterator State::ScaleUpsBegin(WorkloadId id) const {
  return scale_ups_.lower_bound({id.value(), Time::min()});
}

const PendingScaleUp* State::scale_up(WorkloadId id) const {
  // The entry before the next workload's first is this one's newest.
  auto past = scale_ups_.lower_bound({id.value() + 1, Time::min()});
  if (past == scale_ups_.begin()) return nullptr;
  --past;
  return past->first.first == id.value() ? &past->second : nullptr;
}

const PendingScaleUp* State::scale_up(WorkloadId id, Time requested_at) const {
  auto it = scale_ups_.find({id.value(), requested_at});
  return it == scale_ups_.end() ? nullptr : &it->second;
}

std::vector<PendingScaleUp> State::open_scale_ups(WorkloadId id) const {
  std::vector<PendingScaleUp> out;
  for (auto it = ScaleUpsBegin(id); it != scale_ups_.end() && it->first.first == id.value(); ++it) {
    out.push_back(it->second);
  }
  return out;
}

int State::ready_replicas(WorkloadId id) const {
  const Slot* s = SlotOf(id);
  return s == nullptr || s->allocation < 0 ? 0 : static_cast<int>(meta_[s->allocation].ready.size());
}

StatusOr<int> State::LiveIndex(WorkloadId id, std::string_view edit) const {
  const Slot* s = SlotOf(id);
  if (s == nullptr || s->workload < 0) {
    return FailedPrecondition(std::string(edit) + ": workload " + Id(id) + " is not live");
  }
  return s->workload;
}

StatusOr<int> State::AllocationIndex(WorkloadId id, std::string_view edit) const {
  const Slot* s = SlotOf(id);
  if (s == nullptr || s->allocation < 0) {
    return FailedPrecondition(std::string(edit) + ": workload " + Id(id) + " holds no GPUs");
  }
  return s->allocation;
}

Status State::CheckNode(NodeId n) const {
  if (!n.valid() || n.value() >= snap_.cluster.nodes.size()) {
    return InvalidArgument("node " + std::to_string(n.value()) + " does not exist");
  }
  return Status::Ok();
}

Status State::CheckFree(const std::vector<PodPlacement>& pods, bool require_usable) const {
  for (size_t k = 0; k < pods.size(); ++k) {
    const PodPlacement& p = pods[k];
    TIDAL_RETURN_IF_ERROR(CheckNode(p.node));
    const Node& node = snap_.cluster.node(p.node);
    if (p.gpus == 0 || (p.gpus & ~node.all_gpus()) != 0) {
      return InvalidArgument("pod " + std::to_string(k) + ": GPUs not on node " + node.name);
    }
    if (require_usable && !node.takes_work()) {
      return FailedPrecondition("pod " + std::to_string(k) + ": node " + node.name +
                                (node.cordoned                         ? " is cordoned"
                                 : node.health == Health::kNotReady ? " is not ready"
                                                                    : " has failed"));
    }
    if (require_usable && (p.gpus & node.failed_gpus) != 0) {
      return FailedPrecondition("pod " + std::to_string(k) + ": a GPU on " + node.name + " has failed");
    }
    if ((p.gpus & used_[p.node.value()]) != 0) {
      return FailedPrecondition("pod " + std::to_string(k) + ": a GPU on " + node.name + " is taken");
    }
    for (size_t m = 0; m < k; ++m) {
      if (pods[m].node == p.node && (pods[m].gpus & p.gpus) != 0) {
        return InvalidArgument("pods " + std::to_string(m) + " and " + std::to_string(k) +
                               " share a GPU on " + node.name);
      }
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// GPU bookkeeping

void State::RefreshFree(NodeId n) {
  const Node& node = snap_.cluster.node(n);
  GpuMask& free = snap_.free_gpus[n.value()];
  const GpuMask now_free = node.all_gpus() & ~node.failed_gpus & ~used_[n.value()];
  if (free == now_free) return;
  free = now_free;
  snap_.free_gpus_log.Record(n.value(), snap_.free_gpus.size());
}

void State::Bind(const Workload& w, int alloc, const PodPlacement& pod) {
  used_[pod.node.value()] |= pod.gpus;
  RefreshFree(pod.node);
  const int g = std::popcount(pod.gpus);
  snap_.allocation_gpus[alloc] += g;
  queue_used_[w.queue.value()] += g;
  if (w.project.valid()) project_gpus_[w.project.value()] += g;
  if (observer_ != nullptr) observer_->OnPodBound(w, pod);
}

void State::Unbind(const Workload& w, int alloc, const PodPlacement& pod) {
  used_[pod.node.value()] &= ~pod.gpus;
  RefreshFree(pod.node);
  const int g = std::popcount(pod.gpus);
  snap_.allocation_gpus[alloc] -= g;
  queue_used_[w.queue.value()] -= g;
  if (w.project.valid()) project_gpus_[w.project.value()] -= g;
  if (observer_ != nullptr) observer_->OnPodFreed(w, pod);
}

void State::FreeAllocation(const Workload& w, int alloc) {
  for (const PodPlacement& p : snap_.allocations[alloc].pods) Unbind(w, alloc, p);
  const int last = static_cast<int>(snap_.allocations.size()) - 1;
  if (alloc != last) {
    snap_.allocations[alloc] = std::move(snap_.allocations[last]);
    snap_.allocation_gpus[alloc] = snap_.allocation_gpus[last];
    snap_.allocation_workloads[alloc] = snap_.allocation_workloads[last];
    meta_[alloc] = std::move(meta_[last]);
    Slot& moved = MutableSlot(snap_.allocations[alloc].workload);
    moved.allocation = alloc;
    SyncDigest(moved.workload);
  }
  snap_.allocations.pop_back();
  snap_.allocation_gpus.pop_back();
  snap_.allocation_workloads.pop_back();
  meta_.pop_back();
  Slot& freed = MutableSlot(w.id);
  freed.allocation = -1;
  SyncDigest(freed.workload);
}

void State::SyncDigest(int i) {
  const Workload& w = snap_.workloads[i];
  const int alloc = SlotOf(w.id)->allocation;
  const WorkloadDigest now = WorkloadDigest::Of(w, alloc, alloc < 0 ? nullptr : &snap_.allocations[alloc]);
  WorkloadDigest& kept = snap_.workload_digests[i];
  if (kept == now) return;
  snap_.waiting_order.Update(&kept, &now, static_cast<uint32_t>(i));
  kept = now;
}

// ---------------------------------------------------------------------------
// Edits

Status State::ApplyEdit(const SubmitEdit& e) {
  const Workload& w = e.workload;
  if (!w.id.valid()) return InvalidArgument("submit: workload id must be set");
  if (const Slot* s = SlotOf(w.id); s != nullptr && s->workload >= 0) {
    return FailedPrecondition("submit: workload " + Id(w.id) + " is already live");
  }
  if (!w.queue.valid() || w.queue.value() >= snap_.queues.size()) {
    return InvalidArgument("submit: workload " + Id(w.id) + ": unknown queue");
  }
  if (w.project.valid() && w.project.value() >= snap_.projects.size()) {
    return InvalidArgument("submit: workload " + Id(w.id) + ": unknown project");
  }
  if (w.state != WorkloadState::kPending && w.state != WorkloadState::kAwaitingApproval) {
    return InvalidArgument("submit: workload " + Id(w.id) + " must be pending or awaiting approval");
  }
  if (w.gpus_per_pod < 1 || w.gpus_per_pod > kMaxGpusPerNode || w.pods < 0 || w.min_pods < 1) {
    return InvalidArgument("submit: workload " + Id(w.id) + ": gpus_per_pod, pods or min_pods out of range");
  }
  MutableSlot(w.id).workload = static_cast<int32_t>(snap_.workloads.size());
  snap_.workloads.push_back(w);
  snap_.workload_digests.push_back(WorkloadDigest::Of(w, -1, nullptr));
  snap_.waiting_order.Update(nullptr, &snap_.workload_digests.back(),
                             static_cast<uint32_t>(snap_.workload_digests.size() - 1));
  return Status::Ok();
}

Status State::ApplyEdit(const ApproveEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int i, LiveIndex(e.workload, "approve"));
  Workload& w = snap_.workloads[i];
  if (w.state != WorkloadState::kAwaitingApproval) {
    return FailedPrecondition("approve: workload " + Id(e.workload) + " is not awaiting approval");
  }
  w.state = WorkloadState::kPending;
  w.priority.awaiting_approval = false;
  w.top_tier_approved = true;
  SyncDigest(i);
  return Status::Ok();
}

Status State::ApplyEdit(const SetPriorityEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int i, LiveIndex(e.workload, "set_priority"));
  Workload& w = snap_.workloads[i];
  w.priority = e.priority;
  if (w.state == WorkloadState::kPending && w.priority.awaiting_approval) {
    w.state = WorkloadState::kAwaitingApproval;
  } else if (w.state == WorkloadState::kAwaitingApproval && !w.priority.awaiting_approval) {
    w.state = WorkloadState::kPending;
  }
  SyncDigest(i);
  return Status::Ok();
}

Status State::ApplyEdit(const SetTargetEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int i, LiveIndex(e.workload, "set_target"));
  if (e.pods < 0 || e.min_pods < 0 || e.max_pods < 0) {
    return InvalidArgument("set_target: pods must be >= 0");
  }
  if (e.spare_pods < 0 || e.spare_pods > e.pods) {
    return InvalidArgument("set_target: spare_pods must be in 0..pods");
  }
  Workload& w = snap_.workloads[i];
  const int min_pods = e.min_pods > 0 ? e.min_pods : w.min_pods;
  const int max_pods = e.max_pods > 0 ? e.max_pods : w.max_pods;
  if (min_pods > max_pods) return InvalidArgument("set_target: min_pods above max_pods");
  const int demand_before = w.demand_pods();
  const int demand = e.pods - e.spare_pods;
  w.pods = e.pods;
  w.min_pods = min_pods;
  w.max_pods = max_pods;
  w.spare_pods = e.spare_pods;
  SyncDigest(i);
  // A running service asked for more replicas: a scale-up, timed until they
  // are ready (PendingScaleUp: each rise its own). Placing a service that
  // holds nothing is its deployment, not a scale-up. Spares are not asked
  // for: a rise of spares alone opens nothing, and a rise of demand that
  // ready spares cover is ready at once.
  if (const Allocation* a = allocation(e.workload);
      w.kind == WorkloadKind::kInference && a != nullptr && demand > demand_before) {
    auto [it, opened] = scale_ups_.try_emplace({e.workload.value(), snap_.now});
    PendingScaleUp& su = it->second;
    if (opened) {
      su = PendingScaleUp{e.workload, static_cast<int>(a->pods.size()), demand, snap_.now};
    } else {
      su.to = std::max(su.to, demand);
    }
  }
  CheckScaleUpReady(e.workload);
  return Status::Ok();
}

void State::CheckScaleUpReady(WorkloadId id) {
  const Workload* w = workload(id);
  if (w == nullptr) return;
  const int ready = ready_replicas(id);
  for (auto it = ScaleUpsBegin(id); it != scale_ups_.end() && it->first.first == id.value(); ++it) {
    PendingScaleUp& su = it->second;
    // A target lowered meanwhile lowers what counts as capacity.
    if (su.ready_at == kInfiniteFuture && ready >= std::min(su.to, w->demand_pods())) su.ready_at = snap_.now;
  }
}

Status State::ApplyEdit(const PlaceEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int i, LiveIndex(e.workload, "place"));
  const Workload& w = snap_.workloads[i];
  if (w.state != WorkloadState::kPending || SlotOf(e.workload)->allocation >= 0) {
    return FailedPrecondition("place: workload " + Id(e.workload) + " is not pending");
  }
  if (e.pods.empty()) return InvalidArgument("place: no pods");
  if (Status s = CheckFree(e.pods); !s.ok()) return s.WithContext("place: ");
  Allocation a;
  a.workload = w.id;
  a.start_time = snap_.now;
  a.last_checkpoint = snap_.now;
  a.borrowed = e.borrowed;
  a.pods.reserve(e.pods.size());
  const int alloc = static_cast<int>(snap_.allocations.size());
  snap_.allocations.push_back(std::move(a));
  snap_.allocation_gpus.push_back(0);
  snap_.allocation_workloads.push_back(static_cast<uint32_t>(i));
  meta_.emplace_back();
  MutableSlot(w.id).allocation = alloc;
  snap_.workloads[i].state = WorkloadState::kRunning;
  SyncDigest(i);
  for (const PodPlacement& p : e.pods) {
    snap_.allocations[alloc].pods.push_back(p);
    Bind(w, alloc, p);
  }
  return Status::Ok();
}

Status State::ApplyEdit(const GrowEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "grow"));
  if (snap_.allocations[alloc].terminating) {
    return FailedPrecondition("grow: workload " + Id(e.workload) + " is terminating");
  }
  if (e.pods.empty()) return InvalidArgument("grow: no pods");
  if (Status s = CheckFree(e.pods); !s.ok()) return s.WithContext("grow: ");
  const Workload& w = *workload(e.workload);
  for (const PodPlacement& p : e.pods) {
    snap_.allocations[alloc].pods.push_back(p);
    Bind(w, alloc, p);
  }
  return Status::Ok();
}

Status State::ApplyEdit(const NoticeEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "notice"));
  Allocation& a = snap_.allocations[alloc];
  if (a.terminating) {
    return FailedPrecondition("notice: workload " + Id(e.workload) + " already has notice");
  }
  a.terminating = true;
  a.grace_deadline = e.grace_deadline;
  meta_[alloc].has_stop = true;
  meta_[alloc].stop = StopNotice{e.cause, e.preemptor, snap_.now, e.grace_deadline,
                                 e.lost_gpu_seconds, e.requeue};
  const int i = SlotOf(e.workload)->workload;
  snap_.workloads[i].state = WorkloadState::kTerminating;
  SyncDigest(i);
  return Status::Ok();
}

Status State::ApplyEdit(const ShrinkEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "shrink"));
  Allocation& a = snap_.allocations[alloc];
  if (a.terminating) {
    return FailedPrecondition("shrink: workload " + Id(e.workload) + " is terminating");
  }
  if (e.pods.empty()) return InvalidArgument("shrink: no pods");
  for (const PodPlacement& p : e.pods) {
    if (!Contains(a.pods, p)) {
      return FailedPrecondition("shrink: workload " + Id(e.workload) + " has no such pod");
    }
    if (Contains(a.leaving, p)) {
      return FailedPrecondition("shrink: a pod of workload " + Id(e.workload) + " is already leaving");
    }
  }
  a.leaving.insert(a.leaving.end(), e.pods.begin(), e.pods.end());
  Time& deadline = meta_[alloc].leaving_deadline;
  deadline = deadline == kInfiniteFuture ? e.grace_deadline : std::max(deadline, e.grace_deadline);
  SyncDigest(SlotOf(e.workload)->workload);
  return Status::Ok();
}

Status State::ApplyEdit(const PodExitEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "pod_exit"));
  Allocation& a = snap_.allocations[alloc];
  auto pos = std::find(a.pods.begin(), a.pods.end(), e.pod);
  if (pos == a.pods.end()) {
    return FailedPrecondition("pod_exit: workload " + Id(e.workload) + " has no such pod");
  }
  const Workload& w = *workload(e.workload);
  if (a.pods.size() == 1) {
    // Its last pod: the workload holds nothing and waits again.
    if (a.terminating) return FailedPrecondition("pod_exit: the last pod of a terminating workload exits by requeue or release");
    FreeAllocation(w, alloc);
    const int i = SlotOf(e.workload)->workload;
    snap_.workloads[i].state = WorkloadState::kPending;
    SyncDigest(i);
    return Status::Ok();
  }
  const PodPlacement pod = *pos;
  a.pods.erase(pos);
  if (auto gone = std::find(a.leaving.begin(), a.leaving.end(), pod); gone != a.leaving.end()) {
    a.leaving.erase(gone);
  }
  if (a.leaving.empty()) meta_[alloc].leaving_deadline = kInfiniteFuture;
  SyncDigest(SlotOf(e.workload)->workload);
  std::vector<PodPlacement>& ready = meta_[alloc].ready;
  if (auto r = std::find(ready.begin(), ready.end(), pod); r != ready.end()) ready.erase(r);
  Unbind(w, alloc, pod);
  return Status::Ok();
}

Status State::ApplyEdit(const CheckpointEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "checkpoint"));
  Allocation& a = snap_.allocations[alloc];
  const Time at = std::min(e.at, snap_.now);
  if (at > a.last_checkpoint) a.last_checkpoint = at;
  return Status::Ok();
}

Status State::ApplyEdit(const RequeueEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "requeue"));
  const int i = SlotOf(e.workload)->workload;
  FreeAllocation(snap_.workloads[i], alloc);
  snap_.workloads[i].state = WorkloadState::kPending;
  ++snap_.workloads[i].requeues;
  SyncDigest(i);
  return Status::Ok();
}

Status State::ApplyEdit(const ReleaseEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int i, LiveIndex(e.workload, "release"));
  if (!Terminal(e.final_state)) {
    return InvalidArgument("release: final state must be succeeded, failed or cancelled");
  }
  if (const int alloc = SlotOf(e.workload)->allocation; alloc >= 0) {
    FreeAllocation(snap_.workloads[i], alloc);
  }
  const int last = static_cast<int>(snap_.workloads.size()) - 1;
  snap_.waiting_order.Update(&snap_.workload_digests[i], nullptr, static_cast<uint32_t>(i));
  if (i != last) {
    snap_.workloads[i] = std::move(snap_.workloads[last]);
    snap_.workload_digests[i] = snap_.workload_digests[last];
    snap_.waiting_order.Move(snap_.workload_digests[i], static_cast<uint32_t>(i));
    if (const int moved = snap_.workload_digests[i].allocation; moved >= 0) {
      snap_.allocation_workloads[moved] = static_cast<uint32_t>(i);
    }
    MutableSlot(snap_.workloads[i].id).workload = i;
  }
  snap_.workloads.pop_back();
  snap_.workload_digests.pop_back();
  EraseSlot(e.workload);
  // A service that ended has no scale-up left to judge.
  scale_ups_.erase(ScaleUpsBegin(e.workload), scale_ups_.lower_bound({e.workload.value() + 1, Time::min()}));
  return Status::Ok();
}

Status State::ApplyEdit(const LendEdit& e) {
  TIDAL_RETURN_IF_ERROR(CheckNode(e.node));
  if (snap_.lent_nodes[e.node.value()]) return FailedPrecondition("lend: node is already lent");
  snap_.lent_nodes[e.node.value()] = true;
  return Status::Ok();
}

Status State::ApplyEdit(const ReturnEdit& e) {
  TIDAL_RETURN_IF_ERROR(CheckNode(e.node));
  if (!snap_.is_lent(e.node)) return FailedPrecondition("return: node is not lent");
  snap_.lent_nodes[e.node.value()] = false;
  return Status::Ok();
}

Status State::ApplyEdit(const RegisterNodeEdit& e) {
  const size_t n = e.node.id.value();
  if (!e.node.id.valid() || n > snap_.cluster.nodes.size()) {
    return InvalidArgument("register_node: node id " + std::to_string(n) + " is not the next one");
  }
  if (e.node.gpu_count <= 0 || e.node.gpu_count > kMaxGpusPerNode) {
    return InvalidArgument("register_node: gpu count out of range");
  }
  if ((e.node.zone.valid() && e.node.zone.value() >= e.zones.size()) ||
      (e.node.rack.valid() && e.node.rack.value() >= e.racks.size()) ||
      e.node.pool.value() >= snap_.cluster.pools.size()) {
    return InvalidArgument("register_node: zone, rack or pool does not exist");
  }
  if (n < snap_.cluster.nodes.size() && (used_[n] & ~e.node.all_gpus()) != 0) {
    return FailedPrecondition("register_node: node " + e.node.name + " would lose GPUs in use");
  }
  snap_.cluster.zones = e.zones;
  snap_.cluster.racks = e.racks;
  if (n == snap_.cluster.nodes.size()) {
    snap_.cluster.nodes.push_back(e.node);
    used_.push_back(0);
    snap_.lent_nodes.push_back(false);
    snap_.free_gpus.emplace_back();
  } else {
    snap_.cluster.nodes[n] = e.node;
  }
  RefreshFree(e.node.id);
  ++snap_.cluster_version;
  return Status::Ok();
}

Status State::ApplyEdit(const NodeHealthEdit& e) {
  TIDAL_RETURN_IF_ERROR(CheckNode(e.node));
  snap_.cluster.nodes[e.node.value()].health = e.health;
  ++snap_.cluster_version;
  return Status::Ok();
}

Status State::ApplyEdit(const GpuFaultEdit& e) {
  TIDAL_RETURN_IF_ERROR(CheckNode(e.node));
  Node& node = snap_.cluster.nodes[e.node.value()];
  if (e.gpus == 0 || (e.gpus & ~node.all_gpus()) != 0) {
    return InvalidArgument("gpu_fault: GPUs not on node " + node.name);
  }
  node.failed_gpus |= e.gpus;
  node.cordoned = true;
  RefreshFree(e.node);
  ++snap_.cluster_version;
  return Status::Ok();
}

Status State::ApplyEdit(const CordonEdit& e) {
  TIDAL_RETURN_IF_ERROR(CheckNode(e.node));
  snap_.cluster.nodes[e.node.value()].cordoned = e.cordoned;
  ++snap_.cluster_version;
  return Status::Ok();
}

Status State::ApplyEdit(const LeaseEdit& e) {
  TIDAL_RETURN_IF_ERROR(CheckNode(e.node));
  if (lease_until_.size() <= e.node.value()) lease_until_.resize(snap_.cluster.nodes.size(), kInfiniteFuture);
  lease_until_[e.node.value()] = e.until;
  return Status::Ok();
}

Status State::ApplyEdit(const IdleEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "idle"));
  meta_[alloc].idle_reclaim_at = e.reclaim_at;
  return Status::Ok();
}

Status State::ApplyEdit(const ReplicaReadyEdit& e) {
  TIDAL_ASSIGN_OR_RETURN(const int alloc, AllocationIndex(e.workload, "replica_ready"));
  if (!Contains(snap_.allocations[alloc].pods, e.pod)) {
    return FailedPrecondition("replica_ready: workload " + Id(e.workload) + " has no such pod");
  }
  std::vector<PodPlacement>& ready = meta_[alloc].ready;
  const auto pos = std::find(ready.begin(), ready.end(), e.pod);
  if (e.ready && pos == ready.end()) ready.push_back(e.pod);
  if (!e.ready && pos != ready.end()) ready.erase(pos);
  CheckScaleUpReady(e.workload);
  return Status::Ok();
}

Status State::ApplyEdit(const ScaleUpEndEdit& e) {
  auto it = scale_ups_.find({e.workload.value(), e.requested_at});
  if (it == scale_ups_.end()) {
    return FailedPrecondition("scale_up_end: workload " + Id(e.workload) + " has no such scale-up open");
  }
  scale_ups_.erase(it);
  return Status::Ok();
}

// ---------------------------------------------------------------------------

Status State::CheckInvariants() const {
  const size_t nodes = snap_.cluster.nodes.size();
  std::vector<GpuMask> used(nodes, 0);
  std::vector<int> queue_used(snap_.queues.size(), 0);
  std::vector<int> project_gpus(snap_.projects.size(), 0);
  if (snap_.allocations.size() != snap_.allocation_gpus.size() || snap_.allocations.size() != meta_.size()) {
    return Internal("allocation vectors differ in size");
  }
  for (size_t k = 0; k < snap_.allocations.size(); ++k) {
    const Allocation& a = snap_.allocations[k];
    const Slot* s = SlotOf(a.workload);
    if (s == nullptr || s->allocation != static_cast<int>(k) || s->workload < 0) {
      return Internal("allocation " + std::to_string(k) + " of workload " + Id(a.workload) + " is not indexed");
    }
    const Workload& w = snap_.workloads[s->workload];
    const bool terminating = w.state == WorkloadState::kTerminating;
    if ((w.state != WorkloadState::kRunning && !terminating) || terminating != a.terminating) {
      return Internal("workload " + Id(w.id) + " is " + std::string(WorkloadStateName(w.state)) +
                      " but holds GPUs" + (a.terminating ? " (terminating)" : ""));
    }
    if (a.pods.empty()) return Internal("workload " + Id(w.id) + " holds an empty allocation");
    for (const PodPlacement& p : meta_[k].ready) {
      if (!Contains(a.pods, p)) return Internal("workload " + Id(w.id) + " has a ready pod it does not hold");
    }
    int gpus = 0;
    for (const PodPlacement& p : a.pods) {
      if (p.node.value() >= nodes) return Internal("a pod names an unknown node");
      if ((used[p.node.value()] & p.gpus) != 0) {
        return Internal("a GPU on " + snap_.cluster.node(p.node).name + " is bound twice");
      }
      used[p.node.value()] |= p.gpus;
      gpus += std::popcount(p.gpus);
    }
    for (const PodPlacement& p : a.leaving) {
      if (!Contains(a.pods, p)) return Internal("workload " + Id(w.id) + " has a leaving pod it does not hold");
    }
    if (gpus != snap_.allocation_gpus[k]) {
      return Internal("workload " + Id(w.id) + " holds " + std::to_string(gpus) + " GPUs, counted " +
                      std::to_string(snap_.allocation_gpus[k]));
    }
    queue_used[w.queue.value()] += gpus;
    if (w.project.valid()) project_gpus[w.project.value()] += gpus;
  }
  for (size_t n = 0; n < nodes; ++n) {
    const Node& node = snap_.cluster.nodes[n];
    if (used[n] != used_[n] || snap_.free_gpus[n] != (node.all_gpus() & ~node.failed_gpus & ~used[n])) {
      return Internal("free GPUs of node " + node.name + " are out of date");
    }
  }
  if (queue_used != queue_used_) return Internal("GPUs per queue are out of date");
  if (project_gpus != project_gpus_) return Internal("GPUs per project are out of date");
  if (snap_.workload_digests.size() != snap_.workloads.size()) return Internal("workload digests differ in size");
  for (size_t i = 0; i < snap_.workloads.size(); ++i) {
    const Workload& w = snap_.workloads[i];
    const Slot* s = SlotOf(w.id);
    if (s == nullptr || s->workload != static_cast<int>(i)) {
      return Internal("workload " + Id(w.id) + " is not indexed");
    }
    const Allocation* a = s->allocation < 0 ? nullptr : &snap_.allocations[s->allocation];
    if (snap_.workload_digests[i] != WorkloadDigest::Of(w, s->allocation, a)) {
      return Internal("the digest of workload " + Id(w.id) + " is out of date");
    }
    const bool holds = s->allocation >= 0;
    const bool should = w.state == WorkloadState::kRunning || w.state == WorkloadState::kTerminating;
    if (holds != should) {
      return Internal("workload " + Id(w.id) + " is " + std::string(WorkloadStateName(w.state)) +
                      (holds ? " and holds GPUs" : " and holds none"));
    }
  }
  if (snap_.waiting_order != WaitingOrder::Of(snap_.workload_digests)) {
    return Internal("the order of waiting workloads is out of date");
  }
  if (snap_.allocation_workloads.size() != snap_.allocations.size()) {
    return Internal("allocation workloads differ in size");
  }
  for (size_t k = 0; k < snap_.allocations.size(); ++k) {
    const uint32_t i = snap_.allocation_workloads[k];
    if (i >= snap_.workloads.size() || snap_.workloads[i].id != snap_.allocations[k].workload) {
      return Internal("the workload of allocation " + std::to_string(k) + " is out of date");
    }
  }
  return Status::Ok();
}

}  // namespace tidal::state
