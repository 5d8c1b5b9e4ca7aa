#include "core/model/waiting_order.h"

#include <algorithm>
#include <cstddef>
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

size_t WaitingOrder::LowerGroup(QueueId queue, int32_t delta, int32_t min_gpus) const {
  const auto key = GroupKey(queue, delta, min_gpus);
  return std::lower_bound(groups_.begin(), groups_.end(), key,
                          [](const Group& g, const auto& k) {
                            return GroupKey(g.queue, g.borrowing_start_delta, g.min_gpus) < k;
                          }) -
         groups_.begin();
}

WaitingOrder::Group* WaitingOrder::GroupOf(const WorkloadDigest& d, bool make) {
  const int32_t min_gpus = d.min_pods * d.gpus_per_pod;
  const size_t at = LowerGroup(d.queue, d.borrowing_start_delta, min_gpus);
  if (at < groups_.size() && groups_[at].queue == d.queue && groups_[at].borrowing_start_delta == d.borrowing_start_delta &&
      groups_[at].min_gpus == min_gpus) {
    return &groups_[at];
  }
  if (!make) return nullptr;
  return &*groups_.insert(groups_.begin() + static_cast<std::ptrdiff_t>(at),
                          Group{d.queue, d.borrowing_start_delta, min_gpus, {}});
}

WaitingOrder::Entry& WaitingOrder::Find(Group& group, const WorkloadDigest& d) {
  // Ids are unique, so the key finds one entry; its index may be stale.
  const auto it = std::lower_bound(group.entries.begin(), group.entries.end(), EntryOf(d, 0), Before);
  TIDAL_CHECK(it != group.entries.end() && it->id == d.id)
      << "workload " << d.id.value() << " is not in the waiting order";
  return *it;
}

void WaitingOrder::Insert(const WorkloadDigest& d, uint32_t index) {
  Group& group = *GroupOf(d, /*make=*/true);
  const Entry e = EntryOf(d, index);
  group.entries.insert(std::upper_bound(group.entries.begin(), group.entries.end(), e, Before), e);
  ++size_;
  if (d.gpus_per_pod >= 1 && d.gpus_per_pod <= kMaxGpusPerNode) ++by_gpus_per_pod_[d.gpus_per_pod];
  log_.push_back(Inserted{group.queue, group.borrowing_start_delta, group.min_gpus, e});
  // Dropping the older half whenever the log doubles past its bound costs
  // O(1) per insert.
  if (log_.size() > 2 * size_ + kMinLog) {
    const size_t drop = log_.size() / 2;
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(drop));
    log_start_ += drop;
  }
}

std::optional<std::span<const WaitingOrder::Inserted>> WaitingOrder::InsertsFrom(uint64_t from) const {
  if (from < log_start_ || from > inserts()) return std::nullopt;
  return std::span<const Inserted>(log_).subspan(from - log_start_);
}

std::optional<std::pair<size_t, size_t>> WaitingOrder::Locate(const Inserted& x) const {
  const size_t at = LowerGroup(x.queue, x.borrowing_start_delta, x.min_gpus);
  if (at == groups_.size()) return std::nullopt;
  const Group& group = groups_[at];
  if (group.queue != x.queue || group.borrowing_start_delta != x.borrowing_start_delta ||
      group.min_gpus != x.min_gpus) {
    return std::nullopt;
  }
  const auto it = std::lower_bound(group.entries.begin(), group.entries.end(), x.entry, Before);
  if (it == group.entries.end() || it->id != x.entry.id || it->priority != x.entry.priority ||
      it->submit != x.entry.submit) {
    return std::nullopt;
  }
  return std::make_pair(at, static_cast<size_t>(it - group.entries.begin()));
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
