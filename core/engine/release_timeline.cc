#include "core/engine/release_timeline.h"

#include <algorithm>

namespace tidal::engine {
namespace {

// A type, not a function pointer, so that the sort inlines it.
struct Earlier {
  bool operator()(const ReleaseEvent& a, const ReleaseEvent& b) const {
    return a.at != b.at ? a.at < b.at : a.seq < b.seq;
  }
};

}  // namespace

void ReleaseTimeline::Add(Time at, QueueId queue, const std::vector<PodPlacement>& pods, int32_t alloc) {
  if (at == kInfiniteFuture) return;
  for (const PodPlacement& p : pods) {
    events_.push_back({at, p.node, p.gpus, queue, static_cast<uint32_t>(events_.size()), alloc});
  }
}

const std::vector<ReleaseEvent>& ReleaseTimeline::events() {
  if (sorted_prefix_ < events_.size()) {
    const auto mid = events_.begin() + static_cast<std::ptrdiff_t>(sorted_prefix_);
    std::sort(mid, events_.end(), Earlier());
    // Nothing sorted before: no merge, whose buffer is a heap allocation.
    if (sorted_prefix_ > 0) std::inplace_merge(events_.begin(), mid, events_.end(), Earlier());
    sorted_prefix_ = events_.size();
  }
  return events_;
}

}  // namespace tidal::engine
