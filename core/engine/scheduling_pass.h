// One scheduling pass over a snapshot. The phases, in order:
//   1. forced stops: non-inference work on shared nodes no longer lent
//      (inference return) and debug sessions past max_runtime;
//   2. inference services above their desired replica count shrink;
//   3. head reservations: each queue's first pending multi-GPU workload
//      that needs borrowing, ranked without the budget layer's borrowing
//      penalty, holds nodes against its own queue's work ranked after it;
//   4. main phase, in order (start priority desc, submit time, id) over
//      pending workloads and services below their desired count, merged
//      from the groups of the snapshot's waiting order when it has one
//      (a pass that explains nothing stops once the rest can only wait,
//      RestCanOnlyWait): admit what fits within its queue's guarantee;
//      otherwise preempt or reclaim (least-cost victims,
//      preemption/victim_selector.h), or reserve capacity for the
//      first blocked multi-GPU workload of each queue (at most
//      kMaxReservations) at the earliest time the release timeline frees
//      room for it. Later workloads use a reservation's nodes only when they
//      end (now + expected_duration) before it starts (backfill);
//   5. borrow phase: work that needs borrowed quota, taking turns by the
//      smallest weighted borrowed share (borrowed GPUs / queue weight);
//   6. grow phase: when nothing waits for capacity, elastic training grows
//      toward max_pods (also jobs placed in this pass, inside their Place).
// Every workload left waiting gets one WaitDecision with its dominant
// reason; ones that can never fit get a RejectDecision.
#ifndef TIDAL_CORE_ENGINE_SCHEDULING_PASS_H_
#define TIDAL_CORE_ENGINE_SCHEDULING_PASS_H_

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/engine/fits_someday.h"
#include "core/engine/release_timeline.h"
#include "core/model/decision.h"
#include "core/model/policy.h"
#include "core/model/snapshot.h"
#include "core/model/workload_index.h"
#include "core/placement/cluster_state.h"
#include "core/placement/eligibility.h"
#include "core/placement/gang_placer.h"
#include "core/preemption/victim_selector.h"
#include "core/quota/quota_tracker.h"

namespace tidal::engine {

inline constexpr int kMaxReservations = 4;
// Head reservations per pass (see HeadReservations), on top of
// kMaxReservations: at most 8 reservations in all.
inline constexpr int kMaxHeadReservations = 4;
static_assert(kMaxReservations + kMaxHeadReservations < 32, "SchedulingPass::RestKey packs it in 5 bits");
// A reservation search gives up after this many placement attempts.
inline constexpr int kMaxReservationProbes = 64;
// Victim searches per pass, highest-priority preemptors first; the rest try
// again next pass. Each search scans every allocation, so this bounds a pass
// in which thousands of higher-priority jobs queue up at once.
inline constexpr int kMaxPreemptionSearches = 32;

class SchedulingPass {
 public:
  // `classes` (may be null) are the snapshot cluster's static node classes.
  SchedulingPass(const PolicyConfig& policy, const Snapshot& snapshot,
                 std::shared_ptr<const StaticNodeClasses> classes = nullptr);
  // Starts from `start`, the snapshot's capacity as ClusterState would build
  // it (a caller's state kept across passes, see ClusterState::CatchUp),
  // which must outlive the pass; the snapshot must carry allocation_gpus.
  SchedulingPass(const PolicyConfig& policy, const Snapshot& snapshot, const ClusterState& start);
  // Whether Run returns a WaitDecision per waiting workload (see
  // ScheduleOptions); everything else it decides is the same either way.
  void set_explain_waits(bool explain) { explain_waits_ = explain; }
  // Whether each WaitDecision carries its detail text (ScheduleOptions).
  void set_wait_details(bool details) { wait_details_ = details; }
  // Waits the caller already holds, left out (ScheduleOptions::
  // told_reasons); read only without details.
  void set_told_reasons(std::span<const uint8_t> told) { told_reasons_ = told; }
  // Whether a pass that explains nothing stops walking its waiting work
  // once the rest can only wait (RestCanOnlyWait). On by default; the test
  // builds run a pass that stopped again without, and compare.
  void set_stop_when_only_waits_remain(bool stop) { stop_early_ = stop; }
  // Whether the pass takes its waiting work from the snapshot's waiting
  // order, when it has one, rather than sort it itself. On by default; the
  // test builds run such a pass again without, and compare.
  void set_take_the_waiting_order(bool take) { take_order_ = take; }
  // Kept across passes by the caller (may be null), validated here.
  void set_fits_someday(FitsSomeday* fits) {
    fits_ = fits;
    if (fits_ != nullptr) fits_->Validate(snapshot_);
  }
  Decisions Run();
  // After Run: whether the main phase stopped early.
  bool stopped_early() const { return stopped_early_; }
  // After Run: whether it took a shortcut that the whole walk, sorting its
  // waiting work itself, must agree with: it stopped early, took its
  // waiting work from the waiting order, or decided the waits of the rest
  // by RestKey.
  bool took_a_shortcut() const { return stopped_early_ || ordered_ || rest_only_waits_; }
  bool took_the_waiting_order() const { return ordered_; }
  // After Run: the pass read the clock only through comparisons whose
  // outcome holds for any `now` in [snapshot.now, quiet_until()), so a pass
  // over the same snapshot at such a time decides exactly what this one did.
  // Every comparison of the clock in a pass notes when its outcome could
  // change (NoteTimeBound): a debug session's max_runtime, a batch job's
  // latest start, a victim's min_runtime, a backfill's end against a
  // reservation, and each allocation's expected end (the release timeline
  // orders overdue ones at `now`, so the order changes when `now` passes a
  // later one). What varies with the clock continuously (the lost work that
  // orders preemption candidates, pods released `grace` from now) gives
  // snapshot.now: no later time is known to decide the same.
  Time quiet_until() const { return quiet_until_; }

