#include "core/engine/scheduling_pass.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <span>

#include "core/common/check.h"
#include "core/explain/text.h"
#include "core/model/lost_work.h"
#include "core/preemption/checkpoint_wait.h"

namespace tidal::engine {

using explain::Str;
using explain::TimeText;
using placement::ClassVerdict;
using placement::Eligibility;
using placement::PlacementRequest;

namespace {

bool IsCapacityReason(ReasonCode r) {
  switch (r) {
    case ReasonCode::kGang:
    case ReasonCode::kTopology:
    case ReasonCode::kFragmentation:
    case ReasonCode::kAwaitingVictims:
    case ReasonCode::kReservation:
    case ReasonCode::kPriority:
    case ReasonCode::kCapacity:
      return true;
    default:
      return false;
  }
}

int GpuCount(const std::vector<PodPlacement>& pods) {
  int n = 0;
  for (const PodPlacement& p : pods) n += std::popcount(p.gpus);
  return n;
}

std::string_view LevelWord(TopologyLevel level) {
  switch (level) {
    case TopologyLevel::kNvlink: return "NVLink domain";
    case TopologyLevel::kNode: return "node";
    case TopologyLevel::kRack: return "rack";
    case TopologyLevel::kNone: return "cluster";
  }
  return "domain";
}

std::string DescribeConstraints(const PlacementConstraints& c) {
  std::string out;
  for (const std::string& m : c.required_gpu_models) out += (out.empty() ? "gpu model " : ",") + m;
  for (const auto& [k, v] : c.node_selector) out += (out.empty() ? "" : "; ") + std::string("selector ") + k + "=" + v;
  if (out.empty()) out = "its tolerations (node taints)";
  return out;
}

std::vector<int> WorkloadsOfAllocations(const Snapshot& snapshot, const WorkloadIndex& index) {
  std::vector<int> out;
  out.reserve(snapshot.allocations.size());
  for (const Allocation& a : snapshot.allocations) out.push_back(index.Find(a.workload));
  return out;
}

// A pod asks for no GPU or more than a node can have.
RejectDecision BadGpusPerPod(const Workload& w) {
  return {w.id, ReasonCode::kCapacity,
          Str("capacity: gpus_per_pod is ", w.gpus_per_pod, ", must be 1..", kMaxGpusPerNode)};
}

}  // namespace

SchedulingPass::SchedulingPass(const PolicyConfig& policy, const Snapshot& snapshot,
                               std::shared_ptr<const StaticNodeClasses> classes)
    : policy_(policy),
      snapshot_(snapshot),
      now_(snapshot.now),
      state_(snapshot, std::move(classes), &alloc_gpus_),
      eligibility_(snapshot, state_, &policy.templates),
      quota_(snapshot, quota::QuotaTracker::QueuesOnly{}) {
  Init();
}

SchedulingPass::SchedulingPass(const PolicyConfig& policy, const Snapshot& snapshot,
                               const ClusterState& start)
    : policy_(policy),
      snapshot_(snapshot),
      now_(snapshot.now),
      alloc_gpus_(snapshot.allocation_gpus),
      state_(start),
      start_state_(&start),
      eligibility_(snapshot, state_, &policy.templates),
      quota_(snapshot, quota::QuotaTracker::QueuesOnly{}) {
  TIDAL_CHECK(alloc_gpus_.size() == snapshot.allocations.size())
      << "a pass from a kept cluster state needs the snapshot's allocation_gpus";
  Init();
}

void SchedulingPass::Init() {
  const Snapshot& snapshot = snapshot_;
  const std::vector<Workload>& ws = snapshot.workloads;
  const size_t n_allocs = snapshot.allocations.size();
  alloc_state_.assign(n_allocs, AllocState::kLive);
  alloc_end_override_.assign(n_allocs, kInfiniteFuture);
  leaving_claimed_.assign(n_allocs, 0);
  reserved_queue_.assign(snapshot.queues.size(), 0);
  // One scan (of the allocations, or of every digest) sorts out what each
  // phase looks at, so no phase walks every workload again; GPUs held are
  // summed per queue first and then added up the queue tree once per queue.
  std::vector<int> live_gpus(snapshot.queues.size(), 0);
  std::vector<int> terminating_gpus(snapshot.queues.size(), 0);
  held_gpus_.assign(snapshot.queues.size(), 0);
  std::vector<uint8_t> queue_waits(snapshot.queues.size() + 1, 0);  // the last: queues not in the snapshot
  // Inlined: called per workload, tens of thousands of times a pass.
  const auto sort_out = [&](uint32_t wi, const WorkloadDigest& d, int ai) __attribute__((always_inline)) {
    if (ai >= 0 && d.queue.value() < held_gpus_.size()) held_gpus_[d.queue.value()] += alloc_gpus_[ai];
    if (ai >= 0 && quota_.tracked(d.queue)) {
      (alloc_state_[ai] == AllocState::kTerminating ? terminating_gpus : live_gpus)[d.queue.value()] += alloc_gpus_[ai];
    }
    if (ai < 0) {
      if (d.state == WorkloadState::kPending || d.state == WorkloadState::kAwaitingApproval) {
        unplaced_.push_back(wi);
        queue_waits[std::min<size_t>(d.queue.value(), snapshot.queues.size())] = 1;
      }
    } else if (d.kind == WorkloadKind::kInference) {
      placed_services_.push_back(wi);
    } else if (d.kind == WorkloadKind::kTraining && d.elastic) {
      placed_elastic_.push_back(wi);
    } else if (d.kind == WorkloadKind::kDebug) {
      debug_allocs_.push_back(static_cast<uint32_t>(ai));
    }
  };
  // Both directions between workloads and allocations, and the allocations
  // with pods leaving: from the snapshot's digests when it has them (the
  // State's do), in the same scan, so that no Workload or Allocation is
  // read here; else from the records and an index of ids, and digests made
  // from the records.
  std::vector<uint32_t> leaving;  // allocations, ascending
  const bool given = snapshot.workload_digests.size() == ws.size();
  if (given && snapshot.waiting_order.kept() && snapshot.allocation_workloads.size() == n_allocs &&
      snapshot.waiting_order.size() > n_allocs) {
    // More work waits than runs: the placed work from the allocations, the
    // waiting work from the order (MainPhase, HeadReservations; unplaced_ is
    // made only for a pass that will not take it), instead of a scan of
    // every digest. (Where most work runs, the digests' scan in order is
    // the cheaper.)
    digests_ = snapshot.workload_digests.data();
    workload_of_.assign(n_allocs, -1);
    for (uint32_t ai = 0; ai < n_allocs; ++ai) {
      const uint32_t wi = snapshot.allocation_workloads[ai];
      TIDAL_CHECK(wi < ws.size()) << "allocation " << ai << " names workload index " << wi;
      const WorkloadDigest& d = digests_[wi];
      TIDAL_CHECK(d.allocation == static_cast<int>(ai))
          << "allocation " << ai << " names workload index " << wi << ", whose digest names " << d.allocation;
      workload_of_[ai] = static_cast<int>(wi);
      if (d.state == WorkloadState::kTerminating) alloc_state_[ai] = AllocState::kTerminating;
      if (d.leaving) leaving.push_back(ai);
      sort_out(wi, d, static_cast<int>(ai));
    }
    // In workload order, as a scan of the digests lists them.
    std::sort(placed_services_.begin(), placed_services_.end());
    std::sort(placed_elastic_.begin(), placed_elastic_.end());
    for (const WaitingOrder::Group& g : snapshot.waiting_order.groups()) {
      queue_waits[std::min<size_t>(g.queue.value(), snapshot.queues.size())] = 1;
    }
    unplaced_count_ = snapshot.waiting_order.size();
    unplaced_listed_ = false;
  } else if (given) {
    digests_ = snapshot.workload_digests.data();
    workload_of_.assign(n_allocs, -1);
    for (uint32_t wi = 0; wi < ws.size(); ++wi) {
      const WorkloadDigest& d = digests_[wi];
      const int ai = d.allocation;
      if (ai >= 0) {
        TIDAL_CHECK(static_cast<size_t>(ai) < n_allocs) << "a workload digest names allocation " << ai;
        workload_of_[ai] = static_cast<int>(wi);
        if (d.state == WorkloadState::kTerminating) alloc_state_[ai] = AllocState::kTerminating;
        if (d.leaving) leaving.push_back(static_cast<uint32_t>(ai));
      }
      sort_out(wi, d, ai);
    }
    std::sort(leaving.begin(), leaving.end());
  } else {
    workload_of_ = WorkloadsOfAllocations(snapshot, WorkloadIndex(ws));
    std::vector<int> alloc_of(ws.size(), -1);
    for (uint32_t i = 0; i < n_allocs; ++i) {
      const Allocation& a = snapshot.allocations[i];
      if (a.terminating) alloc_state_[i] = AllocState::kTerminating;
      if (!a.leaving.empty()) leaving.push_back(i);
      if (workload_of_[i] >= 0) alloc_of[workload_of_[i]] = static_cast<int>(i);
    }
    own_digests_.reserve(ws.size());
    for (uint32_t wi = 0; wi < ws.size(); ++wi) own_digests_.push_back(WorkloadDigest::Of(ws[wi], alloc_of[wi], nullptr));
    digests_ = own_digests_.data();
    for (uint32_t wi = 0; wi < ws.size(); ++wi) sort_out(wi, digests_[wi], alloc_of[wi]);
  }
  if (unplaced_listed_) unplaced_count_ = unplaced_.size();
#if !defined(NDEBUG) || defined(TIDAL_EXPENSIVE_CHECKS)
  if (given) {
    TIDAL_CHECK(workload_of_ == WorkloadsOfAllocations(snapshot, WorkloadIndex(ws)))
        << "the workload digests name other allocations than the workloads' ids do";
    for (uint32_t wi = 0; wi < ws.size(); ++wi) {
      const int ai = digests_[wi].allocation;
      TIDAL_CHECK(ai < 0 || (static_cast<size_t>(ai) < n_allocs && workload_of_[ai] == static_cast<int>(wi)))
          << "the digest of workload " << ws[wi].id.value() << " names allocation " << ai << ", not its own";
      const Allocation* a = ai < 0 ? nullptr : &snapshot.allocations[ai];
      TIDAL_CHECK(snapshot.workload_digests[wi] == WorkloadDigest::Of(ws[wi], ai, a) &&
                  (a == nullptr || a->terminating == (ws[wi].state == WorkloadState::kTerminating)))
          << "the digest of workload " << ws[wi].id.value() << " is out of date";
    }
    TIDAL_CHECK(snapshot.waiting_order.size() == 0 || snapshot.waiting_order == WaitingOrder::Of(snapshot.workload_digests))
        << "the order of waiting workloads is out of date";
    if (!unplaced_listed_) {
      size_t waiting = 0;
      for (const WorkloadDigest& d : snapshot.workload_digests) waiting += WaitingOrder::Waits(d) ? 1 : 0;
      TIDAL_CHECK(waiting == unplaced_count_) << "the waiting order misses waiting workloads";
    }
  }
#endif
  for (uint32_t q = 0; q < live_gpus.size(); ++q) {
    if (live_gpus[q] != 0) quota_.AddAllocation(QueueId(q), live_gpus[q], /*terminating=*/false);
    if (terminating_gpus[q] != 0) quota_.AddAllocation(QueueId(q), terminating_gpus[q], /*terminating=*/true);
  }
  for (uint32_t q = 0; q < queue_waits.size(); ++q) {
    if (queue_waits[q]) waiting_queues_.push_back(QueueId(q));
  }
  claimable_or_owned_ =
      !leaving.empty() ||
      std::find(alloc_state_.begin(), alloc_state_.end(), AllocState::kTerminating) != alloc_state_.end() ||
      std::any_of(snapshot.cluster.pools.begin(), snapshot.cluster.pools.end(),
                  [](const Pool& p) { return p.kind == PoolKind::kSemiDedicated; });
  std::sort(debug_allocs_.begin(), debug_allocs_.end());
  for (uint32_t i : leaving) {
    const Allocation& a = snapshot.allocations[i];
    std::vector<uint8_t>& removed = removed_pods_[i];
    removed.assign(a.pods.size(), 0);
    for (const PodPlacement& gone : a.leaving) {
      for (size_t k = 0; k < a.pods.size(); ++k) {
        if (!removed[k] && a.pods[k] == gone) {
          removed[k] = 1;
          break;
        }
      }
    }
    // Their exit time is not in the snapshot: assume a full grace period,
    // which moves with the clock.
    NoteTimeBound(now_);
    const QueueId q = workload_of_[i] < 0 ? QueueId() : ws[workload_of_[i]].queue;
    placed_releases_.push_back({now_ + policy_.preemption.default_grace, {q, a.leaving}});
  }
}

Decisions SchedulingPass::Run() {
  ordered_ = take_order_ && digests_ == snapshot_.workload_digests.data() &&
             snapshot_.waiting_order.size() == unplaced_count_;
  if (!ordered_ && !unplaced_listed_) {
    for (uint32_t wi = 0; wi < snapshot_.workloads.size(); ++wi) {
      if (digests_[wi].allocation < 0 && WaitingOrder::Waits(digests_[wi])) unplaced_.push_back(wi);
    }
    unplaced_listed_ = true;
  }
  if (explain_waits_) out_.waits.reserve(unplaced_count_);
  ForcedStops();
  ShrinkServices();
  // ForcedStops and ShrinkServices take no capacity, so state_ is still the
  // start state here.
  if (start_state_ == nullptr) {
    own_start_ = std::make_unique<ClusterState>(state_);
    start_state_ = own_start_.get();
  }
  HeadReservations();
  MainPhase();
  // A stopped main phase leaves nothing for these to decide (RestCanOnlyWait).
  if (!stopped_early_) {
    BorrowPhase();
    GrowPhase();
  }
  return std::move(out_);
}

// ---------------------------------------------------------------------------
// Phases

void SchedulingPass::ForcedStops() {
  const Cluster& cluster = snapshot_.cluster;
  // Per class: a shared-pool class that is not lent.
  std::vector<uint8_t> returned(state_.class_count(), 0);
  bool any_returned = false;
  for (int c = 0; c < state_.class_count(); ++c) {
    const PoolId pool = state_.node_class(c).pool;
    returned[c] = pool.valid() && pool.value() < cluster.pools.size() &&
                  cluster.pool(pool).kind == PoolKind::kShared && !state_.node_class(c).lent;
    any_returned = any_returned || returned[c];
  }
  const auto stop_debug = [&](uint32_t i) {
    const Allocation& a = snapshot_.allocations[i];
    const Workload& w = snapshot_.workloads[workload_of_[i]];
    if (w.kind != WorkloadKind::kDebug || w.debug.max_runtime <= Duration::zero()) return;
    if (now_ - a.start_time < w.debug.max_runtime) {
      NoteTimeBound(a.start_time + w.debug.max_runtime);
    } else {
      Preempt(i, PreemptCause::kMaxRuntime, WorkloadId(),
              Str("debug: ran ", ToSeconds(now_ - a.start_time), " s, max_runtime is ",
                  ToSeconds(w.debug.max_runtime), " s"));
    }
  };
  if (!any_returned) {
    // Only debug sessions can be stopped (in allocation order, as below).
    for (uint32_t i : debug_allocs_) {
      if (alloc_state_[i] == AllocState::kLive) stop_debug(i);
    }
    return;
  }
  for (uint32_t i = 0; i < snapshot_.allocations.size(); ++i) {
    if (alloc_state_[i] != AllocState::kLive || workload_of_[i] < 0) continue;
    const Allocation& a = snapshot_.allocations[i];
    // Pods already leaving (an elastic job the co-location controller shrank
    // off a returned node) are on their way out: the rest of the job stays.
    auto removed = a.leaving.empty() ? removed_pods_.end() : removed_pods_.find(i);
    for (size_t k = 0; k < a.pods.size(); ++k) {
      const PodPlacement& p = a.pods[k];
      if (p.node.value() >= cluster.nodes.size() || !returned[state_.class_of(p.node)]) continue;
      if (removed != removed_pods_.end() && removed->second[k]) continue;
      if (snapshot_.workloads[workload_of_[i]].kind == WorkloadKind::kInference) break;
      Preempt(i, PreemptCause::kInferenceReturn, WorkloadId(),
              Str("inference return: shared node ", cluster.node(p.node).name, " is no longer lent"));
      break;
    }
    if (alloc_state_[i] == AllocState::kLive) stop_debug(i);
  }
}

void SchedulingPass::ShrinkServices() {
  for (uint32_t wi : placed_services_) {
    const Workload& w = snapshot_.workloads[wi];
    const int ai = digests_[wi].allocation;
    if (alloc_state_[ai] != AllocState::kLive) continue;
    const Allocation& a = snapshot_.allocations[ai];
    if (!a.leaving.empty()) continue;  // already scaling down
    const int want = std::max({w.pods, w.min_pods, 1});
    const int have = static_cast<int>(a.pods.size());
    if (have <= want) continue;
    ResizeDecision r;
    r.workload = w.id;
    r.from_pods = have;
    r.to_pods = want;
    r.removed.assign(a.pods.begin() + want, a.pods.end());
    r.grace_deadline = now_ + policy_.preemption.default_grace;
    r.detail = Str("autoscaler: ", have, " -> ", want, " replicas");
    placed_releases_.push_back({r.grace_deadline, {w.queue, r.removed}});
    timeline_built_ = false;
    out_.resizes.push_back(std::move(r));
  }
}

int SchedulingPass::QueueRank(uint32_t wi) const {
  const WorkloadDigest& d = digests_[wi];
  // The borrowing penalty of its priority template's budget layer, added
  // back to one that needs borrowing (the deriver's test: the queue's usage
  // plus its gang minimum above the guarantee): within its own queue it
  // ranks as if it did not, since its own queue's work is what pushes it
  // over.
  const int min_gpus = std::max(1, d.min_pods) * d.gpus_per_pod;
  if (quota_.usage(d.queue) + min_gpus <= quota_.guarantee(d.queue)) return StartPriority(wi);
  int gap = 0;
  for (const PriorityTemplate& t : policy_.templates) {
    if (t.name == snapshot_.workloads[wi].priority.template_name) {
      gap = std::max(0, t.budget.within_guarantee - t.budget.borrowing);
      break;
    }
  }
  return StartPriority(wi) + gap;
}

void SchedulingPass::HeadReservations() {
  // Per queue, its first pending multi-GPU workload in main-phase order by
  // queue rank (rank desc, submit time, id).
  const std::vector<Workload>& ws = snapshot_.workloads;
  std::map<uint32_t, std::pair<uint32_t, int>> head;  // queue -> (workload, rank)
  const auto consider = [&](uint32_t wi) {
    const WorkloadDigest& w = digests_[wi];
    if (!quota_.tracked(w.queue) || w.state != WorkloadState::kPending || w.awaiting_approval ||
        w.kind == WorkloadKind::kInference || w.gpus_per_pod <= 0 || w.gpus_per_pod > kMaxGpusPerNode ||
        std::max(1, w.min_pods) * w.gpus_per_pod <= 1) {
      return;
    }
    const int rank = QueueRank(wi);
    auto [it, inserted] = head.try_emplace(w.queue.value(), wi, rank);
    if (inserted) return;
    const WorkloadDigest& h = digests_[it->second.first];
    if (std::make_tuple(-rank, w.submit_time, w.id) <
        std::make_tuple(-it->second.second, h.submit_time, h.id)) {
      it->second = {wi, rank};
    }
  };
  if (!ordered_) {
    for (uint32_t wi : unplaced_) consider(wi);
  } else {
    // By the waiting order's groups: in a group every rank is its stored
    // priority plus the group's start shift plus, when the group's gang
    // minimum needs borrowing, its template's gap, at most max_gap. So a
    // group is walked only while its next entry could still outrank its
    // queue's head so far, and one of single-GPU work not at all.
    int max_gap = 0;
    for (const PriorityTemplate& t : policy_.templates) {
      max_gap = std::max(max_gap, t.budget.within_guarantee - t.budget.borrowing);
    }
    for (const WaitingOrder::Group& g : snapshot_.waiting_order.groups()) {
      if (!quota_.tracked(g.queue) || g.min_gpus == 1) continue;
      const int most_above = BorrowingShift(g.queue, g.min_gpus, g.borrowing_start_delta) +
                             (g.min_gpus < 1 || quota_.usage(g.queue) + g.min_gpus > quota_.guarantee(g.queue)
                                  ? max_gap
                                  : 0);
      for (const WaitingOrder::Entry& e : g.entries) {
        // The entries after this one rank at most as high, and when as
        // high they were submitted later (or have a larger id).
        const auto it = head.find(g.queue.value());
        if (it != head.end()) {
          const WorkloadDigest& h = digests_[it->second.first];
          if (std::make_tuple(-(e.priority + most_above), e.submit, e.id) >
              std::make_tuple(-it->second.second, h.submit_time, h.id)) {
            break;
          }
        }
        consider(e.workload);
      }
    }
  }
  for (const auto& [q, held] : head) {
    if (head_reservations_ >= kMaxHeadReservations) break;
    const auto [wi, rank] = held;
    const Workload& w = ws[wi];
    const PlacementRequest r{std::max(1, w.min_pods), w.gpus_per_pod, w.constraints.topology};
    // Only a head that needs borrowing: one within the guarantee is placed
    // (or reserved for) in the main phase in its turn.
    if (quota_.Check(w.queue, r.total_gpus(), FreeUsableGpus()).admission != quota::Admission::kBorrow) continue;
    const Eligibility& e = EligibilityOf(wi);
    if (!e.any_ok || NeverFits(w, e, r.total_gpus())) continue;
    if (auto now_plan = placer_.Place(state_, e, r, BlockedFor(0))) {
      Reservation res{w.id, w.name, now_, {}};
      for (const PodPlacement& p : *now_plan) res.nodes.push_back(p.node.value());
      std::sort(res.nodes.begin(), res.nodes.end());
      res.nodes.erase(std::unique(res.nodes.begin(), res.nodes.end()), res.nodes.end());
      reservations_.push_back(std::move(res));
      blocked_.clear();
      reserved_queue_[q] = 1;
    } else if (!TryReserve(wi, e, r, /*head=*/true)) {
      continue;
    }
    ++head_reservations_;
    Reservation& res = reservations_.back();
    res.only_queue = w.queue;
    res.rank = rank;
    res.holder_submit = w.submit_time;
  }
}

void SchedulingPass::MainPhase() {
  const std::vector<Workload>& ws = snapshot_.workloads;
  using Key = OrderKey;
  const auto before = WaitingOrder::Before;
  const auto after = [&](const Key& x, const Key& y) { return before(y, x); };
  const auto key_of = [&](uint32_t wi) { return Key{StartPriority(wi), wi, digests_[wi].submit_time, digests_[wi].id}; };
  // The work comes in order, merged from streams: the groups of the
  // snapshot's waiting order, when it has one (each in its own order, its
  // start priorities all shifted alike), and a heap of the services to grow
  // (of every waiting workload too, without a waiting order).
  const WaitingOrder& order = snapshot_.waiting_order;
  const std::span<const WaitingOrder::Group> groups = ordered_ ? order.groups() : std::span<const WaitingOrder::Group>();
  std::vector<int> shift(groups.size());
  std::vector<size_t> next(groups.size(), 0);  // per group, its first entry not taken
  for (size_t g = 0; g < groups.size(); ++g) {
    shift[g] = BorrowingShift(groups[g].queue, groups[g].min_gpus, groups[g].borrowing_start_delta);
  }
  const auto group_key = [&](size_t g) {
    const WaitingOrder::Entry& e = groups[g].entries[next[g]];
    return Key{e.priority + shift[g], e.workload, e.submit, e.id};
  };
  std::vector<Key> heap;
  // The pods still to walk, counted by GPUs, say the smallest one left.
  std::array<int, kMaxGpusPerNode + 1> rest_pods_by_gpus{};
  const auto count_pod = [&](uint32_t wi, int sign) {
    const int g = digests_[wi].gpus_per_pod;
    if (g >= 1 && g <= kMaxGpusPerNode) rest_pods_by_gpus[g] += sign;
  };
  for (uint32_t wi : placed_services_) {
    const int ai = digests_[wi].allocation;
    if (alloc_state_[ai] == AllocState::kLive &&
        static_cast<int>(snapshot_.allocations[ai].pods.size()) < ws[wi].pods) {
      heap.push_back(key_of(wi));
      count_pod(wi, +1);
    }
  }
  if (ordered_) {
    for (int g = 1; g <= kMaxGpusPerNode; ++g) rest_pods_by_gpus[g] += order.pods_of_gpus(g);
  } else {
    for (uint32_t wi : unplaced_) {
      heap.push_back(key_of(wi));
      count_pod(wi, +1);
    }
  }
  std::make_heap(heap.begin(), heap.end(), after);
  // The groups' heads, best on top: (key, group).
  using Head = std::pair<Key, size_t>;
  const auto head_after = [&](const Head& x, const Head& y) { return before(y.first, x.first); };
  std::vector<Head> heads;
  for (size_t g = 0; g < groups.size(); ++g) heads.emplace_back(group_key(g), g);
  std::make_heap(heads.begin(), heads.end(), head_after);
  // The next workload in order, taken off its stream; nothing when none is
  // left. `from_order`: set when it came from the waiting order, so it has
  // no allocation.
  bool from_order = false;
  const auto next_key = [&](bool take) -> std::optional<Key> {
    const bool from_heap = !heap.empty() && (heads.empty() || before(heap.front(), heads.front().first));
    if (!from_heap && heads.empty()) return std::nullopt;
    const Key k = from_heap ? heap.front() : heads.front().first;
    if (!take) return k;
    from_order = !from_heap;
    if (from_heap) {
      std::pop_heap(heap.begin(), heap.end(), after);
      heap.pop_back();
    } else if (const size_t g = heads.front().second; ++next[g] < groups[g].entries.size()) {
      // The group's next entry replaces its head, sifted down: half the
      // work of a pop and a push. The digest of the group's workload four
      // on is fetched now, to be there when it is taken (the entries come
      // in order, which the hardware fetches ahead itself).
      __builtin_prefetch(digests_ + groups[g].entries[std::min(next[g] + 4, groups[g].entries.size() - 1)].workload);
      Head moving{group_key(g), g};
      size_t i = 0;
      for (size_t c = 1; c < heads.size(); i = c, c = 2 * c + 1) {
        if (c + 1 < heads.size() && before(heads[c + 1].first, heads[c].first)) ++c;
        if (!before(heads[c].first, moving.first)) break;
        heads[i] = heads[c];
      }
      heads[i] = moving;
    } else {
      std::pop_heap(heads.begin(), heads.end(), head_after);
      heads.pop_back();
    }
    // Counted only while RestCanOnlyWait may be asked: once the rest is
    // decided by RestKey, this would be the first read of each digest.
    if (!rest_only_waits_) count_pod(k.workload, -1);
    return k;
  };
  // A pass that explains nothing may stop once the rest can only wait.
  // Asked only after a workload that was not placed: while work is being
  // placed the rest is not only waiting, and on a large cluster with room
  // the question would cost more than it saves.
  // A pass that explains without details goes on instead, but from that
  // point it decides the rest's waits by RestKey (DecideByRestKey).
  const bool may_stop = stop_early_ && (!explain_waits_ || !wait_details_);
  bool ask = may_stop;
  int smallest_pod_gpus = 1;
  while (true) {
    if (ask) {
      const std::optional<Key> peeked = next_key(/*take=*/false);
      if (!peeked) break;
      while (smallest_pod_gpus <= kMaxGpusPerNode && rest_pods_by_gpus[smallest_pod_gpus] == 0) ++smallest_pod_gpus;
      if (RestCanOnlyWait(peeked->priority, smallest_pod_gpus)) {
        if (explain_waits_) {
          // Without details: it goes on, deciding the rest's waits by
          // RestKey (DecideByRestKey), and asks no more.
          rest_only_waits_ = true;
          ask = false;
        } else {
          // What the rest would decide does not move with the clock but for
          // the never-fits rejects, whose checks note their own bounds: so
          // the pass keeps the bounds of the work it walked. What the whole
          // walk would still decide for the rest: those rejects, in order.
          stopped_early_ = true;
          std::vector<std::pair<Key, RejectDecision>> rejects;
          for (const Key& h : heap) RejectIfNeverFits(h.workload, h.id, rejects);
          if (ordered_) AskTheRestOfTheOrder(next, rejects);
          std::sort(rejects.begin(), rejects.end(),
                    [&](const auto& x, const auto& y) { return before(x.first, y.first); });
          for (auto& [unused, reject] : rejects) out_.rejects.push_back(std::move(reject));
          return;
        }
      }
    }
    const std::optional<Key> taken = next_key(/*take=*/true);
    if (!taken) break;
    const uint32_t wi = taken->workload;
    const bool placed_before = !from_order && digests_[wi].allocation >= 0;
    if (rest_only_waits_ && !placed_before && DecideByRestKey(wi, taken->priority)) continue;
    const size_t placed = out_.places.size() + out_.resizes.size();
    if (placed_before) {
      ProcessServiceGrow(wi);
    } else {
      ProcessStart(wi, Phase::kMain);
    }
    ask = may_stop && !rest_only_waits_ && out_.places.size() + out_.resizes.size() == placed;
  }
}

int SchedulingPass::MostFreeOnANode() const {
  // From each usable class's highest non-empty bucket of nodes by free
  // GPUs: O(classes x GPUs per node), never a walk of the nodes.
  int most = 0;
  for (int c = 0; c < state_.class_count(); ++c) {
    const NodeClass& nc = state_.node_class(c);
    if (!nc.usable) continue;
    for (int k = nc.gpu_count; k > most; --k) {
      if (!state_.bucket(c, k).empty()) {
        most = k;
        break;
      }
    }
  }
  return most;
}

bool SchedulingPass::RestCanOnlyWait(int next_priority, int smallest_pod_gpus) {
  const int most_free = MostFreeOnANode();
  if (most_free >= std::min(smallest_pod_gpus, smallest_deferred_pod_gpus_)) return false;
  // GPUs left over could still grow an elastic job, unless something waits
  // for capacity (GrowPhase).
  if (most_free > 0 && !capacity_waits_ && (!placed_elastic_.empty() || !placed_elastic_now_.empty())) {
    return false;
  }
  if (preemption_searches_ < kMaxPreemptionSearches) {
    if (claimable_or_owned_) return false;
    // A reclaim needs a preemptor within its queue's guarantee and a victim
    // queue above its own.
    const bool reclaim = quota_.AnyLiveAboveGuarantee() &&
                         std::any_of(waiting_queues_.begin(), waiting_queues_.end(), [&](QueueId q) {
                           return !quota_.tracked(q) || quota_.usage(q) < quota_.guarantee(q);
                         });
    if (reclaim) return false;
    // Deferred work ranks before the rest, so the first of it ranks highest.
    const int highest =
        deferred_.empty() ? next_priority : std::max(next_priority, StartPriority(deferred_.front().workload));
    if (static_cast<int64_t>(highest) - LowestVictimPriority() >= policy_.preemption.min_priority_gap) {
      return false;
    }
  }
  return true;
}

int64_t SchedulingPass::LowestVictimPriority() {
  if (!lowest_victim_priority_) {
    // No victim at all: as if one were infinitely high.
    int64_t lowest = std::numeric_limits<int64_t>::max() / 2;
    for (uint32_t i = 0; i < snapshot_.allocations.size(); ++i) {
      if (alloc_state_[i] != AllocState::kLive || workload_of_[i] < 0) continue;
      const WorkloadDigest& v = digests_[workload_of_[i]];
      if (v.may_be_preempted) lowest = std::min<int64_t>(lowest, v.priority);
    }
    lowest_victim_priority_ = lowest;
  }
  return *lowest_victim_priority_;
}

void SchedulingPass::RejectIfNeverFits(uint32_t wi, WorkloadId id,
                                       std::vector<std::pair<OrderKey, RejectDecision>>& rejects) {
  // Most of the rest passed before: its fits-someday byte says so without
  // reading its record.
  if (digests_[wi].allocation >= 0 || (fits_ != nullptr && fits_->Has(id))) return;
  std::optional<RejectDecision> reject;
  if (ScreenStart(wi, reject) != Screen::kRejected) return;
  const WorkloadDigest& d = digests_[wi];
  rejects.emplace_back(OrderKey{StartPriority(wi), wi, d.submit_time, d.id}, std::move(*reject));
}

void SchedulingPass::AskTheRestOfTheOrder(const std::vector<size_t>& next,
                                          std::vector<std::pair<OrderKey, RejectDecision>>& rejects) {
  const WaitingOrder& order = snapshot_.waiting_order;
  const std::span<const WaitingOrder::Group> groups = order.groups();
  if (fits_ == nullptr || !fits_->keeps()) {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t i = next[g]; i < groups[g].entries.size(); ++i) {
        RejectIfNeverFits(groups[g].entries[i].workload, groups[g].entries[i].id, rejects);
      }
    }
    return;
  }
  // What was asked about before and found able to fit is kept: only what
  // came since, or did not settle, is asked about, once each.
  std::vector<WaitingOrder::Inserted> unsettled;
  const auto ask = [&](size_t g, size_t i) {
    const WaitingOrder::Entry& e = groups[g].entries[i];
    // Work before next[g] was walked, and asked about there.
    if (i >= next[g]) RejectIfNeverFits(e.workload, e.id, rejects);
    if (!fits_->Has(e.id)) {
      unsettled.push_back({groups[g].queue, groups[g].borrowing_start_delta, groups[g].min_gpus, e});
    }
  };
  if (std::vector<WaitingOrder::Inserted> to_ask; fits_->ToAsk(order, to_ask)) {
    std::vector<std::pair<WorkloadId, std::pair<size_t, size_t>>> found;
    for (const WaitingOrder::Inserted& x : to_ask) {
      if (const auto at = order.Locate(x)) found.emplace_back(x.entry.id, *at);
    }
    std::sort(found.begin(), found.end());
    found.erase(std::unique(found.begin(), found.end()), found.end());
    for (const auto& [id, at] : found) ask(at.first, at.second);
  } else {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t i = 0; i < groups[g].entries.size(); ++i) ask(g, i);
    }
  }
  fits_->Settle(order, std::move(unsettled));
}

