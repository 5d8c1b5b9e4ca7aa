// Drives a StateMachine, a ColocationController and a Scheduler the way the
// server's pass does and journals every step with the journal codec
// (protocol/journal_record.h), in the documented order (docs/formats.md
// "Journal"):
//   tick marker, the lifecycle's edits; load samples, plan_snapshot marker;
//   plan_apply marker, the plan's edits; engine_snapshot marker;
//   engine_apply marker, the decisions' edits.
// World edits go in between steps. The sim replay tests replay what it
// writes; the server's own journal test can compare its journal with one this
// driver writes for the same inputs (and reuse ExpectServerJournalOrder).
#ifndef TIDAL_TESTS_SUPPORT_JOURNAL_DRIVER_H_
#define TIDAL_TESTS_SUPPORT_JOURNAL_DRIVER_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/colocation/colocation_controller.h"
#include "core/engine/scheduler.h"
#include "core/model/policy.h"
#include "core/state/state_machine.h"
#include "protocol/journal_record.h"

namespace tidal::testing {

class JournalDriver {
 public:
  JournalDriver(state::State initial, const PolicyConfig& policy);

  state::StateMachine& machine() { return machine_; }
  const state::State& state() const { return machine_.state(); }

  // A world (or priority refresher) edit at `at`; journaled when it applies.
  Status World(Time at, const state::Edit& edit, state::EditOrigin origin = state::EditOrigin::kWorld);
  // One server pass at `now`: `loads` are fed to the controller (and
  // journaled) before the plan's snapshot. `between` runs after each
  // snapshot marker's computation, before the matching apply marker, where
  // the server's API threads may journal world edits.
  void Pass(Time now, const std::vector<std::pair<WorkloadId, double>>& loads = {},
            const std::function<void(protocol::PassPhase after)>& between = nullptr);

  // Encoded records, in journal order.
  const std::vector<std::string>& records() const { return records_; }
  // The records since the last call (what one store Mutation would carry).
  std::vector<std::string> TakeNew();

  // Counters of what the passes did, for the scenario's own checks.
  int placements() const { return placements_; }
  int notices() const { return notices_; }
  int lends() const { return lends_; }
  int returns() const { return returns_; }

 private:
  void Marker(Time at, protocol::PassPhase phase);

  state::StateMachine machine_;
  ColocationController controller_;
  Scheduler scheduler_;
  std::vector<std::string> records_;
  size_t taken_ = 0;
  int placements_ = 0;
  int notices_ = 0;
  int lends_ = 0;
  int returns_ = 0;
};

// Checks the server's order on decoded records: every lifecycle edit follows
// a tick marker, every colocation edit a plan_apply marker and every engine
// edit an engine_apply marker, with only edits of that origin in between;
// each apply marker follows its snapshot marker in the same pass; markers and
// edits never go back in time. Adds a gtest failure naming the record.
void ExpectServerJournalOrder(const std::vector<std::string>& records);

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_JOURNAL_DRIVER_H_
