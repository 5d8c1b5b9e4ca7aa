// Runs the engine in a loop like the server does, but in simulated time and
// through the same state machine (core/state): Step() schedules and applies
// the decisions; AdvanceTo() moves the clock, plays the world (running work
// finishes at start + expected_duration; checkpoints land on their interval)
// and fires the lifecycle's timers (victims past their grace deadline are
// requeued, as a re-queued job would be). Evicted gangs hold their GPUs until
// their grace deadline; shrunk pods exit at once, or, with
// `set_shrunk_pods_linger(true)`, stay listed as Allocation::leaving until
// the shrink's grace deadline. After every step and advance the state's
// invariants are checked.
#ifndef TIDAL_TESTS_SUPPORT_ENGINE_DRIVER_H_
#define TIDAL_TESTS_SUPPORT_ENGINE_DRIVER_H_

#include <map>
#include <optional>
#include <vector>

#include "core/engine/scheduler.h"
#include "core/state/state_machine.h"

namespace tidal::testing {

class EngineDriver {
 public:
  explicit EngineDriver(Snapshot snapshot, PolicyConfig policy = {});

  const Snapshot& snapshot() const { return machine_.state().snapshot(); }
  const state::StateMachine& machine() const { return machine_; }
  Time now() const { return snapshot().now; }

  void set_shrunk_pods_linger(bool linger) { linger_ = linger; }
  void Submit(Workload w);
  const Decisions& Step();
  void AdvanceTo(Time t);
  // Step, then advance by `tick`, until `until`.
  void RunUntil(Time until, Duration tick);

  const Workload* workload(WorkloadId id) const { return machine_.state().workload(id); }
  const Allocation* allocation(WorkloadId id) const { return machine_.state().allocation(id); }
  bool running(WorkloadId id) const;
  bool finished(WorkloadId id) const { return finished_.count(id) != 0; }
  std::optional<Time> first_start(WorkloadId id) const;
  const std::vector<PreemptDecision>& preempts() const { return preempts_; }
  const std::vector<ResizeDecision>& resizes() const { return resizes_; }
  const Decisions& last() const { return last_; }
  // Decisions the state refused so far (stale or conflicting).
  int refused() const { return refused_; }
  // Every edit applied since the driver was built, with its time.
  const std::vector<state::JournalEntry>& journal() const { return journal_; }
  // GPUs held (running or terminating) by the queue's workloads.
  int QueueGpus(QueueId q) const { return machine_.state().queue_used_gpus(q); }

 private:
  void MustApply(const state::Edit& e);
  void CheckInvariants() const;

  Scheduler scheduler_;
  state::StateMachine machine_;
  Decisions last_;
  std::map<WorkloadId, Time> first_start_;
  std::map<WorkloadId, Time> finished_;
  std::vector<PreemptDecision> preempts_;
  std::vector<ResizeDecision> resizes_;
  bool linger_ = false;
  int refused_ = 0;
  std::vector<state::JournalEntry> journal_;
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_ENGINE_DRIVER_H_
