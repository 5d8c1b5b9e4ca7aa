#include "core/engine/release_timeline.h"

#include <algorithm>

namespace tidal::engine {

void ReleaseTimeline::Add(Time at, QueueId queue, const std::vector<PodPlacement>& pods, int32_t alloc) {
  if (at == kInfiniteFuture) return;
  for (const PodPlacement& p : pods) {
    const Key k{at, static_cast<uint32_t>(events_.size())};
    events_.push_back({at, p.node, p.gpus, queue, alloc});
    if (ordered_.empty() || !(k < ordered_.back())) {
      heap_.push_back(k);  // heaped when next read
    } else {
      ordered_.insert(std::upper_bound(ordered_.begin(), ordered_.end(), k), k);
    }
  }
}

void ReleaseTimeline::TakeInOrder(size_t n) {
  // The heap's order: std's heaps put the greatest first.
  const auto later = [](const Key& a, const Key& b) { return b < a; };
  if (heaped_ == 0) {
    // The first read: one O(n) build.
    std::make_heap(heap_.begin(), heap_.end(), later);
  } else {
    for (size_t i = heaped_ + 1; i <= heap_.size(); ++i) std::push_heap(heap_.begin(), heap_.begin() + i, later);
  }
  while (ordered_.size() < n && !heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    ordered_.push_back(heap_.back());
    heap_.pop_back();
  }
  heaped_ = heap_.size();
}

}  // namespace tidal::engine