void SchedulingPass::BorrowPhase() {
  if (deferred_.empty()) return;
  // Per queue (in queue order), its FIFO of deferred work in main-phase
  // order, the next item of it, and its weighted borrowed share.
  struct QueueTurn {
    uint32_t queue;
    std::vector<size_t> items;  // positions in deferred_
    size_t next = 0;
    double share = 0;
  };
  std::vector<QueueTurn> turns;
  {
    // Queues are few and a queue's work comes in runs: the last one's turn
    // is tried first, then the others'.
    QueueTurn* last = nullptr;
    for (size_t i = 0; i < deferred_.size(); ++i) {
      const uint32_t q = deferred_[i].queue.value();
      if (last == nullptr || last->queue != q) {
        last = nullptr;
        for (QueueTurn& t : turns) {
          if (t.queue == q) last = &t;
        }
        if (last == nullptr) last = &turns.emplace_back(QueueTurn{q, {}});
      }
      last->items.push_back(i);
    }
    std::sort(turns.begin(), turns.end(), [](const QueueTurn& x, const QueueTurn& y) { return x.queue < y.queue; });
  }
  // Once the rest can only wait nothing is placed or preempted, so no share
  // moves: they are read once.
  const auto read_shares = [&] {
    for (QueueTurn& t : turns) t.share = quota_.BorrowShare(QueueId(t.queue));
  };
  read_shares();
  // Repeatedly serve the queue with the smallest weighted borrowed share.
  while (true) {
    QueueTurn* best = nullptr;
    for (QueueTurn& t : turns) {
      if (t.next < t.items.size() && (best == nullptr || t.share < best->share)) best = &t;
    }
    if (best == nullptr) break;
    const Deferred& x = deferred_[best->items[best->next++]];
    if (!WaitByMainPhaseKey(x)) ProcessStart(x.workload, Phase::kBorrow);
    if (!rest_only_waits_) read_shares();
  }
}

