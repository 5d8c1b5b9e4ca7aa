#include "core/quota/quota_tracker.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "core/explain/text.h"

namespace tidal::quota {
namespace {
constexpr int kMaxDepth = 64;
}  // namespace

template <typename F>
void QuotaTracker::ForEachAncestor(QueueId q, F f) const {
  uint32_t x = q.value();
  for (int depth = 0; x < queues_->size() && depth < kMaxDepth; ++depth) {
    f(x);
    const QueueId parent = (*queues_)[x].parent;
    if (!parent.valid()) break;
    x = parent.value();
  }
}

QuotaTracker::QuotaTracker(const Snapshot& snapshot) : queues_(&snapshot.queues) {
  InitQueues(snapshot);
  std::unordered_map<WorkloadId, QueueId> queue_of;
  queue_of.reserve(snapshot.workloads.size());
  for (const Workload& w : snapshot.workloads) queue_of.emplace(w.id, w.queue);
  for (const Allocation& a : snapshot.allocations) {
    auto it = queue_of.find(a.workload);
    if (it == queue_of.end()) continue;
    AddAllocation(it->second, a.gpu_count(), a.terminating);
  }
}

QuotaTracker::QuotaTracker(const Snapshot& snapshot, QueuesOnly) : queues_(&snapshot.queues) {
  InitQueues(snapshot);
}

void QuotaTracker::InitQueues(const Snapshot& snapshot) {
  const size_t n = snapshot.queues.size();
  guarantee_.assign(n, 0);
  usage_.assign(n, 0);
  live_.assign(n, 0);
  children_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int g = snapshot.queues[i].guaranteed_gpus;
    ForEachAncestor(QueueId(static_cast<uint32_t>(i)),
                    [&](uint32_t x) { g = std::min(g, snapshot.queues[x].guaranteed_gpus); });
    guarantee_[i] = std::max(g, 0);
    const QueueId parent = snapshot.queues[i].parent;
    if (parent.valid() && parent.value() < n && parent.value() != i) {
      children_[parent.value()].push_back(static_cast<uint32_t>(i));
    } else {
      roots_.push_back(static_cast<uint32_t>(i));
    }
  }
}

void QuotaTracker::AddAllocation(QueueId q, int gpus, bool terminating) {
  if (!tracked(q)) return;
  ++usage_version_;
  ForEachAncestor(q, [&](uint32_t x) {
    usage_[x] += gpus;
    if (!terminating) live_[x] += gpus;
  });
}

int QuotaTracker::borrowed(QueueId q) const {
  return std::max(0, usage_[q.value()] - guarantee_[q.value()]);
}

double QuotaTracker::BorrowShare(QueueId q) const {
  const double weight = (*queues_)[q.value()].weight;
  return borrowed(q) / (weight > 0 ? weight : 1e-9);
}

void QuotaTracker::Add(QueueId q, int gpus) {
  if (!tracked(q)) return;
  ++usage_version_;
  ForEachAncestor(q, [&](uint32_t x) {
    usage_[x] += gpus;
    live_[x] += gpus;
  });
}

void QuotaTracker::RemoveLive(QueueId q, int gpus) {
  if (!tracked(q)) return;
  ForEachAncestor(q, [&](uint32_t x) { live_[x] -= gpus; });
}

bool QuotaTracker::CanReclaimFrom(QueueId v, int gpus) const {
  if (!tracked(v)) return true;
  return live_[v.value()] - gpus >= guarantee_[v.value()];
}

bool QuotaTracker::AnyLiveAboveGuarantee() const {
  for (size_t q = 0; q < live_.size(); ++q) {
    if (live_[q] > guarantee_[q]) return true;
  }
  return false;
}

int QuotaTracker::MaxEverGpus(QueueId q) const {
  if (!tracked(q)) return -1;
  int most = -1;
  ForEachAncestor(q, [&](uint32_t x) {
    const int limit = (*queues_)[x].borrowing_limit_gpus;
    if (limit == kUnlimited) return;
    const int cap = guarantee_[x] + limit;
    most = most < 0 ? cap : std::min(most, cap);
  });
  return most;
}

int QuotaTracker::Protected(uint32_t x, const std::vector<uint8_t>& on_path) const {
  const Queue& queue = (*queues_)[x];
  const int idle = std::max(0, guarantee_[x] - usage_[x]);
  int own = 0;
  if (!on_path[x] && queue.lending_limit_gpus != kUnlimited) {
    own = std::max(0, guarantee_[x] - queue.lending_limit_gpus);
  }
  int from_children = 0;
  for (uint32_t c : children_[x]) from_children += Protected(c, on_path);
  return std::min(idle, std::max(own, from_children));
}

QuotaVerdict QuotaTracker::Check(QueueId q, int gpus, int free_gpus) const {
  QuotaVerdict v;
  v.needed_gpus = gpus;
  if (!tracked(q)) return v;
  const uint32_t qi = q.value();
  v.guarantee_gpus = guarantee_[qi];
  v.guarantee_left_gpus = std::max(0, guarantee_[qi] - usage_[qi]);
  if (usage_[qi] + gpus <= guarantee_[qi]) return v;
  if (last_check_ && last_check_->q == q && last_check_->gpus == gpus && last_check_->free_gpus == free_gpus &&
      last_check_->usage_version == usage_version_) {
    return last_check_->verdict;
  }

  // a) borrowing limits along the ancestry.
  int limit_room = std::numeric_limits<int>::max();
  std::vector<uint8_t>& on_path = on_path_;
  on_path.assign(queues_->size(), 0);
  ForEachAncestor(q, [&](uint32_t x) {
    on_path[x] = 1;
    const int limit = (*queues_)[x].borrowing_limit_gpus;
    if (limit == kUnlimited) return;
    // How much more x may take before passing guarantee + limit.
    limit_room = std::min(limit_room, guarantee_[x] + limit - usage_[x]);
  });
  // b) free GPUs beyond what other queues protect.
  int protect = 0;
  for (uint32_t r : roots_) protect += Protected(r, on_path);
  const int lendable = free_gpus - protect;
  // The room above q's own idle guarantee.
  const int own_left = v.guarantee_left_gpus;
  v.may_borrow_gpus = std::max(0, std::min(limit_room, lendable) - own_left);
  // With nothing protected, a shortage of free GPUs is a capacity problem
  // for placement to report, not a quota one.
  v.admission = gpus <= limit_room && (protect == 0 || gpus <= lendable) ? Admission::kBorrow : Admission::kDenied;
  last_check_ = LastCheck{q, gpus, free_gpus, usage_version_, v};
  return v;
}

std::string QuotaTracker::DeniedDetail(QueueId q, const QuotaVerdict& v) const {
  return explain::Str("quota: needs ", v.needed_gpus, " GPUs, queue ", name(q), " has ", v.guarantee_left_gpus,
                      " of ", v.guarantee_gpus, " left and may borrow ", v.may_borrow_gpus);
}

}  // namespace tidal::quota
