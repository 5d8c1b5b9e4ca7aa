#include "tests/support/engine_driver.h"

#include <algorithm>
#include <utility>

namespace tidal::testing {

EngineDriver::EngineDriver(Snapshot snapshot, PolicyConfig policy)
    : scheduler_(std::move(policy)), snapshot_(std::move(snapshot)) {}

void EngineDriver::Submit(Workload w) {
  w.state = WorkloadState::kPending;
  snapshot_.workloads.push_back(std::move(w));
}

const Decisions& EngineDriver::Step() {
  last_ = scheduler_.Schedule(snapshot_);
  Apply(last_);
  return last_;
}

namespace {
Workload* FindWorkload(Snapshot& s, WorkloadId id) {
  for (Workload& w : s.workloads) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

Allocation* FindAllocation(Snapshot& s, WorkloadId id) {
  for (Allocation& a : s.allocations) {
    if (a.workload == id) return &a;
  }
  return nullptr;
}

}  // namespace

void EngineDriver::Apply(const Decisions& d) {
  for (const PreemptDecision& p : d.preempts) {
    Allocation* a = FindAllocation(snapshot_, p.victim);
    if (a == nullptr) continue;
    a->terminating = true;
    a->grace_deadline = p.grace_deadline;
    if (Workload* w = FindWorkload(snapshot_, p.victim)) w->state = WorkloadState::kTerminating;
    preempts_.push_back(p);
  }
  for (const ResizeDecision& r : d.resizes) {
    Allocation* a = FindAllocation(snapshot_, r.workload);
    if (a == nullptr) continue;
    if (linger_ && !r.removed.empty()) {
      a->leaving.insert(a->leaving.end(), r.removed.begin(), r.removed.end());
      leave_at_[r.workload] = std::max(leave_at_[r.workload], r.grace_deadline);
    } else {
      for (const PodPlacement& gone : r.removed) {
        auto it = std::find(a->pods.begin(), a->pods.end(), gone);
        if (it != a->pods.end()) a->pods.erase(it);
      }
    }
    a->pods.insert(a->pods.end(), r.added.begin(), r.added.end());
    resizes_.push_back(r);
  }
  for (const PlaceDecision& p : d.places) {
    Workload* w = FindWorkload(snapshot_, p.workload);
    if (w == nullptr) continue;
    w->state = WorkloadState::kRunning;
    Allocation a;
    a.workload = p.workload;
    a.pods = p.pods;
    a.start_time = snapshot_.now;
    a.last_checkpoint = snapshot_.now;
    a.borrowed = p.borrowed;
    snapshot_.allocations.push_back(std::move(a));
    first_start_.emplace(p.workload, snapshot_.now);
  }
}

void EngineDriver::AdvanceTo(Time t) {
  snapshot_.now = t;
  std::vector<Allocation> kept;
  for (Allocation& a : snapshot_.allocations) {
    Workload* w = FindWorkload(snapshot_, a.workload);
    if (w == nullptr) continue;
    if (a.terminating) {
      if (a.grace_deadline <= t) {
        w->state = WorkloadState::kPending;  // re-queued
        continue;
      }
    } else if (w->expected_duration > Duration::zero() && a.start_time + w->expected_duration <= t) {
      finished_.emplace(w->id, a.start_time + w->expected_duration);
      w->state = WorkloadState::kSucceeded;
      continue;
    }
    if (!a.leaving.empty() && leave_at_[a.workload] <= t) {
      for (const PodPlacement& gone : a.leaving) {
        auto it = std::find(a.pods.begin(), a.pods.end(), gone);
        if (it != a.pods.end()) a.pods.erase(it);
      }
      a.leaving.clear();
    }
    const Duration interval = w->training.checkpoint_interval;
    if (interval > Duration::zero()) {
      a.last_checkpoint = a.start_time + ((t - a.start_time) / interval) * interval;
    }
    kept.push_back(std::move(a));
  }
  snapshot_.allocations = std::move(kept);
  std::erase_if(snapshot_.workloads,
                [](const Workload& w) { return w.state == WorkloadState::kSucceeded; });
}

void EngineDriver::RunUntil(Time until, Duration tick) {
  while (snapshot_.now < until) {
    Step();
    AdvanceTo(snapshot_.now + tick);
  }
}

const Workload* EngineDriver::workload(WorkloadId id) const {
  for (const Workload& w : snapshot_.workloads) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

const Allocation* EngineDriver::allocation(WorkloadId id) const {
  for (const Allocation& a : snapshot_.allocations) {
    if (a.workload == id) return &a;
  }
  return nullptr;
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

int EngineDriver::QueueGpus(QueueId q) const {
  int total = 0;
  for (const Allocation& a : snapshot_.allocations) {
    const Workload* w = workload(a.workload);
    if (w != nullptr && w->queue == q) total += a.gpu_count();
  }
  return total;
}

}  // namespace tidal::testing
