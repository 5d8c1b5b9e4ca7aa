#include "core/diagnosis/wait_diagnosis.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/explain/text.h"

namespace tidal::diagnosis {

using explain::Str;

std::string_view WaitCauseName(WaitCause cause) {
  switch (cause) {
    case WaitCause::kJobTooBig: return "job_too_big";
    case WaitCause::kQuota: return "quota";
    case WaitCause::kPriorityImbalance: return "priority_imbalance";
    case WaitCause::kAwaitingApproval: return "awaiting_approval";
    case WaitCause::kCapacityShort: return "capacity_short";
  }
  return "unknown";
}

std::array<WaitCause, kWaitCauseCount> AllWaitCauses() {
  std::array<WaitCause, kWaitCauseCount> all{};
  for (int i = 0; i < kWaitCauseCount; ++i) all[i] = static_cast<WaitCause>(i);
  return all;
}

WaitCause WaitCauseOf(ReasonCode reason) {
  switch (reason) {
    case ReasonCode::kQuota: return WaitCause::kQuota;
    case ReasonCode::kPriority:
    case ReasonCode::kReservation:
    case ReasonCode::kAwaitingVictims: return WaitCause::kPriorityImbalance;
    case ReasonCode::kAwaitingApproval: return WaitCause::kAwaitingApproval;
    default: return WaitCause::kCapacityShort;
  }
}

int MostGpusEverFree(const Snapshot& snapshot, const Workload& w) {
  int cap = std::numeric_limits<int>::max();
  const Queue* queue = w.queue.valid() && w.queue.value() < snapshot.queues.size()
                           ? &snapshot.queues[w.queue.value()]
                           : nullptr;
  if (queue != nullptr && queue->borrowing_limit_gpus != kUnlimited) {
    cap = queue->guaranteed_gpus + queue->borrowing_limit_gpus;
  }
  const Cluster& c = snapshot.cluster;
  std::vector<bool> may_use(c.pools.size(), false);
  for (size_t p = 0; p < c.pools.size(); ++p) {
    const Pool& pool = c.pools[p];
    if (queue != nullptr && !queue->pools.empty()) {
      may_use[p] = std::find(queue->pools.begin(), queue->pools.end(), PoolId(p)) != queue->pools.end();
    } else {
      may_use[p] = pool.kind != PoolKind::kInferenceReserved &&
                   (pool.kind != PoolKind::kDedicated || pool.owner == w.queue);
    }
  }
  int pool_gpus = 0;
  for (const Node& n : c.nodes) {
    // A node outside any pool is usable by anyone.
    // A failed GPU frees nothing until it is replaced.
    if (!n.pool.valid() || n.pool.value() >= may_use.size() || may_use[n.pool.value()]) {
      pool_gpus += n.gpu_count - std::popcount(n.failed_gpus & n.all_gpus());
    }
  }
  return std::min(cap, pool_gpus);
}

void WaitTally::Explain(Time at, ReasonCode reason) {
  if (last_ == reason) return;
  ChargeTo(at);
  last_ = reason;
  since_ = at;
}

void WaitTally::ChargeTo(Time at) {
  if (last_ && at > since_) charged_[static_cast<int>(*last_)] += at - since_;
  if (at > since_) since_ = at;
}

std::optional<ReasonCode> WaitTally::Dominant() const {
  std::optional<ReasonCode> best;
  Duration best_charged = milliseconds(-1);
  for (int i = 0; i < kReasons; ++i) {
    if (charged_[i] > best_charged && (charged_[i] > Duration::zero() || (last_ && static_cast<int>(*last_) == i))) {
      best_charged = charged_[i];
      best = static_cast<ReasonCode>(i);
    }
  }
  return best;
}

WaitDiagnosis DiagnoseWait(const Snapshot& snapshot, const Workload& w, const WaitTally& tally,
                           Duration waited) {
  WaitDiagnosis d;
  d.waited_s = ToSeconds(waited);
  d.asks_gpus = w.min_gpus();
  d.most_ever_gpus = MostGpusEverFree(snapshot, w);
  d.reason = tally.Dominant();
  if (d.asks_gpus > d.most_ever_gpus) {
    d.cause = WaitCause::kJobTooBig;
  } else {
    d.cause = d.reason ? WaitCauseOf(*d.reason) : WaitCause::kCapacityShort;
  }
  d.detail = Str(WaitCauseName(d.cause), ": waited ", std::round(d.waited_s), " s");
  if (d.cause == WaitCause::kJobTooBig) {
    d.detail += Str("; asks ", d.asks_gpus, " GPUs at once, at most ", d.most_ever_gpus, " can ever be its");
  }
  if (d.reason) {
    d.detail += Str("; the engine said ", ReasonCodeName(*d.reason), " for ", std::round(tally.seconds(*d.reason)),
                    " s of it");
  }
  return d;
}

}  // namespace tidal::diagnosis
