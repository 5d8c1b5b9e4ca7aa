#include "core/model/waiting_order.h"

#include <algorithm>
#include <tuple>

#include "core/common/check.h"

namespace tidal {

namespace {

auto GroupKey(QueueId queue, int32_t delta, int32_t min_gpus) { return std::make_tuple(queue, delta, min_gpus); }

}  // namespace

WaitingOrder WaitingOrder::Of(std::span<const WorkloadDigest> digests) {
  WaitingOrder order;
  order.MarkKept();
  for (uint32_t i = 0; i < digests.size(); ++i) {
    if (Waits(digests[i])) order.Insert(digests[i], i);
  }
  return order;
}

void WaitingOrder::Update(const WorkloadDigest* before, const WorkloadDigest* after, uint32_t index) {
  const bool was = before != nullptr && Waits(*before);
  const bool is = after != nullptr && Waits(*after);
  if (was && is && EntryOf(*before, index) == EntryOf(*after, index) && before->queue == after->queue &&
      before->borrowing_start_delta == after->borrowing_start_delta && before->min_pods == after->min_pods &&
      before->gpus_per_pod == after->gpus_per_pod) {
    return;
  }
  if (was) Erase(*before);
  if (is) Insert(*after, index);
}

void WaitingOrder::Move(const WorkloadDigest& d, uint32_t to) {
  if (!Waits(d)) return;
  Group* group = GroupOf(d, /*make=*/false);
  TIDAL_CHECK(group != nullptr) << "workload " << d.id.value() << " is not in the waiting order";
  Find(*group, d).workload = to;
}

WaitingOrder::Group* WaitingOrder::GroupOf(const WorkloadDigest& d, bool make) {
  const int32_t min_gpus = d.min_pods * d.gpus_per_pod;
  const auto key = GroupKey(d.queue, d.borrowing_start_delta, min_gpus);
  const auto it = std::lower_bound(groups_.begin(), groups_.end(), key, [](const Group& g, const auto& k) {
    return GroupKey(g.queue, g.borrowing_start_delta, g.min_gpus) < k;
  });
  if (it != groups_.end() && GroupKey(it->queue, it->borrowing_start_delta, it->min_gpus) == key) return &*it;
  if (!make) return nullptr;
  return &*groups_.insert(it, Group{d.queue, d.borrowing_start_delta, min_gpus, {}});
}

WaitingOrder::Entry& WaitingOrder::Find(Group& group, const WorkloadDigest& d) {
  // Ids are unique, so the key finds one entry; its index may be stale.
  const auto it = std::lower_bound(group.entries.begin(), group.entries.end(), EntryOf(d, 0), Before);
  TIDAL_CHECK(it != group.entries.end() && it->id == d.id)
      << "workload " << d.id.value() << " is not in the waiting order";
  return *it;
}

void WaitingOrder::Insert(const WorkloadDigest& d, uint32_t index) {
  std::vector<Entry>& entries = GroupOf(d, /*make=*/true)->entries;
  const Entry e = EntryOf(d, index);
  entries.insert(std::upper_bound(entries.begin(), entries.end(), e, Before), e);
  ++size_;
  if (d.gpus_per_pod >= 1 && d.gpus_per_pod <= kMaxGpusPerNode) ++by_gpus_per_pod_[d.gpus_per_pod];
}

void WaitingOrder::Erase(const WorkloadDigest& d) {
  Group* group = GroupOf(d, /*make=*/false);
  TIDAL_CHECK(group != nullptr) << "workload " << d.id.value() << " is not in the waiting order";
  Entry& e = Find(*group, d);
  group->entries.erase(group->entries.begin() + (&e - group->entries.data()));
  // An empty group goes, so that equal orders compare equal.
  if (group->entries.empty()) groups_.erase(groups_.begin() + (group - groups_.data()));
  --size_;
  if (d.gpus_per_pod >= 1 && d.gpus_per_pod <= kMaxGpusPerNode) --by_gpus_per_pod_[d.gpus_per_pod];
}

}  // namespace tidal
