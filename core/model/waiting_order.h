// The workloads waiting to start, kept in order next to
// Snapshot::workload_digests by whoever keeps those (state::State), so that
// a pass takes its waiting work in order without sorting it: over a backlog
// thousands deep, building and heaping the order was most of every pass.
//
// A pass orders waiting work by start priority (desc), submit time, id. A
// start priority is the stored one plus, when the start would take the
// queue above its guarantee, the budget layer's borrowing_start_delta
// (SchedulingPass::StartPriority): so it shifts alike for every workload of
// one queue, one delta and one gang minimum. The order keeps one group per
// such triple, each sorted by stored priority, submit time and id, which
// is the pass's order within it; a pass merges the groups' heads. Entries
// name their workload's index in Snapshot::workloads, and whoever moves a
// workload moves its entry (Move).
//
// The order also logs its inserts, so that whoever checks each waiting
// workload once (engine::FitsSomeday: "can this ever fit?") asks only about
// work inserted since it last looked, not about the whole backlog every
// pass. The log keeps at most twice the order's size plus kMinLog inserts:
// a reader that fell further behind is told so and checks everything.
#ifndef TIDAL_CORE_MODEL_WAITING_ORDER_H_
#define TIDAL_CORE_MODEL_WAITING_ORDER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/change_stamp.h"
#include "core/model/cluster.h"
#include "core/model/workload_digest.h"

namespace tidal {

class WaitingOrder {
 public:
  struct Entry {
    int32_t priority = 0;   // Priority::value
    uint32_t workload = 0;  // index into Snapshot::workloads
    Time submit;
    WorkloadId id;
    bool operator==(const Entry&) const = default;
  };
  // Waiting work of one queue, borrowing delta and gang minimum.
  struct Group {
    QueueId queue;
    int32_t borrowing_start_delta = 0;
    int32_t min_gpus = 0;  // min_pods x gpus_per_pod
    std::vector<Entry> entries;  // by Before
    bool operator==(const Group&) const = default;
  };
  // An insert as the log keeps it: its group and entry, as they were then.
  struct Inserted {
    QueueId queue;
    int32_t borrowing_start_delta = 0;
    int32_t min_gpus = 0;
    Entry entry;  // its workload index may have moved since (Locate)
  };
  static constexpr size_t kMinLog = 1024;

  // Whether a workload of digest `d` is in the order: pending or awaiting
  // approval, without an allocation.
  static bool Waits(const WorkloadDigest& d) {
    return d.allocation < 0 &&
           (d.state == WorkloadState::kPending || d.state == WorkloadState::kAwaitingApproval);
  }
  // Whether entry `x` comes before `y`.
  static bool Before(const Entry& x, const Entry& y) {
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.submit != y.submit) return x.submit < y.submit;
    return x.id < y.id;
  }
  // The order of `digests` (index i is workload i), built whole.
  static WaitingOrder Of(std::span<const WorkloadDigest> digests);

  // Workload `index`'s digest changed from `before` (null: it is new) to
  // `after` (null: it is gone).
  void Update(const WorkloadDigest* before, const WorkloadDigest* after, uint32_t index);
  // The workload of digest `d` moved to index `to`.
  void Move(const WorkloadDigest& d, uint32_t to);
  void Clear() { *this = WaitingOrder(); }
  // Whether it holds every waiting workload of its snapshot: set by whoever
  // keeps it from the first workload on (state::State), and by Of. A pass
  // trusts a kept order to list the waiting work instead of finding it.
  bool kept() const { return kept_; }
  void MarkKept() { kept_ = true; }

  // By queue, delta, gang minimum; none is empty.
  std::span<const Group> groups() const { return groups_; }
  size_t size() const { return size_; }
  // How many entries' workloads have pods of g GPUs (1..kMaxGpusPerNode;
  // other sizes are not counted).
  int pods_of_gpus(int g) const { return by_gpus_per_pod_[g]; }

  // The log's numbering: no other order in this process, a copy of this
  // one included, has this lineage, so that an insert count read from one
  // order is never taken for another's.
  uint64_t log_lineage() const { return log_lineage_.lineage(); }
  // How many inserts there have been.
  uint64_t inserts() const { return log_start_ + log_.size(); }
  // The inserts from the `from`th on, oldest first; none when the log no
  // longer reaches back that far.
  std::optional<std::span<const Inserted>> InsertsFrom(uint64_t from) const;
  // Where an insert's entry is now, as (group, position in it): none when
  // it is no longer in the order as it was inserted (it left, or changed
  // and was inserted again, which the log holds too).
  std::optional<std::pair<size_t, size_t>> Locate(const Inserted& x) const;

  // The same waiting work in the same order (the log is not compared).
  bool operator==(const WaitingOrder& o) const {
    return groups_ == o.groups_ && size_ == o.size_ && by_gpus_per_pod_ == o.by_gpus_per_pod_ && kept_ == o.kept_;
  }

 private:
  static Entry EntryOf(const WorkloadDigest& d, uint32_t index) {
    return Entry{d.priority, index, d.submit_time, d.id};
  }
  // The index of the first group not before (queue, delta, min_gpus).
  size_t LowerGroup(QueueId queue, int32_t delta, int32_t min_gpus) const;
  // The group of `d`, made when `make` (else null when there is none).
  Group* GroupOf(const WorkloadDigest& d, bool make);
  // The entry of the workload of `d` (`index` may be stale).
  Entry& Find(Group& group, const WorkloadDigest& d);
  void Insert(const WorkloadDigest& d, uint32_t index);
  void Erase(const WorkloadDigest& d);

  std::vector<Group> groups_;
  size_t size_ = 0;
  std::array<int32_t, kMaxGpusPerNode + 1> by_gpus_per_pod_{};
  bool kept_ = false;
  std::vector<Inserted> log_;
  uint64_t log_start_ = 0;  // how many inserts went before log_[0]
  // Only its lineage is used: a copy gets a new one, a move keeps it.
  ChangeStamp log_lineage_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_WAITING_ORDER_H_
