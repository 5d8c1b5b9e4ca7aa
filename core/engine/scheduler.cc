#include "core/engine/scheduler.h"

#include "core/engine/scheduling_pass.h"

namespace tidal {

std::shared_ptr<const Scheduler::ClassCache> Scheduler::GetCache() const {
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  std::shared_ptr<const ClassCache> out = cache_;
  cache_busy_.clear(std::memory_order_release);
  return out;
}

void Scheduler::SetCache(std::shared_ptr<const ClassCache> cache) const {
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  cache_.swap(cache);
  cache_busy_.clear(std::memory_order_release);
  // The old cache (now in `cache`) is released outside the lock.
}

std::shared_ptr<const engine::StaticNodeClasses> Scheduler::NodeClasses(
    const Snapshot& snapshot) const {
  if (snapshot.cluster_version == 0) return nullptr;
  std::shared_ptr<const ClassCache> cache = GetCache();
  if (!cache || cache->version != snapshot.cluster_version ||
      cache->nodes != snapshot.cluster.nodes.size()) {
    auto fresh = std::make_shared<ClassCache>();
    fresh->version = snapshot.cluster_version;
    fresh->nodes = snapshot.cluster.nodes.size();
    fresh->classes = engine::StaticNodeClasses::Build(snapshot.cluster);
    cache = fresh;
    SetCache(cache);
  }
  return cache->classes;
}

Decisions Scheduler::Schedule(const Snapshot& snapshot) const {
  return engine::SchedulingPass(policy_, snapshot, NodeClasses(snapshot)).Run();
}

}  // namespace tidal
