#include "core/engine/scheduler.h"

#include "core/common/check.h"
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

template <typename T>
std::unique_ptr<T> Scheduler::Take(std::unique_ptr<T>& slot) const {
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  std::unique_ptr<T> out = std::move(slot);
  cache_busy_.clear(std::memory_order_release);
  return out;
}

template <typename T>
void Scheduler::Put(std::unique_ptr<T>& slot, std::unique_ptr<T> kept) const {
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  slot.swap(kept);
  cache_busy_.clear(std::memory_order_release);
  // What another pass put back meanwhile (now in `kept`) is dropped outside
  // the lock.
}

void Scheduler::ForgetKept() const {
  SetCache(nullptr);
  Put(kept_, {});
  Put(fits_, {});
  ForgetQuiet();
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

namespace {

bool DecidesAnAction(const Decisions& d) {
  return !d.places.empty() || !d.preempts.empty() || !d.resizes.empty() || !d.rejects.empty();
}

}  // namespace

bool Scheduler::StillQuiet(const Snapshot& snapshot) const {
  if (!snapshot.stamp.tracked()) return false;
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  const QuietPass q = quiet_;
  cache_busy_.clear(std::memory_order_release);
  return q.lineage == snapshot.stamp.lineage() && q.changes == snapshot.stamp.changes() &&
         snapshot.now >= q.at && snapshot.now < q.until;
}

void Scheduler::RememberPass(const Snapshot& snapshot, const Decisions& decided, Time until) const {
  QuietPass q;  // lineage 0: no stamp has it
  if (snapshot.stamp.tracked() && !DecidesAnAction(decided)) {
    q = {snapshot.stamp.lineage(), snapshot.stamp.changes(), snapshot.now, until};
  }
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  quiet_ = q;
  cache_busy_.clear(std::memory_order_release);
}

void Scheduler::ForgetQuiet() const {
  while (cache_busy_.test_and_set(std::memory_order_acquire)) {
  }
  quiet_ = QuietPass();
  cache_busy_.clear(std::memory_order_release);
}

Decisions Scheduler::Schedule(const Snapshot& snapshot, ScheduleOptions options) const {
  if (!options.explain_waits && StillQuiet(snapshot)) {
#ifdef TIDAL_EXPENSIVE_CHECKS
    Time unused;
    TIDAL_CHECK(!DecidesAnAction(RunPass(snapshot, options, &unused)))
        << "a pass skipped as quiet at t=" << ToMillis(snapshot.now) << " ms decides an action when run";
#endif
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return Decisions();
  }
  Time quiet_until;
  Decisions out = RunPass(snapshot, options, &quiet_until);
  RememberPass(snapshot, out, quiet_until);
  return out;
}

namespace {

// A pass that took a shortcut (SchedulingPass::took_a_shortcut: it stopped
// walking its waiting work early, took it from the snapshot's waiting
// order, or decided the rest's waits by key) must decide, and explain,
// what the whole walk, sorted by the pass itself, does. Test builds run
// that walk too and compare.
void CheckTheShortcuts([[maybe_unused]] const engine::SchedulingPass& pass, [[maybe_unused]] const Decisions& out,
                  [[maybe_unused]] const PolicyConfig& policy, [[maybe_unused]] const Snapshot& snapshot,
                  [[maybe_unused]] std::shared_ptr<const engine::StaticNodeClasses> classes,
                  [[maybe_unused]] ScheduleOptions options) {
#ifdef TIDAL_EXPENSIVE_CHECKS
  if (!pass.took_a_shortcut()) return;
  engine::SchedulingPass whole(policy, snapshot, std::move(classes));
  whole.set_explain_waits(options.explain_waits);
  whole.set_wait_details(options.wait_details);
  whole.set_told_reasons(options.told_reasons);
  whole.set_stop_when_only_waits_remain(false);
  whole.set_take_the_waiting_order(false);
  TIDAL_CHECK(whole.Run() == out) << "a pass at t=" << ToMillis(snapshot.now)
                                  << " ms that took a shortcut decides otherwise than the whole walk";
#endif
}

}  // namespace

Decisions Scheduler::RunPass(const Snapshot& snapshot, ScheduleOptions options, Time* quiet_until) const {
  std::shared_ptr<const engine::StaticNodeClasses> classes = NodeClasses(snapshot);
  // A start state can be kept only where the snapshot says which GPUs are
  // free (the simulator's and the server's State keep free_gpus); without it
  // every pass scans the allocations anyway.
  if (classes == nullptr || snapshot.free_gpus.empty() ||
      snapshot.allocation_gpus.size() != snapshot.allocations.size()) {
    engine::SchedulingPass pass(policy_, snapshot, classes);
    pass.set_explain_waits(options.explain_waits);
    pass.set_wait_details(options.wait_details);
    pass.set_told_reasons(options.told_reasons);
    Decisions out = pass.Run();
    *quiet_until = pass.quiet_until();
    CheckTheShortcuts(pass, out, policy_, snapshot, std::move(classes), options);
    return out;
  }
  std::unique_ptr<engine::ClusterState> kept = Take(kept_);
  if (kept == nullptr || !kept->CatchUp(snapshot, classes)) {
    kept = std::make_unique<engine::ClusterState>(snapshot, classes);
  }
  std::unique_ptr<engine::FitsSomeday> fits = Take(fits_);
  if (fits == nullptr) fits = std::make_unique<engine::FitsSomeday>();
  engine::SchedulingPass pass(policy_, snapshot, *kept);
  pass.set_explain_waits(options.explain_waits);
  pass.set_wait_details(options.wait_details);
  pass.set_told_reasons(options.told_reasons);
  pass.set_fits_someday(fits.get());
  Decisions out = pass.Run();
  *quiet_until = pass.quiet_until();
  CheckTheShortcuts(pass, out, policy_, snapshot, std::move(classes), options);
  Put(kept_, std::move(kept));
  Put(fits_, std::move(fits));
  return out;
}

}  // namespace tidal