 private:
  // kWaitedFor: running, but a preemptor waits for its checkpoint to stop
  // it (TryPreempt), so no one else may take it in this pass.
  enum class AllocState : uint8_t { kLive, kTerminating, kClaimed, kVictim, kWaitedFor };

  // The constructors' shared part, once state_ is made.
  void Init();
  enum class Phase { kMain, kBorrow };

  struct Reservation {
    WorkloadId holder;
    std::string holder_name;
    Time start;
    std::vector<uint32_t> nodes;
    // Valid for a head reservation: it holds the nodes only against this
    // queue's own work that ranks after the holder (rank, holder_submit,
    // holder); other queues' work is ordered by priority as before.
    QueueId only_queue;
    int rank = 0;
    Time holder_submit;
  };

  // Why a shape did not fit, cached for the pass: capacity only shrinks.
  struct FitFailure {
    ReasonCode reason = ReasonCode::kCapacity;
    std::string detail;
    bool fit_at_start = false;  // it would have fit before this pass placed anything
  };
  using ShapeKey = std::tuple<int, int, int, int, bool, int>;

  void ForcedStops();
  void ShrinkServices();
  // Before the main phase: each queue's oldest pending multi-GPU workload
  // that needs borrowing reserves its nodes against the queue's own later
  // work. Borrowing work ranks below the queue's work within the guarantee
  // (the budget layer of its priority) and is placed only in the borrow
  // phase, so without this the queue's small jobs take every GPU that frees
  // up first and a big gang starves behind its own queue.
  void HeadReservations();
  // Priority with the budget layer's borrowing penalty added back.
  int QueueRank(uint32_t wi) const;
  // The priority workload `wi` has in this pass: a waiting one's
  // borrowing_start_delta is settled on the GPUs its queue holds at the
  // start of the pass (Init); a placed one's is its stored value.
  int StartPriority(uint32_t wi) const {
    const WorkloadDigest& d = digests_[wi];
    if (d.allocation >= 0) return d.priority;
    return d.priority + BorrowingShift(d.queue, d.min_pods * d.gpus_per_pod, d.borrowing_start_delta);
  }
  // What a waiting workload of `queue` with gang minimum `min_gpus` adds to
  // its priority for a start: its `borrowing_start_delta` when the start
  // would take the queue above its guarantee.
  int BorrowingShift(QueueId queue, int min_gpus, int borrowing_start_delta) const {
    if (borrowing_start_delta == 0) return 0;
    const uint32_t q = queue.value();
    const bool borrows = q < held_gpus_.size() && held_gpus_[q] + min_gpus > snapshot_.queues[q].guaranteed_gpus;
    return borrows ? borrowing_start_delta : 0;
  }
  void MainPhase();
  // Whether nothing the pass could still do for the work after this point
  // (ranked at most `next_priority`, its smallest pod `smallest_pod_gpus`)
  // or for the work deferred to the borrow phase is anything but a wait or
  // a never-fits reject, so that a pass that explains nothing may stop
  // walking it:
  //  - no usable node has as many GPUs free as the smallest pod of that
  //    work asks (capacity only shrinks within a pass), so nothing is
  //    placed, and nothing is grown either: no GPU is free, or something
  //    already waits for capacity, or no elastic job runs;
  //  - no victim search can succeed: the searches' cap is reached, or
  //    nothing is terminating or leaving (GPUs a preemptor could claim),
  //    no pool is semi-dedicated (owner reclaim), no reclaim (no queue is
  //    above its guarantee, or none with waiting work is below its own),
  //    and the highest priority left to preempt with is less than
  //    min_priority_gap above the lowest live victim's.
  // Then the borrow and grow phases decide nothing either. Reservations the
  // rest would make change no decision: they only hold capacity against
  // placements and victim searches, and neither can succeed.
  bool RestCanOnlyWait(int next_priority, int smallest_pod_gpus);
  // The most GPUs free on one usable node now.
  int MostFreeOnANode() const;
  // The lowest priority of a live allocation a preemptor could evict at
  // the start of the pass (victims only leave it), or a huge value if none.
  int64_t LowestVictimPriority();
  // A workload's place in the main phase's order (its start priority,
  // index, submit time, id), compared by WaitingOrder::Before: a comparator
  // that read the workloads would touch two ~1 KB records per comparison.
  // Ids are unique, so the order is total.
  using OrderKey = WaitingOrder::Entry;
  // After a stop: what the whole walk would still decide for workload `wi`
  // (id `id`) of the rest, a never-fits reject, added to `rejects`.
  void RejectIfNeverFits(uint32_t wi, WorkloadId id, std::vector<std::pair<OrderKey, RejectDecision>>& rejects);
  // After a stop over the waiting order: RejectIfNeverFits for each
  // workload of the rest (in each group g, from next[g] on) that the
  // fits-someday set has not settled, and what it then settles.
  void AskTheRestOfTheOrder(const std::vector<size_t>& next,
                            std::vector<std::pair<OrderKey, RejectDecision>>& rejects);

