// The waiting workloads that passes found able to fit some day, kept
// across passes by the Scheduler for passes that stop early.
#ifndef TIDAL_CORE_ENGINE_FITS_SOMEDAY_H_
#define TIDAL_CORE_ENGINE_FITS_SOMEDAY_H_

#include <cstdint>
#include <vector>

#include "core/model/cluster.h"
#include "core/model/queue.h"
#include "core/model/snapshot.h"
#include "core/model/waiting_order.h"
#include "core/model/workload.h"

namespace tidal::engine {

// Waiting workloads some pass found able to fit some day (NeverFits found
// no reason they never could), by workload id, so that a pass that stops
// early (SchedulingPass::RestCanOnlyWait) need not ask again for the work
// it does not walk. It holds for the cluster version, pools and queues it
// was filled under, and forgets everything when they change. Batch work
// with a deadline is never kept: its test moves with the clock.
class FitsSomeday {
 public:
  // Forgets everything unless `snapshot` has the cluster version (not 0),
  // pools and queues it was filled under.
  void Validate(const Snapshot& snapshot);
  bool Has(WorkloadId id) const {
    return id.value() < fits_.size() && fits_[id.value()] != 0;
  }
  void Add(const Workload& w);
  // Whether it keeps anything (a cluster version to hold for).
  bool keeps() const { return cluster_version_ != 0; }

  // The waiting work of `order` a pass must still ask about, as the order's
  // log names it (appended to `out`, possibly twice, possibly gone): false
  // when it cannot tell (it never settled this order, or forgot, or the log
  // was trimmed past it), and then every waiting workload needs asking.
  bool ToAsk(const WaitingOrder& order, std::vector<WaitingOrder::Inserted>& out) const;
  // Every workload waiting in `order` now was asked about: those that are
  // not kept are `unsettled` (as the log names them).
  void Settle(const WaitingOrder& order, std::vector<WaitingOrder::Inserted> unsettled);

 private:
  uint64_t cluster_version_ = 0;  // 0: keeps nothing
  std::vector<Pool> pools_;
  std::vector<Queue> queues_;
  std::vector<uint8_t> fits_;  // by workload id
  // Settle's: the order's log lineage (0: none), its insert count then,
  // and what was not kept.
  uint64_t settled_lineage_ = 0;
  uint64_t settled_inserts_ = 0;
  std::vector<WaitingOrder::Inserted> unsettled_;
};

}  // namespace tidal::engine

#endif  // TIDAL_CORE_ENGINE_FITS_SOMEDAY_H_