void SchedulingPass::GrowPhase() {
  if (capacity_waits_) return;
  const std::vector<Workload>& ws = snapshot_.workloads;
  // (workload, its Place decision of this pass or -1 when it was running).
  std::vector<std::pair<uint32_t, int>> elastic;
  for (uint32_t wi : placed_elastic_) {
    const int ai = digests_[wi].allocation;
    if (alloc_state_[ai] != AllocState::kLive) continue;
    const Workload& w = ws[wi];
    if (removed_pods_.count(static_cast<uint32_t>(ai)) != 0) continue;  // shrinking now
    if (static_cast<int>(snapshot_.allocations[ai].pods.size()) < w.max_pods) elastic.push_back({wi, -1});
  }
  // Placed in this pass below their maximum (at their minimum, or at a
  // desired size below it): they grow now, in their Place decision. No later
  // pass may come to grow them (the simulator skips passes that have
  // nothing pending and nothing changed).
  for (const auto& [wi, place] : placed_elastic_now_) {
    if (static_cast<int>(out_.places[place].pods.size()) < ws[wi].max_pods) elastic.push_back({wi, place});
  }
  std::sort(elastic.begin(), elastic.end(), [&](const auto& x, const auto& y) {
    const int a = StartPriority(x.first);
    const int b = StartPriority(y.first);
    if (a != b) return a > b;
    return ws[x.first].id < ws[y.first].id;
  });
  for (const auto& [wi, place] : elastic) {
    const Workload& w = ws[wi];
    const Eligibility& e = EligibilityOf(wi);
    if (place >= 0) {
      PlaceDecision& d = out_.places[place];
      const PlacementRequest one{1, w.gpus_per_pod, {}};
      for (int pods = static_cast<int>(d.pods.size()); pods < w.max_pods; ++pods) {
        const quota::QuotaVerdict v = quota_.Check(w.queue, w.gpus_per_pod, FreeUsableGpus());
        if (v.admission == quota::Admission::kDenied) break;
        auto plan = placer_.Place(state_, e, one, BlockedFor(UsableReservations(wi)));
        if (!plan) break;
        for (const PodPlacement& p : *plan) state_.Take(p.node, p.gpus);
        quota_.Add(w.queue, w.gpus_per_pod);
        d.borrowed = d.borrowed || v.admission == quota::Admission::kBorrow || IsBorrowedPlacement(e, *plan);
        d.pods.insert(d.pods.end(), plan->begin(), plan->end());
      }
      continue;
    }
    const Allocation& a = snapshot_.allocations[digests_[wi].allocation];
    const int from = static_cast<int>(a.pods.size());
    ResizeDecision r;
    r.workload = w.id;
    r.from_pods = from;
    const PlacementRequest one{1, w.gpus_per_pod, {}};
    for (int pods = from; pods < w.max_pods; ++pods) {
      if (quota_.Check(w.queue, w.gpus_per_pod, FreeUsableGpus()).admission == quota::Admission::kDenied) break;
      auto plan = placer_.Place(state_, e, one, BlockedFor(UsableReservations(wi)));
      if (!plan) break;
      for (const PodPlacement& p : *plan) state_.Take(p.node, p.gpus);
      quota_.Add(w.queue, w.gpus_per_pod);
      r.added.insert(r.added.end(), plan->begin(), plan->end());
    }
    if (r.added.empty()) continue;
    r.to_pods = from + static_cast<int>(r.added.size());
    r.detail = Str("elastic: grows ", from, " -> ", r.to_pods, " pods into idle capacity (max ", w.max_pods, ")");
    out_.resizes.push_back(std::move(r));
  }
}