  void BorrowPhase();
  void GrowPhase();

  // What a waiting workload gets before any capacity is looked at, in
  // ProcessStart and in a stopped pass's check of the rest alike: a wait
  // for approval, a wait at zero replicas, a reject (in `reject`: a bad pod
  // size, or NeverFits), or on to placement.
  enum class Screen { kAwaitingApproval, kScaledToZero, kRejected, kGoOn };
  Screen ScreenStart(uint32_t wi, std::optional<RejectDecision>& reject);
  // Whether ScreenStart goes on by the digest alone, reading no record:
  // work some pass found able to fit, with a valid pod size, not awaiting
  // approval, not a service.
  bool PassesScreenOnDigest(const WorkloadDigest& d) const {
    return !d.awaiting_approval && d.state != WorkloadState::kAwaitingApproval && d.gpus_per_pod > 0 &&
           d.gpus_per_pod <= kMaxGpusPerNode && d.kind != WorkloadKind::kInference && fits_ != nullptr &&
           fits_->Has(d.id);
  }
  // Whether workload `id` holds a reservation (a head reservation): its
  // start is that reservation's, so no RestKey decides it.
  bool HoldsAReservation(WorkloadId id) const {
    return std::any_of(reservations_.begin(), reservations_.end(), [&](const Reservation& r) { return r.holder == id; });
  }
  // What ProcessStart's outcome for a workload of the rest depends on once
  // the rest can only wait (RestCanOnlyWait), the pass explaining without
  // details: its eligibility, pod size, gang minimum, desired pods,
  // topology level and whether required, usable reservations, queue, the
  // reservations made so far, whether higher-priority work was placed, and
  // the phase (main or borrow).
  // (The workload's own reservation, as head, is excluded: its start is
  // that reservation's.) Nothing is placed or preempted from then on, so
  // the quota, capacity and timeline it is decided on stay as they are.
  // Packed into three words: a pass compares it once per workload of the
  // rest. The third holds the usable mask (bits 32-63), pod size (16-23),
  // topology level (8-15), reservations made (3-7: at most
  // kMaxReservations + kMaxHeadReservations), required (2), higher-priority
  // work placed (1) and the phase (0).
  class RestKey {
   public:
    RestKey(int eligibility, int gpus_per_pod, int min_pods, int desired, TopologyConstraint topology,
            uint32_t usable, QueueId queue, int reservations, bool higher_placed, Phase phase)
        : a_(Pack(eligibility, min_pods)),
          b_(Pack(desired, static_cast<int>(queue.value()))),
          c_(uint64_t{usable} << 32 | uint64_t{static_cast<uint8_t>(gpus_per_pod)} << 16 |
             uint64_t{static_cast<uint8_t>(topology.level)} << 8 | uint64_t{static_cast<uint8_t>(reservations & 0x1f)} << 3 |
             uint64_t{topology.required} << 2 | uint64_t{higher_placed} << 1 | uint64_t{phase == Phase::kBorrow}) {}
    int reservations() const { return static_cast<int>((c_ >> 3) & 0x1f); }
    RestKey InPhase(Phase phase) const {
      RestKey k = *this;
      k.c_ = (c_ & ~uint64_t{1}) | uint64_t{phase == Phase::kBorrow};
      return k;
    }
    bool operator==(const RestKey&) const = default;
    // Mixes the three words (a multiply-xorshift per word): the keys of a
    // pass differ in few bits, so each word is spread before it is folded.
    size_t Hash() const {
      uint64_t h = 0;
      for (uint64_t w : {a_, b_, c_}) {
        h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
      }
      return static_cast<size_t>(h);
    }

