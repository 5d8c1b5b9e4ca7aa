// GPU quota over the queue tree.
//
// Usage u(q) counts every GPU held by q's workloads and its descendants',
// terminating ones included. The effective guarantee is
//   g(q) = min(q.guaranteed_gpus, g(parent)),
// so a parent's guarantee bounds its children's. Placing T GPUs for queue q:
//   - within guarantee when u(q) + T <= g(q): admitted, not borrowed;
//   - otherwise borrowing, admitted when both hold:
//     a) for q and every ancestor x with u(x) + T > g(x):
//        u(x) + T - g(x) <= x.borrowing_limit_gpus (unless unlimited);
//     b) the cluster keeps enough free GPUs for every other queue's protected
//        idle guarantee: free - T >= protected(q), where a queue x protects
//        min(idle(x), g(x) - x.lending_limit_gpus) (idle = max(0, g - u)) and
//        a parent protects at least what its children do, capped by its idle;
//        q and its ancestors protect nothing from q itself. (When nothing is
//        protected, a lack of free GPUs is left to placement to report.)
// Reclaim never takes a queue below its guarantee: a victim of q' is allowed
// only while live(q') - victim GPUs >= g(q'), where live usage leaves out
// GPUs already terminating or chosen as victims in this pass.
#ifndef TIDAL_CORE_QUOTA_QUOTA_TRACKER_H_
#define TIDAL_CORE_QUOTA_QUOTA_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/snapshot.h"

namespace tidal::quota {

enum class Admission { kWithinGuarantee, kBorrow, kDenied };

struct QuotaVerdict {
  Admission admission = Admission::kWithinGuarantee;
  int needed_gpus = 0;
  int guarantee_left_gpus = 0;  // max(0, g - u)
  int guarantee_gpus = 0;
  int may_borrow_gpus = 0;
};

class QuotaTracker {
 public:
  explicit QuotaTracker(const Snapshot& snapshot);
  // Queues only: the caller adds the snapshot's allocations with
  // AddAllocation (the engine does it in its own scan of the workloads).
  struct QueuesOnly {};
  QuotaTracker(const Snapshot& snapshot, QueuesOnly);
  // It keeps a reference to the snapshot's queues, which must outlive it.
  explicit QuotaTracker(Snapshot&&) = delete;
  QuotaTracker(Snapshot&&, QueuesOnly) = delete;

  // An allocation of the snapshot: `gpus` held by queue q (live unless
  // terminating).
  void AddAllocation(QueueId q, int gpus, bool terminating);

  // False for a workload without a (known) queue: no quota applies.
  bool tracked(QueueId q) const { return q.valid() && q.value() < queues_->size(); }

  // `free_gpus` is the number of free GPUs on usable nodes right now.
  QuotaVerdict Check(QueueId q, int gpus, int free_gpus) const;
  // Why a denied verdict of q's was denied, with its numbers: formatted
  // only where a wait's detail is wanted.
  std::string DeniedDetail(QueueId q, const QuotaVerdict& v) const;
  // The most a queue can ever hold (its guarantee plus borrowing limits),
  // or -1 when unbounded.
  int MaxEverGpus(QueueId q) const;

  // A placement (or grow) of `gpus` for q.
  void Add(QueueId q, int gpus);
  // GPUs of q chosen as victims in this pass: still used, no longer live.
  void RemoveLive(QueueId q, int gpus);
  // Whether taking `gpus` of victim queue v keeps it at or above guarantee.
  bool CanReclaimFrom(QueueId v, int gpus) const;
  // Whether any queue's live GPUs are above its guarantee: only then can
  // CanReclaimFrom hold for a tracked queue.
  bool AnyLiveAboveGuarantee() const;

  int usage(QueueId q) const { return usage_[q.value()]; }
  int live_usage(QueueId q) const { return live_[q.value()]; }
  int guarantee(QueueId q) const { return guarantee_[q.value()]; }
  int borrowed(QueueId q) const;
  // Weighted borrowed share, the fair-share key among borrowers.
  double BorrowShare(QueueId q) const;
  const std::string& name(QueueId q) const { return (*queues_)[q.value()].name; }

 private:
  void InitQueues(const Snapshot& snapshot);
  // Ancestry of q, q first; bounded against cycles in bad input.
  template <typename F>
  void ForEachAncestor(QueueId q, F f) const;
  int Protected(uint32_t x, const std::vector<uint8_t>& on_path) const;

  const std::vector<Queue>* queues_;
  std::vector<int> guarantee_;
  std::vector<int> usage_;
  std::vector<int> live_;
  std::vector<std::vector<uint32_t>> children_;
  std::vector<uint32_t> roots_;
  // Check's queues on the path to a root, kept so that a Check, asked for
  // every waiting workload of every pass, allocates nothing (a tracker is
  // one pass's, on one thread).
  mutable std::vector<uint8_t> on_path_;
  // Moves with every change of usage: a Check answers from the last
  // question's verdict while it is the same question of the same usage (a
  // backlog asks it once per waiting workload, in runs of one queue and
  // size, and a borrower's walks the whole queue tree).
  uint64_t usage_version_ = 0;
  struct LastCheck {
    QueueId q;
    int gpus = -1;
    int free_gpus = -1;
    uint64_t usage_version = 0;
    QuotaVerdict verdict;
  };
  mutable std::optional<LastCheck> last_check_;
};

}  // namespace tidal::quota

#endif  // TIDAL_CORE_QUOTA_QUOTA_TRACKER_H_