// ---------------------------------------------------------------------------
// One workload

std::optional<RejectDecision> SchedulingPass::NeverFits(const Workload& w, const Eligibility& e,
                                                        int min_gpus) {
  RejectDecision r;
  r.workload = w.id;
  // Named only in a reject: this runs for every waiting workload each pass.
  auto queue_name = [&] { return quota_.tracked(w.queue) ? quota_.name(w.queue) : std::string("(none)"); };
  const TopologyConstraint& topo = w.constraints.topology;
  if (e.static_gpus == 0) {
    if (e.furthest == ClassVerdict::kPool) {
      r.reason = ReasonCode::kPool;
      r.detail = Str("pool: no pool that queue ", queue_name(), " may use takes ", WorkloadKindName(w.kind), " work");
    } else {
      r.reason = ReasonCode::kConstraints;
      r.detail = Str("constraints: no node in the usable pools matches ", DescribeConstraints(w.constraints));
    }
    return r;
  }
  if (w.gpus_per_pod > e.static_max_node_gpus) {
    r.reason = ReasonCode::kCapacity;
    r.detail = Str("capacity: a pod needs ", w.gpus_per_pod, " GPUs; the largest eligible node has ",
                   e.static_max_node_gpus);
    return r;
  }
  if (min_gpus > e.static_gpus) {
    r.reason = ReasonCode::kCapacity;
    r.detail = Str("capacity: needs ", min_gpus, " GPUs; eligible nodes have ", e.static_gpus, " in total");
    return r;
  }
  if (topo.required) {
    int most = -1;
    switch (topo.level) {
      case TopologyLevel::kNvlink: most = e.static_max_domain_gpus; break;
      case TopologyLevel::kNode: most = e.static_max_node_gpus; break;
      case TopologyLevel::kRack: most = e.static_max_rack_gpus; break;
      case TopologyLevel::kNone: break;
    }
    if (most >= 0 && min_gpus > most) {
      r.reason = ReasonCode::kTopology;
      r.detail = Str("topology: needs ", min_gpus, " GPUs in one ", LevelWord(topo.level),
                     "; the largest eligible one has ", most);
      return r;
    }
  }
  const int most = quota_.MaxEverGpus(w.queue);
  if (most >= 0 && min_gpus > most) {
    r.reason = ReasonCode::kQuota;
    r.detail = Str("quota: needs ", min_gpus, " GPUs; queue ", queue_name(),
                   " can hold at most ", most, " (guarantee plus borrowing limit)");
    return r;
  }
  if (w.kind == WorkloadKind::kBatchInference && w.batch.deadline != kInfiniteFuture &&
      w.expected_duration > Duration::zero()) {
    NoteTimeBound(w.batch.deadline - w.expected_duration);
  }
  if (w.kind == WorkloadKind::kBatchInference && w.batch.deadline != kInfiniteFuture &&
      w.expected_duration > Duration::zero() && now_ + w.expected_duration > w.batch.deadline) {
    r.reason = ReasonCode::kDeadline;
    r.detail = Str("deadline: needs ", ToSeconds(w.expected_duration), " s but the deadline ",
                   TimeText(w.batch.deadline), " is ", ToSeconds(w.batch.deadline - now_), " s away");
    return r;
  }
  return std::nullopt;
}