   private:
    static uint64_t Pack(int x, int y) { return uint64_t{static_cast<uint32_t>(x)} << 32 | static_cast<uint32_t>(y); }
    uint64_t a_, b_, c_;
  };
  struct RestOutcome {
    std::optional<ReasonCode> reason;  // none: deferred to the borrow phase
    std::optional<Time> start;
    // A deferral's: the index in rest_outcomes_ of the same key in the
    // borrow phase, once found there (-1: not yet).
    int8_t in_borrow_phase = -1;
  };
  // Work deferred to the borrow phase, with what that phase reads of it
  // (its digest is not read again).
  struct Deferred {
    uint32_t workload;
    QueueId queue;
    WorkloadId id;
    int8_t rest_key;  // its main-phase RestKey's index in rest_outcomes_, or -1
  };
  // Returns false when the workload was deferred to the borrow phase.
  bool ProcessStart(uint32_t wi, Phase phase);
  // The RestKey in `phase` of a waiting workload of digest `d`, eligibility
  // `e`, usable reservations `usable` and start priority `start_priority`.
  RestKey RestKeyOf(const WorkloadDigest& d, const placement::Eligibility& e, uint32_t usable, int start_priority,
                    Phase phase) const;
  // Once the rest can only wait: decides workload `wi` of the rest (start
  // priority `start_priority`) in the main phase from the outcome of its
  // RestKey, read from the digest alone, and says whether it could. It
  // cannot for work the screening of ProcessStart would stop or read the
  // record for, for a reservation's holder, and for a key not decided yet:
  // ProcessStart decides those.
  bool DecideByRestKey(uint32_t wi, int start_priority);
  // In the borrow phase, once the rest can only wait: waits deferred work
  // `x` by the outcome of its main-phase key in this phase, and says
  // whether it could (no reservation was made since, and the key in this
  // phase was decided).
  bool WaitByMainPhaseKey(const Deferred& x);
  // The wait of a workload of the rest (id `id`) by a known outcome.
  void WaitKnown(WorkloadId id, const RestOutcome& known) {
    if (CountWait(*known.reason) && !Told(id, *known.reason)) {
      out_.waits.push_back({id, *known.reason, std::string(), known.start});
    }
  }
  // Whether the caller holds workload `id`'s wait for `reason` already
  // (set_told_reasons), in a pass that explains without details.
  bool Told(WorkloadId id, ReasonCode reason) const {
    return !wait_details_ && id.value() < told_reasons_.size() &&
           told_reasons_[id.value()] == static_cast<uint8_t>(reason);
  }
  // Gives workload `wi` of digest `d` the known outcome rest_outcomes_
  // [found]: its wait, or a deferral to the borrow phase. Returns false
  // when it was deferred (as ProcessStart does).
  bool TakeKnownOutcome(uint32_t wi, const WorkloadDigest& d, int found);
  // Defers workload `wi` of digest `d` (RestKey `rest_key`, an index in
  // rest_outcomes_ or -1) to the borrow phase.
  void Defer(uint32_t wi, const WorkloadDigest& d, int rest_key);
  const placement::Eligibility& EligibilityOf(uint32_t wi);
  void ProcessServiceGrow(uint32_t wi);
  std::optional<RejectDecision> NeverFits(const Workload& w, const placement::Eligibility& e,
                                          int min_gpus);

