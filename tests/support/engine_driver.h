// Runs the engine in a loop like the server does, but in simulated time:
// Step() schedules and applies the decisions; AdvanceTo() moves the clock,
// finishes running work at start + expected_duration and ends preempted
// victims at their grace deadline (they go back to pending, as a re-queued
// job would). Evicted gangs hold their GPUs until their grace deadline;
// shrunk pods are released at once, or, with `set_shrunk_pods_linger(true)`,
// stay listed as Allocation::leaving until the shrink's grace deadline.
#ifndef TIDAL_TESTS_SUPPORT_ENGINE_DRIVER_H_
#define TIDAL_TESTS_SUPPORT_ENGINE_DRIVER_H_

#include <map>
#include <optional>
#include <vector>

#include "core/engine/scheduler.h"

namespace tidal::testing {

class EngineDriver {
 public:
  explicit EngineDriver(Snapshot snapshot, PolicyConfig policy = {});

  Snapshot& snapshot() { return snapshot_; }
  Time now() const { return snapshot_.now; }

  void set_shrunk_pods_linger(bool linger) { linger_ = linger; }
  void Submit(Workload w);
  const Decisions& Step();
  void AdvanceTo(Time t);
  // Step, then advance by `tick`, until `until`.
  void RunUntil(Time until, Duration tick);

  const Workload* workload(WorkloadId id) const;
  const Allocation* allocation(WorkloadId id) const;
  bool running(WorkloadId id) const;
  bool finished(WorkloadId id) const { return finished_.count(id) != 0; }
  std::optional<Time> first_start(WorkloadId id) const;
  const std::vector<PreemptDecision>& preempts() const { return preempts_; }
  const std::vector<ResizeDecision>& resizes() const { return resizes_; }
  const Decisions& last() const { return last_; }
  // GPUs held (running or terminating) by the queue's workloads.
  int QueueGpus(QueueId q) const;

 private:
  void Apply(const Decisions& d);

  Scheduler scheduler_;
  Snapshot snapshot_;
  Decisions last_;
  std::map<WorkloadId, Time> first_start_;
  std::map<WorkloadId, Time> finished_;
  std::vector<PreemptDecision> preempts_;
  std::vector<ResizeDecision> resizes_;
  bool linger_ = false;
  std::map<WorkloadId, Time> leave_at_;  // when an allocation's leaving pods exit
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_ENGINE_DRIVER_H_