const Eligibility& SchedulingPass::EligibilityOf(uint32_t wi) {
  // Plain constraints find their entry by numbers, from the digest: cheaper
  // than a pointer per workload to look up and keep.
  const WorkloadDigest& d = digests_[wi];
  if (d.plain_constraints && !d.preemptible_without_checkpoint) return eligibility_.For(snapshot_.workloads[wi], d);
  if (eligibility_of_.empty()) eligibility_of_.assign(snapshot_.workloads.size(), nullptr);
  const Eligibility*& e = eligibility_of_[wi];
  if (e == nullptr) e = &eligibility_.For(snapshot_.workloads[wi], d);
  return *e;
}

SchedulingPass::Screen SchedulingPass::ScreenStart(uint32_t wi, std::optional<RejectDecision>& reject) {
  // From the digest: over a backlog thousands deep, the records are not
  // read for work found able to fit before.
  const WorkloadDigest& d = digests_[wi];
  if (PassesScreenOnDigest(d)) return Screen::kGoOn;
  if (d.awaiting_approval || d.state == WorkloadState::kAwaitingApproval) return Screen::kAwaitingApproval;
  const Workload& w = snapshot_.workloads[wi];
  if (d.gpus_per_pod <= 0 || d.gpus_per_pod > kMaxGpusPerNode) {
    reject = BadGpusPerPod(w);
    return Screen::kRejected;
  }
  if (d.kind == WorkloadKind::kInference && w.pods <= 0) return Screen::kScaledToZero;
  // One some pass found able to fit some day needs no asking again.
  if (fits_ != nullptr && fits_->Has(d.id)) return Screen::kGoOn;
  reject = NeverFits(w, EligibilityOf(wi), std::max(1, w.min_pods) * w.gpus_per_pod);
  if (reject) return Screen::kRejected;
  if (fits_ != nullptr) fits_->Add(w);
  return Screen::kGoOn;
}

bool SchedulingPass::WaitByMainPhaseKey(const Deferred& x) {
  // Deferred once the rest could only wait (only then has it a key), with
  // as many reservations made as then: its key differs from the main
  // phase's only by the phase.
  if (x.rest_key < 0) return false;
  auto& [main_key, deferral] = rest_outcomes_[x.rest_key];
  if (main_key.reservations() != static_cast<int>(reservations_.size())) return false;
  if (deferral.in_borrow_phase < 0) {
    const int found = FindRestOutcome(main_key.InPhase(Phase::kBorrow));
    if (found < 0 || !rest_outcomes_[found].second.reason) return false;
    deferral.in_borrow_phase = static_cast<int8_t>(found);
  }
  WaitKnown(x.id, rest_outcomes_[deferral.in_borrow_phase].second);
  return true;
}

bool SchedulingPass::DecideByRestKey(uint32_t wi, int start_priority) {
  const WorkloadDigest& d = digests_[wi];
  if (!PassesScreenOnDigest(d)) return false;
  const Eligibility& e = EligibilityOf(wi);
  if (!e.any_ok || HoldsAReservation(d.id)) return false;
  const int found = FindRestOutcome(RestKeyOf(d, e, UsableReservations(wi, start_priority), start_priority, Phase::kMain));
  if (found < 0) return false;
  TakeKnownOutcome(wi, d, found);
  return true;
}

bool SchedulingPass::TakeKnownOutcome(uint32_t wi, const WorkloadDigest& d, int found) {
  const RestOutcome& known = rest_outcomes_[found].second;
  if (!known.reason) {
    Defer(wi, d, found);
    return false;
  }
  WaitKnown(d.id, known);
  return true;
}

SchedulingPass::RestKey SchedulingPass::RestKeyOf(const WorkloadDigest& d, const Eligibility& e, uint32_t usable,
                                                  int start_priority, Phase phase) const {
  const int min_pods = std::max(1, d.min_pods);
  return RestKey(e.key_id, d.gpus_per_pod, min_pods, std::max(min_pods, d.pods), d.topology, usable, d.queue,
                 static_cast<int>(reservations_.size()), highest_placed_priority_ > start_priority, phase);
}

bool SchedulingPass::ProcessStart(uint32_t wi, Phase phase) {
  const Workload& w = snapshot_.workloads[wi];
  std::optional<RejectDecision> reject;
  switch (ScreenStart(wi, reject)) {
    case Screen::kAwaitingApproval:
      Wait(wi, ReasonCode::kAwaitingApproval,
           [&] {
             return Str("awaiting approval: the top tier", w.priority.template_name.empty() ? "" : " of template ",
                        w.priority.template_name, " needs an admin");
           },
           std::nullopt);
      return true;
    case Screen::kScaledToZero:
      Wait(wi, ReasonCode::kCapacity,
           [] { return std::string("capacity: the service is scaled to zero replicas"); }, std::nullopt);
      return true;
    case Screen::kRejected:
      out_.rejects.push_back(std::move(*reject));
      return true;
    case Screen::kGoOn:
      break;
  }
  // From here on the record is read only to place, preempt or explain in
  // full: the rest of an explained pass reads the digest.
  const WorkloadDigest& d = digests_[wi];
  const int g = d.gpus_per_pod;
  const int min_pods = std::max(1, d.min_pods);
  const int desired = std::max(min_pods, d.pods);
  const Eligibility& e = EligibilityOf(wi);
  if (!e.any_ok) {
    if (e.furthest == ClassVerdict::kLoan) {
      Wait(wi, ReasonCode::kLoan,
           [] { return std::string("loan: the matching shared-pool nodes are not lent to training now"); },
           std::nullopt);
    } else {
      Wait(wi, ReasonCode::kNodeHealth,
           [&] {
             return Str("node health: all ", e.nodes_failing_health,
                        " matching nodes are failed, not ready or cordoned");
           },
           std::nullopt);
    }
    return true;
  }

  const uint32_t usable = UsableReservations(wi);
  // Once the rest can only wait, in a pass that explains without details,
  // what follows depends on the workload only through the fields of a
  // RestKey: the first workload of a key decides it for the others.
  std::optional<RestKey> rest_key;
  if (rest_only_waits_ && !HoldsAReservation(d.id)) {
    rest_key = RestKeyOf(d, e, usable, StartPriority(wi), phase);
    if (const int found = FindRestOutcome(*rest_key); found >= 0) return TakeKnownOutcome(wi, d, found);
  }
  // Waits for `reason`, noted for the workloads of the same RestKey.
  const auto wait = [&](ReasonCode reason, auto make_detail, std::optional<Time> start) {
    if (rest_key) AddRestOutcome(*rest_key, {reason, start});
    Wait(wi, reason, make_detail, start);
  };
  const int sizes[2] = {desired, min_pods};
  const int n_sizes = desired == min_pods ? 1 : 2;
  quota::QuotaVerdict denied;
  bool any_admitted = false;
  bool want_borrow = false;
  bool within = false;
  PlacementRequest tried;
  for (int s = 0; s < n_sizes; ++s) {
    const PlacementRequest r{sizes[s], g, w.constraints.topology};
    const quota::QuotaVerdict v = quota_.Check(w.queue, r.total_gpus(), FreeUsableGpus());
    if (v.admission == quota::Admission::kDenied) {
      denied = v;
      continue;
    }
    if (v.admission == quota::Admission::kBorrow && phase == Phase::kMain) {
      want_borrow = true;
      continue;
    }
    any_admitted = true;
    within = v.admission == quota::Admission::kWithinGuarantee;
    tried = r;
    const ShapeKey key{e.key_id, g, r.pods, static_cast<int>(r.topology.level), r.topology.required,
                       static_cast<int>(usable)};
    if (auto plan = TryPlace(e, r, usable, key)) {
      const bool borrowed = v.admission == quota::Admission::kBorrow || IsBorrowedPlacement(e, *plan);
      Commit(wi, std::move(*plan), borrowed);
      return true;
    }
  }
  if (!any_admitted) {
    if (want_borrow) {
      Defer(wi, d, rest_key ? AddRestOutcome(*rest_key, {}) : -1);
      return false;
    }
    wait(ReasonCode::kQuota, [&] { return quota_.DeniedDetail(w.queue, denied); }, EstimateQuota(w.queue, min_pods * g));
    return true;
  }

  const ShapeKey key{e.key_id, g, tried.pods, static_cast<int>(tried.topology.level),
                     tried.topology.required, static_cast<int>(usable)};
  const uint32_t all = (1u << reservations_.size()) - 1;
  if ((usable & all) != all) {
    const ShapeKey open_key{e.key_id, g, tried.pods, static_cast<int>(tried.topology.level),
                            tried.topology.required, static_cast<int>(all)};
    if (TryPlace(e, tried, all, open_key)) {
      const Reservation* holder = nullptr;
      for (size_t i = 0; i < reservations_.size() && holder == nullptr; ++i) {
        if ((usable & (1u << i)) == 0) holder = &reservations_[i];
      }
      wait(ReasonCode::kReservation,
           [&] {
             return Str("reservation: capacity is held for ", holder->holder_name, " from ",
                        TimeText(holder->start), "; this job ",
                        w.expected_duration > Duration::zero()
                            ? Str("would end at ", TimeText(now_ + w.expected_duration))
                            : std::string("has no expected duration"));
           },
           holder->start);
      return true;
    }
  }
  if (TryPreempt(wi, e, tried, within)) return true;
  // Explained before reserving: its own reservation must not count against it.
  const FitFailure& f = ExplainFit(w, e, tried, key, usable);
  std::optional<Time> start;
  if (TryReserve(wi, e, tried)) {
    start = reservations_.back().start;
  } else {
    for (const Reservation& res : reservations_) {
      if (res.holder == w.id) start = res.start;  // a head reservation
    }
  }
  // Estimated even when not explained: its release timeline is built on
  // first use, and what it holds then is what later reservations read.
  if (!start) start = EstimateFit(e, tried.total_gpus());
  if (f.fit_at_start && highest_placed_priority_ > StartPriority(wi)) {
    wait(ReasonCode::kPriority,
         [&] {
           return Str("priority: the ", tried.total_gpus(), " GPUs it needs were free at the start of this "
                      "pass but went to higher-priority work (priority ", highest_placed_priority_, " > ",
                      StartPriority(wi), ")");
         },
         start);
  } else {
    wait(f.reason, [&] { return f.detail; }, start);  // the shape's text, shared by its workloads
  }
  return true;
}