  std::optional<std::vector<PodPlacement>> TryPlace(const placement::Eligibility& e,
                                                    const placement::PlacementRequest& r,
                                                    uint32_t usable_mask, const ShapeKey& key);
  void Commit(uint32_t wi, std::vector<PodPlacement> pods, bool borrowed);
  bool TryPreempt(uint32_t wi, const placement::Eligibility& e,
                  const placement::PlacementRequest& r, bool within_guarantee);
  bool TryReserve(uint32_t wi, const placement::Eligibility& e,
                  const placement::PlacementRequest& r, bool head = false);
  const FitFailure& ExplainFit(const Workload& w, const placement::Eligibility& e,
                               const placement::PlacementRequest& r, const ShapeKey& key,
                               uint32_t usable_mask);

  // A wait decision for workload `wi`. `make_detail()` gives its text and
  // is called only when the pass explains its waits with details
  // (ScheduleOptions): a pass that does not formats no text per waiting
  // workload.
  template <typename MakeDetail>
  void Wait(uint32_t wi, ReasonCode reason, MakeDetail make_detail, std::optional<Time> start) {
    if (CountWait(reason)) Explain(wi, reason, wait_details_ ? make_detail() : std::string(), start);
  }
  // Notes what a wait for `reason` means for this pass's later phases, and
  // says whether to explain it.
  bool CountWait(ReasonCode reason);
  void Explain(uint32_t wi, ReasonCode reason, std::string detail, std::optional<Time> start);
  void Preempt(uint32_t alloc, PreemptCause cause, WorkloadId preemptor, std::string detail);

  // Reservations whose nodes workload w may still use (bit r = reservation r).
  uint32_t UsableReservations(uint32_t wi) const { return UsableReservations(wi, StartPriority(wi)); }
  // The same for a waiting workload of start priority `start_priority`.
  uint32_t UsableReservations(uint32_t wi, int start_priority) const;
  const std::vector<uint8_t>* BlockedFor(uint32_t usable_mask);
  int FreeUsableGpus() const;
  int EligibleFree(const ClusterState& state, const placement::Eligibility& e) const;
  // The release timeline, built on first use.
  ReleaseTimeline& Timeline();
  std::optional<Time> EstimateFit(const placement::Eligibility& e, int gpus);
  std::optional<Time> EstimateQuota(QueueId q, int gpus);
  bool IsBorrowedPlacement(const placement::Eligibility& e, const std::vector<PodPlacement>& pods) const;
  Time EndOf(uint32_t alloc) const;
  // An allocation's event from before it was preempted.
  bool Stale(const ReleaseEvent& e) const {
    return e.alloc >= 0 && EndOf(static_cast<uint32_t>(e.alloc)) != e.at;
  }

  // The outcome of a comparison of the clock may change at `t` (see
  // quiet_until).
  void NoteTimeBound(Time t) const { quiet_until_ = std::min(quiet_until_, t); }

  const PolicyConfig& policy_;
  const Snapshot& snapshot_;
  const Time now_;
  Decisions out_;
  // Noted by const readers of the clock too (EndOf, UsableReservations).
  mutable Time quiet_until_ = kInfiniteFuture;

  std::vector<int> workload_of_;     // per allocation: its workload or -1
  std::vector<int> alloc_gpus_;      // per allocation, filled by state_
  ClusterState state_;
  // Capacity before this pass placed anything: the caller's start state,
  // or own_start_ (a copy of state_ made in Run) when there is none.
  const ClusterState* start_state_ = nullptr;
  std::unique_ptr<ClusterState> own_start_;
  placement::EligibilityIndex eligibility_;
  // Per workload, its entry of eligibility_ once looked up: the main and
  // borrow phases both process work that needs borrowing, and the key is a
  // string built from the workload's constraints.
  std::vector<const placement::Eligibility*> eligibility_of_;
  quota::QuotaTracker quota_;
  placement::GangPlacer placer_;

