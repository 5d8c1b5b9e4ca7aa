// Why a training job waited long in the queue: one cause, read from what the
// engine already says about each wait (WaitDecision::reason, one dominant
// ReasonCode per pass, docs/engine.md), not from a classification of its own.
//
// The algorithm. A WaitTally charges the time a job waits to the reason the
// engine gave for it, interval by interval: the reason of the last explained
// pass holds until the next one (the engine decides the same between passes
// on an unchanged state). When the wait ends, or while it lasts, the reason
// charged the most time is mapped to a WaitCause:
//   * job_too_big when the job's gang minimum asks more GPUs than it could
//     ever get at once: more than its queue's guarantee plus borrowing limit,
//     or than the working (not failed) GPUs of the pools its queue may use.
//     Checked first, whatever the engine said: no wait ends it, so it is the
//     thing to fix. (The engine rejects at once what its queue or the nodes'
//     GPU count can never hold; what stays to wait too big is a gang that
//     failed GPUs have made larger than its pools);
//   * quota: kQuota (the queue's guarantee and borrowing are used up);
//   * priority_imbalance: kPriority, kReservation, kAwaitingVictims (work
//     ranked ahead of it takes, or holds back, the capacity that frees);
//   * awaiting_approval: kAwaitingApproval (a person, not capacity, holds it);
//   * capacity_short: every other reason (capacity, fragmentation, gang,
//     topology, constraints, node health, pool, loan, deadline): the GPUs it
//     may use are not free in the shape it needs.
// Ties between reasons go to the lower ReasonCode value (the enum's order).
// A wait is "long" at or above kLongWait (30 min, the threshold at which the
// server's report calls a queue congested).
#ifndef TIDAL_CORE_DIAGNOSIS_WAIT_DIAGNOSIS_H_
#define TIDAL_CORE_DIAGNOSIS_WAIT_DIAGNOSIS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/time.h"
#include "core/model/decision.h"
#include "core/model/snapshot.h"
#include "core/model/workload.h"

namespace tidal::diagnosis {

inline constexpr Duration kLongWait = minutes(30);

enum class WaitCause : uint8_t {
  kJobTooBig,
  kQuota,
  kPriorityImbalance,
  kAwaitingApproval,
  kCapacityShort,
};
inline constexpr int kWaitCauseCount = 5;
// "job_too_big", "quota", "priority_imbalance", "awaiting_approval",
// "capacity_short".
std::string_view WaitCauseName(WaitCause cause);
std::array<WaitCause, kWaitCauseCount> AllWaitCauses();

// The cause a single engine reason stands for (job_too_big is never one:
// it is a property of the job, see MostGpusEverFree).
WaitCause WaitCauseOf(ReasonCode reason);

// The most GPUs `w` could ever hold at once: the smaller of its queue's
// guarantee plus borrowing limit (unlimited: no bound) and the GPUs, less the
// failed ones, of the nodes in the pools its queue may use (its listed pools;
// none listed: every pool but inference-reserved and other queues' dedicated
// ones).
int MostGpusEverFree(const Snapshot& snapshot, const Workload& w);

// Time a job waited, by the engine's reason.
class WaitTally {
 public:
  // The engine gave `reason` at `at` (a pass that explained the wait). The
  // time since the previous reason is charged to that previous reason, when
  // the reason changes or ChargeTo reads it: the same reason given again
  // changes nothing, so a caller may skip telling it.
  void Explain(Time at, ReasonCode reason);
  // Charges up to `at` (the wait ended, or a report reads it now).
  void ChargeTo(Time at);
  double seconds(ReasonCode reason) const { return ToSeconds(charged_[static_cast<int>(reason)]); }
  // The reason charged the most; empty when nothing was charged.
  std::optional<ReasonCode> Dominant() const;

 private:
  static constexpr int kReasons = static_cast<int>(ReasonCode::kCapacity) + 1;
  // In whole milliseconds: charged in one piece or in many, the same sum.
  std::array<Duration, kReasons> charged_{};
  std::optional<ReasonCode> last_;
  Time since_;
};

struct WaitDiagnosis {
  WaitCause cause = WaitCause::kCapacityShort;
  std::optional<ReasonCode> reason;  // the engine's dominant reason, when it gave any
  double waited_s = 0;
  int asks_gpus = 0;       // its gang minimum
  int most_ever_gpus = 0;  // MostGpusEverFree
  std::string detail;
};

// The cause of `w`'s wait of `waited`, from its tally (after ChargeTo).
WaitDiagnosis DiagnoseWait(const Snapshot& snapshot, const Workload& w, const WaitTally& tally,
                           Duration waited);

}  // namespace tidal::diagnosis

#endif  // TIDAL_CORE_DIAGNOSIS_WAIT_DIAGNOSIS_H_