void SchedulingPass::Defer(uint32_t wi, const WorkloadDigest& d, int rest_key) {
  // Once the rest can only wait, much of it may be deferred: room for all
  // of it at once.
  if (rest_key >= 0 && deferred_.capacity() < unplaced_count_) deferred_.reserve(unplaced_count_);
  deferred_.push_back({wi, d.queue, d.id, static_cast<int8_t>(rest_key)});
  smallest_deferred_pod_gpus_ = std::min(smallest_deferred_pod_gpus_, d.gpus_per_pod);
}

int SchedulingPass::FindRestOutcome(const RestKey& key) const {
  for (size_t slot = key.Hash() % kRestSlots;; slot = (slot + 1) % kRestSlots) {
    const int i = rest_slots_[slot] - 1;
    if (i < 0 || rest_outcomes_[i].first == key) return i;
  }
}

int SchedulingPass::AddRestOutcome(const RestKey& key, RestOutcome outcome) {
  if (rest_outcomes_.size() >= kMaxRestKeys) return -1;
  size_t slot = key.Hash() % kRestSlots;
  while (rest_slots_[slot] != 0) slot = (slot + 1) % kRestSlots;
  rest_outcomes_.push_back({key, outcome});
  rest_slots_[slot] = static_cast<int8_t>(rest_outcomes_.size());
  return static_cast<int>(rest_outcomes_.size()) - 1;
}

void SchedulingPass::ProcessServiceGrow(uint32_t wi) {
  const Workload& w = snapshot_.workloads[wi];
  const Allocation& a = snapshot_.allocations[digests_[wi].allocation];
  const Eligibility& e = EligibilityOf(wi);
  if (!e.any_ok || w.gpus_per_pod <= 0 || w.gpus_per_pod > kMaxGpusPerNode) return;
  const int from = static_cast<int>(a.pods.size());
  const uint32_t usable = UsableReservations(wi);
  const PlacementRequest one{1, w.gpus_per_pod, {}};
  const ShapeKey key{e.key_id, w.gpus_per_pod, 1, 0, false, static_cast<int>(usable)};
  ResizeDecision r;
  r.workload = w.id;
  r.from_pods = from;
  for (int pods = from; pods < w.pods; ++pods) {
    if (quota_.Check(w.queue, w.gpus_per_pod, FreeUsableGpus()).admission == quota::Admission::kDenied) break;
    auto plan = TryPlace(e, one, usable, key);
    if (!plan) break;
    for (const PodPlacement& p : *plan) state_.Take(p.node, p.gpus);
    quota_.Add(w.queue, w.gpus_per_pod);
    r.added.insert(r.added.end(), plan->begin(), plan->end());
  }
  if (r.added.empty()) return;
  r.to_pods = from + static_cast<int>(r.added.size());
  r.detail = Str("autoscaler: ", from, " -> ", r.to_pods, " replicas (wants ", w.pods, ")");
  out_.resizes.push_back(std::move(r));
}

std::optional<std::vector<PodPlacement>> SchedulingPass::TryPlace(const Eligibility& e,
                                                                  const PlacementRequest& r,
                                                                  uint32_t usable_mask,
                                                                  const ShapeKey& key) {
  if (fit_failures_.count(key) != 0) return std::nullopt;
  auto plan = placer_.Place(state_, e, r, BlockedFor(usable_mask));
  if (!plan) fit_failures_.emplace(key, FitFailure{});
  return plan;
}

void SchedulingPass::Commit(uint32_t wi, std::vector<PodPlacement> pods, bool borrowed) {
  const Workload& w = snapshot_.workloads[wi];
  for (const PodPlacement& p : pods) state_.Take(p.node, p.gpus);
  quota_.Add(w.queue, GpuCount(pods));
  if (w.expected_duration > Duration::zero()) {
    placed_releases_.push_back({now_ + w.expected_duration, {w.queue, pods}});
    if (timeline_built_) timeline_.Add(now_ + w.expected_duration, w.queue, pods);
  }
  highest_placed_priority_ = std::max(highest_placed_priority_, StartPriority(wi));
  if (w.kind == WorkloadKind::kTraining && w.is_elastic()) {
    placed_elastic_now_.push_back({wi, static_cast<int>(out_.places.size())});
  }
  out_.places.push_back({w.id, std::move(pods), borrowed});
}

bool SchedulingPass::IsBorrowedPlacement(const Eligibility& e,
                                         const std::vector<PodPlacement>& pods) const {
  return std::any_of(pods.begin(), pods.end(),
                     [&](const PodPlacement& p) { return e.borrowed_pool[state_.class_of(p.node)] != 0; });
}

// ---------------------------------------------------------------------------
// Preemption and reclaim