  // Per queue, its own GPUs at the start of the pass, as the State counts
  // them (StartPriority).
  std::vector<int> held_gpus_;
  // Per workload: the snapshot's digests, or own_digests_ made from the
  // records when the snapshot has none.
  const WorkloadDigest* digests_ = nullptr;
  std::vector<WorkloadDigest> own_digests_;
  std::vector<AllocState> alloc_state_;
  std::vector<Time> alloc_end_override_;  // victims end at their grace deadline
  // Pods already leaving (Allocation::leaving) or chosen for a shrink in
  // this pass, per allocation.
  std::map<uint32_t, std::vector<uint8_t>> removed_pods_;
  // Allocations whose snapshot `leaving` pods a preemptor waits for.
  std::vector<uint8_t> leaving_claimed_;

  std::vector<Reservation> reservations_;
  int head_reservations_ = 0;  // of reservations_, made by HeadReservations
  std::vector<uint8_t> reserved_queue_;  // per queue: holds a reservation
  std::map<uint32_t, std::vector<uint8_t>> blocked_;  // by usable-reservation mask

  std::map<ShapeKey, FitFailure> fit_failures_;
  std::map<std::tuple<int, int, int, uint32_t>, int> preempt_failures_;  // -> highest failed priority
  std::map<std::pair<int, int>, std::optional<Time>> fit_estimates_;

  ReleaseTimeline timeline_;
  bool timeline_built_ = false;
  std::vector<std::pair<Time, std::pair<QueueId, std::vector<PodPlacement>>>> placed_releases_;

  std::vector<Deferred> deferred_;  // borrowers, in main-phase order
  // Sorted out of the workloads in one scan, in index order: pending or
  // awaiting approval without an allocation; services with an allocation;
  // elastic training with an allocation; debug allocations.
  std::vector<uint32_t> unplaced_;
  // How many workloads are unplaced, and whether unplaced_ lists them (a
  // pass over a kept waiting order lists them only when it will not take
  // the order).
  size_t unplaced_count_ = 0;
  bool unplaced_listed_ = true;
  // Whether the snapshot's waiting order holds unplaced_ (Snapshot::
  // waiting_order): the main phase and head reservations walk it.
  bool ordered_ = false;
  std::vector<uint32_t> placed_services_;
  std::vector<uint32_t> placed_elastic_;
  // Elastic training placed in this pass: (workload, its Place decision).
  std::vector<std::pair<uint32_t, int>> placed_elastic_now_;
  std::vector<uint32_t> debug_allocs_;
  bool capacity_waits_ = false;
  bool explain_waits_ = true;
  bool wait_details_ = true;
  std::span<const uint8_t> told_reasons_;
  bool stop_early_ = true;
  bool take_order_ = true;
  FitsSomeday* fits_ = nullptr;
  bool stopped_early_ = false;
  // The rest can only wait in a pass that explains without details: from
  // then on the first workload of a RestKey decides it for all
  // (DecideByRestKey, WaitByMainPhaseKey).
  bool rest_only_waits_ = false;
  // A pass has a few keys (about twenty over Philly's backlog), each looked
  // up once per workload of the rest and phase: a list, found through an
  // open-addressed table of its indices plus one (0: empty).
  std::vector<std::pair<RestKey, RestOutcome>> rest_outcomes_;
  static constexpr size_t kMaxRestKeys = 64;  // past it, the rest is decided in full
  static_assert(kMaxRestKeys <= 127, "an index in rest_outcomes_ is an int8_t");
  static constexpr size_t kRestSlots = 4 * kMaxRestKeys;  // at most a quarter full
  std::array<int8_t, kRestSlots> rest_slots_{};
  // The index in rest_outcomes_ of `key`, or -1.
  int FindRestOutcome(const RestKey& key) const;
  // Adds `key`'s outcome when there is room (kMaxRestKeys), and returns its
  // index, or -1.
  int AddRestOutcome(const RestKey& key, RestOutcome outcome);
  // For RestCanOnlyWait, from the scan in Init: the queues with waiting
  // work, and whether any allocation is terminating or has pods leaving, or
  // any pool is semi-dedicated.
  std::vector<QueueId> waiting_queues_;
  bool claimable_or_owned_ = false;
  int smallest_deferred_pod_gpus_ = std::numeric_limits<int>::max();
  // LowestVictimPriority, found on first use.
  std::optional<int64_t> lowest_victim_priority_;
  int preemption_searches_ = 0;
  int highest_placed_priority_ = std::numeric_limits<int>::min();
};

}  // namespace tidal::engine

#endif  // TIDAL_CORE_ENGINE_SCHEDULING_PASS_H_
