#include "tests/support/engine_driver.h"

#include <algorithm>
#include <utility>

#include <gtest/gtest.h>

namespace tidal::testing {
namespace {

state::State InitialState(const Snapshot& snapshot) {
  StatusOr<state::State> s = state::State::FromSnapshot(snapshot);
  if (!s.ok()) ADD_FAILURE() << "the test's snapshot is inconsistent: " << s.status().message();
  return s.ok() ? *std::move(s) : state::State(snapshot.cluster, snapshot.queues, snapshot.projects);
}

}  // namespace

EngineDriver::EngineDriver(Snapshot snapshot, PolicyConfig policy)
    : scheduler_(policy),
      machine_(InitialState(snapshot),
               state::LifecycleOptions{policy.preemption.default_grace, Duration(0)}) {
  machine_.set_sink([this](Time at, state::EditOrigin origin, const state::Edit& e) {
    journal_.push_back({at, origin, e});
  });
}

void EngineDriver::MustApply(const state::Edit& e) {
  Status s = machine_.Apply(e);
  EXPECT_TRUE(s.ok()) << state::EditName(e) << ": " << s.message();
}

void EngineDriver::CheckInvariants() const {
  Status s = machine_.state().CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.message();
}

void EngineDriver::Submit(Workload w) {
  w.state = WorkloadState::kPending;
  MustApply(state::SubmitEdit{std::move(w)});
}

const Decisions& EngineDriver::Step() {
  last_ = scheduler_.Schedule(snapshot());
  const state::ApplyOutcome outcome = machine_.ApplyDecisions(last_);
  refused_ += static_cast<int>(outcome.refused.size());
  for (const state::Edit& e : outcome.applied) {
    if (const auto* place = std::get_if<state::PlaceEdit>(&e)) {
      first_start_.emplace(place->workload, now());
    } else if (const auto* shrink = std::get_if<state::ShrinkEdit>(&e); shrink != nullptr && !linger_) {
      // The removed pods exit at once.
      for (const PodPlacement& p : shrink->pods) MustApply(state::PodExitEdit{shrink->workload, p});
    }
  }
  for (const PreemptDecision& p : last_.preempts) {
    if (allocation(p.victim) != nullptr) preempts_.push_back(p);
  }
  for (const ResizeDecision& r : last_.resizes) {
    if (allocation(r.workload) != nullptr) resizes_.push_back(r);
  }
  CheckInvariants();
  return last_;
}

void EngineDriver::AdvanceTo(Time t) {
  machine_.AdvanceTo(t);
  // Timers first: a victim past its grace is gone before it could finish.
  machine_.Tick();
  // The world: work that ran its expected duration finishes; checkpoints
  // land on their interval.
  std::vector<WorkloadId> done;
  for (const Allocation& a : snapshot().allocations) {
    const Workload* w = workload(a.workload);
    if (w == nullptr || a.terminating) continue;
    if (w->expected_duration > Duration::zero() && a.start_time + w->expected_duration <= t) {
      done.push_back(w->id);
      finished_.emplace(w->id, a.start_time + w->expected_duration);
    }
  }
  for (WorkloadId id : done) MustApply(state::ReleaseEdit{id, WorkloadState::kSucceeded});
  std::vector<std::pair<WorkloadId, Time>> checkpoints;
  for (const Allocation& a : snapshot().allocations) {
    const Workload* w = workload(a.workload);
    const Duration interval = w == nullptr ? Duration::zero() : w->training.checkpoint_interval;
    if (interval <= Duration::zero()) continue;
    const Time last = a.start_time + ((t - a.start_time) / interval) * interval;
    if (last > a.last_checkpoint) checkpoints.emplace_back(a.workload, last);
  }
  for (const auto& [id, at] : checkpoints) MustApply(state::CheckpointEdit{id, at});
  CheckInvariants();
}

void EngineDriver::RunUntil(Time until, Duration tick) {
  while (now() < until) {
    Step();
    AdvanceTo(now() + tick);
  }
}

bool EngineDriver::running(WorkloadId id) const {
  const Allocation* a = allocation(id);
  return a != nullptr && !a->terminating;
}

std::optional<Time> EngineDriver::first_start(WorkloadId id) const {
  auto it = first_start_.find(id);
  if (it == first_start_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tidal::testing