bool SchedulingPass::TryPreempt(uint32_t wi, const Eligibility& e, const PlacementRequest& r,
                                bool within_guarantee) {
  const Workload& w = snapshot_.workloads[wi];
  // Compared with its victims without its requeued bonus.
  const int preempting = StartPriority(wi) - w.priority.resume_bonus;
  const auto fail_key = std::make_tuple(e.key_id, r.gpus_per_pod, r.pods,
                                        w.queue.value() * 2 + (within_guarantee ? 1u : 0u));
  auto failed = preempt_failures_.find(fail_key);
  if (failed != preempt_failures_.end() && failed->second >= preempting) return false;
  if (preemption_searches_ >= kMaxPreemptionSearches) return false;
  ++preemption_searches_;

  const Cluster& cluster = snapshot_.cluster;
  const PreemptionConfig& cfg = policy_.preemption;
  bool owns_semi = false;  // w's queue owns an eligible semi-dedicated class
  for (int c = 0; c < state_.class_count(); ++c) {
    owns_semi = owns_semi || (e.ok(c) && e.borrowed_pool[c] == 0 &&
                              cluster.pool(state_.node_class(c).pool).kind == PoolKind::kSemiDedicated);
  }
  std::vector<preemption::Candidate> candidates;
  for (uint32_t i = 0; i < snapshot_.allocations.size(); ++i) {
    const AllocState st = alloc_state_[i];
    if (st == AllocState::kClaimed || st == AllocState::kVictim || st == AllocState::kWaitedFor) continue;
    const Allocation& a = snapshot_.allocations[i];
    // Pods leaving since an earlier pass: their GPUs are coming back.
    if (!a.leaving.empty() && !leaving_claimed_[i] && st == AllocState::kLive) {
      const bool helps = std::any_of(a.leaving.begin(), a.leaving.end(), [&](const PodPlacement& p) {
        return p.node.value() < cluster.nodes.size() && e.ok(state_.class_of(p.node));
      });
      if (helps) {
        preemption::Candidate c;
        c.allocation = i;
        c.workload = a.workload;
        c.kind = preemption::CandidateKind::kLeaving;
        c.pods = a.leaving.data();
        c.pod_count = static_cast<uint32_t>(a.leaving.size());
        for (const PodPlacement& p : a.leaving) c.gpus += std::popcount(p.gpus);
        c.start = a.start_time;
        candidates.push_back(c);
      }
    }
    // Already shrinking: it is giving GPUs back, leave it be.
    if (removed_pods_.count(i) != 0) continue;
    const WorkloadDigest* v = nullptr;
    if (st == AllocState::kLive) {
      if (workload_of_[i] < 0) continue;
      // Cheap rejection, from the digest, before looking at its pods.
      v = &digests_[workload_of_[i]];
      if (v->id == w.id || !v->may_be_preempted) continue;
      const bool gap = preempting - v->priority >= cfg.min_priority_gap;
      if (gap && now_ - a.start_time < cfg.min_runtime) NoteTimeBound(a.start_time + cfg.min_runtime);
      const bool may_priority = gap && now_ - a.start_time >= cfg.min_runtime;
      const bool may_reclaim = within_guarantee && v->queue != w.queue;
      if (!may_priority && !may_reclaim && !owns_semi) continue;
    }
    bool helps = false;
    bool owners_pool = false;  // on a semi-dedicated pool that w's queue owns
    for (const PodPlacement& p : a.pods) {
      if (p.node.value() >= cluster.nodes.size()) continue;
      const int c = state_.class_of(p.node);
      if (!e.ok(c)) continue;
      helps = true;
      const Pool& pool = cluster.pool(state_.node_class(c).pool);
      if (pool.kind == PoolKind::kSemiDedicated && e.borrowed_pool[c] == 0) owners_pool = true;
    }
    if (!helps) continue;
    const int gpus = alloc_gpus_[i];
    if (st == AllocState::kTerminating) {
      preemption::Candidate c;
      c.allocation = i;
      c.workload = a.workload;
      c.kind = preemption::CandidateKind::kTerminating;
      c.pods = a.pods.data();
      c.pod_count = static_cast<uint32_t>(a.pods.size());
      c.gpus = gpus;
      c.start = a.start_time;
      candidates.push_back(c);
      continue;
    }
    // Why this victim may lose `lose` of its GPUs, if it may. Asked per
    // variant: a queue that cannot give up a whole elastic job may still give
    // up the pods above its minimum (the selector then guards the running
    // total, so the queue stays at or above its guarantee).
    const bool same_queue = v->queue == w.queue;
    auto classify = [&](int lose) -> std::optional<std::pair<PreemptCause, bool>> {
      if (owners_pool && !same_queue) return std::make_pair(PreemptCause::kReclaim, false);
      if (within_guarantee && !same_queue && quota_.tracked(v->queue) &&
          !placement::QueueWithin(snapshot_.queues, w.queue, v->queue) &&
          quota_.CanReclaimFrom(v->queue, lose)) {
        return std::make_pair(PreemptCause::kReclaim, true);
      }
      if (preempting - v->priority >= cfg.min_priority_gap &&
          now_ - a.start_time >= cfg.min_runtime &&
          (same_queue || !quota_.tracked(v->queue) || quota_.CanReclaimFrom(v->queue, lose))) {
        return std::make_pair(PreemptCause::kPriority, !same_queue);
      }
      return std::nullopt;
    };
    const Time checkpoint = std::max(a.last_checkpoint, a.start_time);
    const Workload* victim = &snapshot_.workloads[workload_of_[i]];
    auto add = [&](preemption::CandidateKind kind, const PodPlacement* pods, uint32_t count,
                   std::pair<PreemptCause, bool> why) {
      preemption::Candidate c;
      c.allocation = i;
      c.workload = v->id;
      c.queue = v->queue;
      c.kind = kind;
      c.pods = pods;
      c.pod_count = count;
      c.gpus = 0;
      for (uint32_t k = 0; k < count; ++k) c.gpus += std::popcount(pods[k].gpus);
      c.lost_gpu_seconds = LostGpuSeconds(victim, c.gpus, checkpoint, now_, cfg.default_grace);
      c.unsaved_gpu_seconds = UnsavedGpuSeconds(c.gpus, checkpoint, now_);
      c.priority = v->priority;
      c.start = a.start_time;
      c.cause = why.first;
      c.guard_queue = why.second;
      candidates.push_back(c);
    };
    if (v->kind == WorkloadKind::kTraining && v->elastic) {
      const int shrinkable = static_cast<int>(a.pods.size()) - std::max(1, v->min_pods);
      const auto why = shrinkable > 0 ? classify(std::popcount(a.pods.back().gpus)) : std::nullopt;
      for (int k = 0; why && k < shrinkable; ++k) {
        add(preemption::CandidateKind::kShrink, &a.pods[a.pods.size() - 1 - k], 1, *why);
      }
    }
    if (const auto why = classify(gpus)) {
      add(preemption::CandidateKind::kEvict, a.pods.data(), static_cast<uint32_t>(a.pods.size()), *why);
    }
  }
  // Candidates are ordered by the work they would lose, which grows with
  // the clock.
  if (!candidates.empty()) NoteTimeBound(now_);
  const std::vector<uint8_t>* blocked = BlockedFor(UsableReservations(wi));
  std::optional<preemption::Selection> selection;
  const bool one_node = r.total_gpus() <= e.static_max_node_gpus &&
                        !(r.topology.required && r.topology.level == TopologyLevel::kNvlink);
  if (one_node) {
    selection = preemption::SelectVictimsOnOneNode(state_, e, r, blocked, candidates, quota_);
  }
  if (!selection) {
    // Several nodes (or no single node suffices): the global cost order.
    preemption::SortCandidates(candidates);
    selection = preemption::SelectVictims(state_, e, r, blocked, candidates, quota_, placer_);
  }
  if (!selection) {
    preempt_failures_[fail_key] = std::max(failed == preempt_failures_.end() ? preempting : failed->second,
                                           preempting);
    return false;
  }

  // A preemption must have a beneficiary. A batch job that, starting when
  // its victims are gone, would finish after its deadline is rejected by
  // then (CheckBatchDeadline), and the GPUs it freed go to whoever comes
  // next: no victim is stopped for it.
  if (w.kind == WorkloadKind::kBatchInference && w.batch.deadline != kInfiniteFuture &&
      w.expected_duration > Duration::zero()) {
    Time gone = now_;
    for (int idx : selection->chosen) {
      const preemption::Candidate& c = candidates[idx];
      if (c.kind == preemption::CandidateKind::kTerminating) {
        gone = std::max(gone, EndOf(c.allocation) == kInfiniteFuture ? now_ : EndOf(c.allocation));
      } else {
        gone = std::max(gone, now_ + cfg.default_grace);
      }
    }
    if (gone + w.expected_duration > w.batch.deadline) return false;
  }

  // The plan's GPUs that are free now are the preemptor's as much as its
  // victims' are: later work in this pass must not take them. Otherwise
  // victims that leave at different times each see their GPUs refilled, the
  // preemptor never finds its whole room free, and it preempts again every
  // pass (lower-priority borrowers placed and reclaimed in a loop).
  for (const PodPlacement& p : selection->plan) {
    const GpuMask idle = p.gpus & state_.free_mask(p.node);
    if (idle != 0) state_.Take(p.node, idle);
  }
  // The preemptor's GPUs are spoken for: later work of its queue in this
  // pass must not reclaim again for the same guarantee.
  quota_.Add(w.queue, r.total_gpus());

  // A training preemptor stops its new victims just after their next
  // checkpoints when they would lose more GPU-time now than it waits
  // (core/preemption/checkpoint_wait.h). The clock was noted with the
  // candidates, so the next pass asks again.
  if (w.kind == WorkloadKind::kTraining && cfg.max_checkpoint_wait > Duration::zero()) {
    std::vector<preemption::UnsavedWork> victims;
    for (int idx : selection->chosen) {
      const preemption::Candidate& c = candidates[idx];
      if (c.kind != preemption::CandidateKind::kEvict && c.kind != preemption::CandidateKind::kShrink) continue;
      const Allocation& a = snapshot_.allocations[c.allocation];
      victims.push_back({&snapshot_.workloads[workload_of_[c.allocation]], c.gpus,
                         std::max(a.last_checkpoint, a.start_time)});
    }
    const preemption::StopTime stop =
        preemption::CheapestStopTime(victims, r.total_gpus(), now_, cfg.max_checkpoint_wait, cfg.default_grace);
    if (stop.at > now_) {
      // Its room is spoken for meanwhile: what is leaving already and the
      // victims it will stop are no one else's in this pass.
      for (int idx : selection->chosen) {
        const preemption::Candidate& c = candidates[idx];
        if (c.kind == preemption::CandidateKind::kLeaving) {
          leaving_claimed_[c.allocation] = 1;
        } else {
          alloc_state_[c.allocation] =
              c.kind == preemption::CandidateKind::kTerminating ? AllocState::kClaimed : AllocState::kWaitedFor;
        }
      }
      Wait(wi, ReasonCode::kAwaitingVictims,
           [&] {
             return Str("awaiting victims' checkpoints: stopping ", victims.size(), " victims at ",
                        TimeText(stop.at), " loses ", stop.lost_gpu_seconds, " GPU-s instead of ",
                        stop.lost_now_gpu_seconds, " now");
           },
           stop.at + cfg.default_grace);
      return true;
    }
  }

  // Apply: claim terminating GPUs, shrink elastic jobs, evict whole gangs.
  Time ready = now_;
  int n_new = 0;
  int n_terminating = 0;
  int freed = 0;
  std::map<uint32_t, std::vector<const preemption::Candidate*>> shrinks;
  for (int idx : selection->chosen) {
    const preemption::Candidate& c = candidates[idx];
    freed += c.gpus;
    if (c.kind == preemption::CandidateKind::kLeaving) {
      leaving_claimed_[c.allocation] = 1;
      ready = std::max(ready, now_ + cfg.default_grace);
      ++n_terminating;
    } else if (c.kind == preemption::CandidateKind::kTerminating) {
      alloc_state_[c.allocation] = AllocState::kClaimed;
      ready = std::max(ready, EndOf(c.allocation) == kInfiniteFuture ? now_ : EndOf(c.allocation));
      ++n_terminating;
    } else if (c.kind == preemption::CandidateKind::kShrink) {
      shrinks[c.allocation].push_back(&c);
    } else {
      const Workload& v = snapshot_.workloads[workload_of_[c.allocation]];
      const std::string why =
          c.cause == PreemptCause::kReclaim
              ? Str("reclaim: queue ", quota_.tracked(w.queue) ? quota_.name(w.queue) : "", " takes back ",
                    r.total_gpus(), " GPUs for ", w.name, "; ", c.lost_gpu_seconds,
                    " GPU-s since the victim's last checkpoint")
              : Str("priority: ", w.name, " (priority ", preempting, ") needs ", r.total_gpus(),
                    " GPUs; victim priority ", v.priority.value, ", ", c.lost_gpu_seconds,
                    " GPU-s since its last checkpoint");
      Preempt(c.allocation, c.cause, w.id, why);
      ready = std::max(ready, now_ + cfg.default_grace);
      ++n_new;
    }
  }
  for (auto& [alloc, pods] : shrinks) {
    const Allocation& a = snapshot_.allocations[alloc];
    std::vector<uint8_t>& removed = removed_pods_[alloc];
    removed.resize(a.pods.size(), 0);
    int before = 0;
    for (uint8_t x : removed) before += x ? 0 : 1;
    ResizeDecision rd;
    rd.workload = a.workload;
    rd.from_pods = before;
    rd.beneficiary = w.id;
    rd.grace_deadline = now_ + cfg.default_grace;
    int gpus = 0;
    for (const preemption::Candidate* c : pods) {
      removed[c->pods - a.pods.data()] = 1;
      rd.removed.push_back(*c->pods);
      gpus += c->gpus;
    }
    rd.to_pods = before - static_cast<int>(pods.size());
    rd.detail = Str("shrink: ", before, " -> ", rd.to_pods, " pods to make room for ", w.name, " (",
                    PreemptCauseName(pods.front()->cause), ")");
    quota_.RemoveLive(pods.front()->queue, gpus);
    placed_releases_.push_back({rd.grace_deadline, {pods.front()->queue, rd.removed}});
    if (timeline_built_) timeline_.Add(rd.grace_deadline, pods.front()->queue, rd.removed);
    ready = std::max(ready, rd.grace_deadline);
    ++n_new;
    out_.resizes.push_back(std::move(rd));
  }
  Wait(wi, ReasonCode::kAwaitingVictims,
       [&] {
         return Str("awaiting victims: ", n_new, " newly preempted and ", n_terminating, " terminating release ",
                    freed, " GPUs by ", TimeText(ready));
       },
       ready);
  return true;
}

void SchedulingPass::Preempt(uint32_t alloc, PreemptCause cause, WorkloadId preemptor, std::string detail) {
  const Allocation& a = snapshot_.allocations[alloc];
  const int gpus = alloc_gpus_[alloc];
  PreemptDecision d;
  d.victim = a.workload;
  d.preemptor = preemptor;
  d.cause = cause;
  d.notice_time = now_;
  d.grace_deadline = now_ + policy_.preemption.default_grace;
  const Workload* victim = workload_of_[alloc] >= 0 ? &snapshot_.workloads[workload_of_[alloc]] : nullptr;
  d.lost_gpu_seconds = LostGpuSeconds(victim, gpus, std::max(a.last_checkpoint, a.start_time), now_,
                                      policy_.preemption.default_grace);
  d.detail = std::move(detail);
  alloc_end_override_[alloc] = std::min(EndOf(alloc), d.grace_deadline);
  alloc_state_[alloc] = AllocState::kVictim;
  QueueId queue;
  if (workload_of_[alloc] >= 0) {
    queue = snapshot_.workloads[workload_of_[alloc]].queue;
    quota_.RemoveLive(queue, gpus);
  }
  if (timeline_built_) timeline_.Add(EndOf(alloc), queue, a.pods, static_cast<int32_t>(alloc));
  out_.preempts.push_back(std::move(d));
}

// ---------------------------------------------------------------------------
// Reservations and backfill

bool SchedulingPass::TryReserve(uint32_t wi, const Eligibility& e, const PlacementRequest& r, bool head) {
  const Workload& w = snapshot_.workloads[wi];
  // Head reservations have their own cap: they never take a slot from the
  // main phase's blocked work.
  if ((!head && static_cast<int>(reservations_.size()) - head_reservations_ >= kMaxReservations) ||
      r.total_gpus() <= 1) {
    return false;
  }
  const bool tracked = quota_.tracked(w.queue);
  if (tracked && reserved_queue_[w.queue.value()]) return false;
  ClusterState hypo = state_;
  const std::vector<uint8_t>* blocked = BlockedFor(0);
  ReleaseTimeline& timeline = Timeline();
  int probes = 0;
  for (size_t i = 0; timeline.At(i) != nullptr;) {
    const Time t = timeline.At(i)->at;
    for (const ReleaseEvent* ev; (ev = timeline.At(i)) != nullptr && ev->at == t; ++i) {
      if (!Stale(*ev) && ev->node.value() < static_cast<uint32_t>(hypo.node_count())) hypo.Release(ev->node, ev->gpus);
    }
    if (EligibleFree(hypo, e) < r.total_gpus()) continue;
    if (++probes > kMaxReservationProbes) break;
    auto plan = placer_.Place(hypo, e, r, blocked);
    if (!plan) continue;
    Reservation res{w.id, w.name, std::max(t, now_), {}};
    for (const PodPlacement& p : *plan) res.nodes.push_back(p.node.value());
    std::sort(res.nodes.begin(), res.nodes.end());
    res.nodes.erase(std::unique(res.nodes.begin(), res.nodes.end()), res.nodes.end());
    reservations_.push_back(std::move(res));
    blocked_.clear();
    if (tracked) reserved_queue_[w.queue.value()] = 1;
    return true;
  }
  return false;
}

uint32_t SchedulingPass::UsableReservations(uint32_t wi, int start_priority) const {
  const WorkloadDigest& w = digests_[wi];
  uint32_t mask = 0;
  for (size_t i = 0; i < reservations_.size(); ++i) {
    const Reservation& r = reservations_[i];
    const bool ends_before = policy_.backfill && w.expected_duration > Duration::zero() &&
                             now_ + w.expected_duration <= r.start;
    if (ends_before) NoteTimeBound(r.start - w.expected_duration);
    // A head reservation holds its nodes only against its own queue's work
    // that ranks after the holder.
    const bool not_held_against =
        r.only_queue.valid() &&
        (r.only_queue != w.queue || std::make_tuple(-start_priority, w.submit_time, w.id) <
                                        std::make_tuple(-r.rank, r.holder_submit, r.holder));
    if (r.holder == w.id || ends_before || not_held_against) mask |= 1u << i;
  }
  return mask;
}

const std::vector<uint8_t>* SchedulingPass::BlockedFor(uint32_t usable_mask) {
  const uint32_t all = (1u << reservations_.size()) - 1;
  if ((usable_mask & all) == all) return nullptr;
  auto [it, inserted] = blocked_.try_emplace(usable_mask);
  if (inserted) {
    it->second.assign(state_.node_count(), 0);
    for (size_t i = 0; i < reservations_.size(); ++i) {
      if (usable_mask & (1u << i)) continue;
      for (uint32_t n : reservations_[i].nodes) it->second[n] = 1;
    }
  }
  return &it->second;
}

// ---------------------------------------------------------------------------
// Explanations and estimates

const SchedulingPass::FitFailure& SchedulingPass::ExplainFit(const Workload& w, const Eligibility& e,
                                                             const PlacementRequest& r, const ShapeKey& key,
                                                             uint32_t usable_mask) {
  FitFailure& f = fit_failures_[key];
  if (!f.detail.empty()) return f;
  const int total = r.total_gpus();
  const placement::FitDiagnosis d = placer_.Diagnose(state_, e, r, BlockedFor(usable_mask));
  const std::string health =
      e.nodes_failing_health > 0 ? Str("; ", e.nodes_failing_health, " matching nodes are failed, not ready or cordoned")
                                 : std::string();
  f.fit_at_start = placer_.Place(*start_state_, e, r, nullptr).has_value();
  if (r.topology.required && r.topology.level != TopologyLevel::kNone && d.placeable_gpus >= total) {
    f.reason = ReasonCode::kTopology;
    f.detail = Str("topology: needs ", total, " GPUs in one ", LevelWord(r.topology.level), "; ",
                   d.free_gpus, " GPUs are free but the best ", LevelWord(r.topology.level), " has ",
                   d.best_domain_gpus);
  } else if (d.free_gpus >= total) {
    f.reason = ReasonCode::kFragmentation;
    f.detail = Str("fragmentation: needs ", r.pods, " x ", r.gpus_per_pod, " GPUs; ", d.free_gpus,
                   " GPUs are free on eligible nodes but only ", d.placeable_gpus, " in whole pods", health);
  } else if (r.pods > 1 || w.is_gang()) {
    f.reason = ReasonCode::kGang;
    f.detail = Str("gang: ", std::min(d.placeable_gpus, total), " of ", total, " GPUs fit", health);
  } else {
    f.reason = ReasonCode::kCapacity;
    f.detail = Str("capacity: needs ", total, " GPUs, ", d.free_gpus, " free on eligible nodes", health);
  }
  return f;
}

bool SchedulingPass::CountWait(ReasonCode reason) {
  if (IsCapacityReason(reason)) capacity_waits_ = true;
  return explain_waits_;
}

void SchedulingPass::Explain(uint32_t wi, ReasonCode reason, std::string detail, std::optional<Time> start) {
  if (Told(digests_[wi].id, reason)) return;
  // A batch job is rejected for its deadline only when even starting now
  // misses it (certain). The estimated start is not a bound either way (work
  // may end early, preemption may make room, higher-priority work may come
  // first), so a miss projected from it is reported, not enforced.
  const Workload& w = snapshot_.workloads[wi];
  if (wait_details_ && w.kind == WorkloadKind::kBatchInference && start && w.batch.deadline != kInfiniteFuture &&
      w.expected_duration > Duration::zero() && *start + w.expected_duration > w.batch.deadline) {
    detail += Str("; deadline at risk: starting at the estimated ", TimeText(*start), " it would finish ",
                  ToSeconds(*start + w.expected_duration - w.batch.deadline), " s after its deadline");
  }
  out_.waits.push_back({digests_[wi].id, reason, std::move(detail), start});
}

int SchedulingPass::FreeUsableGpus() const {
  int free = 0;
  for (int c = 0; c < state_.class_count(); ++c) {
    if (state_.node_class(c).usable) free += state_.class_free_gpus(c);
  }
  return free;
}

int SchedulingPass::EligibleFree(const ClusterState& state, const Eligibility& e) const {
  int free = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (e.ok(c)) free += state.class_free_gpus(c);
  }
  return free;
}

Time SchedulingPass::EndOf(uint32_t alloc) const {
  if (alloc_end_override_[alloc] != kInfiniteFuture) return alloc_end_override_[alloc];
  const Allocation& a = snapshot_.allocations[alloc];
  if (a.terminating) {
    // One due exactly now ties with the overdue ones at `now`, and goes
    // before them once the clock moves on.
    if (a.grace_deadline >= now_) NoteTimeBound(a.grace_deadline);
    return a.grace_deadline;
  }
  if (workload_of_[alloc] < 0) return kInfiniteFuture;
  // From the digest: the timeline asks this of every allocation, and most
  // passes build one.
  const Duration expected = digests_[workload_of_[alloc]].expected_duration;
  if (expected <= Duration::zero()) return kInfiniteFuture;
  const Time end = a.start_time + expected;
  if (end > now_) NoteTimeBound(end);
  return std::max(now_, end);
}

ReleaseTimeline& SchedulingPass::Timeline() {
  if (!timeline_built_) {
    timeline_ = ReleaseTimeline(snapshot_.allocations.size() + placed_releases_.size());
    for (uint32_t i = 0; i < snapshot_.allocations.size(); ++i) {
      const Allocation& a = snapshot_.allocations[i];
      const QueueId q = workload_of_[i] < 0 ? QueueId() : digests_[workload_of_[i]].queue;
      timeline_.Add(EndOf(i), q, a.pods, static_cast<int32_t>(i));
    }
    for (const auto& [at, held] : placed_releases_) timeline_.Add(at, held.first, held.second);
    timeline_built_ = true;
  }
  return timeline_;
}

std::optional<Time> SchedulingPass::EstimateFit(const Eligibility& e, int gpus) {
  auto [it, inserted] = fit_estimates_.try_emplace({e.key_id, gpus});
  if (!inserted) return it->second;
  int free = EligibleFree(state_, e);
  ReleaseTimeline& timeline = Timeline();
  for (size_t i = 0; const ReleaseEvent* ev = timeline.At(i); ++i) {
    if (Stale(*ev) || ev->node.value() >= static_cast<uint32_t>(state_.node_count())) continue;
    if (!e.ok(state_.class_of(ev->node))) continue;
    free += std::popcount(ev->gpus);
    if (free >= gpus) {
      it->second = std::max(ev->at, now_);
      break;
    }
  }
  return it->second;
}

std::optional<Time> SchedulingPass::EstimateQuota(QueueId q, int gpus) {
  if (!quota_.tracked(q) || gpus > quota_.guarantee(q)) return std::nullopt;
  int usage = quota_.usage(q);
  ReleaseTimeline& timeline = Timeline();
  for (size_t i = 0; const ReleaseEvent* ev = timeline.At(i); ++i) {
    if (Stale(*ev) || !placement::QueueWithin(snapshot_.queues, ev->queue, q)) continue;
    usage -= std::popcount(ev->gpus);
    if (usage + gpus <= quota_.guarantee(q)) return std::max(ev->at, now_);
  }
  return std::nullopt;
}

}  // namespace tidal::engine
