#include "core/colocation/return_timing.h"

#include <algorithm>

#include "core/model/lost_work.h"
#include "core/model/workload_index.h"

namespace tidal {
namespace {

// One piece of work a return of the node would stop.
struct Borrower {
  int gpus = 0;
  Time last_checkpoint;
  Duration interval{0};  // 0: never checkpoints again
  Duration save{0};      // > 0: saves on request, in this long, whenever it stops
  Time ends = kInfiniteFuture;  // its declared end: from then it loses nothing
};

// The borrowers on each node of `nodes` (ascending), in the same order.
std::vector<std::vector<Borrower>> BorrowersOn(
    const Snapshot& snapshot, const std::vector<NodeId>& nodes, Duration grace,
    const std::map<std::pair<WorkloadId, NodeId>, Time>& noticed) {
  std::vector<std::vector<Borrower>> out(nodes.size());
  const engine::WorkloadIndex index(snapshot);
  for (const Allocation& a : snapshot.allocations) {
    if (a.terminating) continue;
    const int wi = index.Find(a.workload);
    if (wi < 0) continue;
    const Workload& w = snapshot.workloads[wi];
    if (w.kind == WorkloadKind::kInference) continue;
    for (size_t k = 0; k < nodes.size(); ++k) {
      const NodeId node = nodes[k];
      if (noticed.count({a.workload, node}) > 0) continue;
      int here = 0;
      for (const PodPlacement& p : a.pods) {
        if (p.node != node) continue;
        if (std::find(a.leaving.begin(), a.leaving.end(), p) != a.leaving.end()) continue;
        ++here;
      }
      if (here == 0) continue;
      const int remaining = static_cast<int>(a.pods.size() - a.leaving.size()) - here;
      if (w.is_elastic() && remaining >= w.min_pods) continue;  // shrinks off: loses nothing
      Borrower b;
      b.gpus = a.gpu_count();  // stopping it stops all of it
      b.last_checkpoint = a.last_checkpoint;
      if (w.kind == WorkloadKind::kTraining) b.interval = w.training.checkpoint_interval;
      if (SavesOnRequest(&w, grace)) b.save = w.training.checkpoint_on_request;
      // A job past its declared end has overrun it: the end says nothing.
      const Time ends = a.start_time + w.expected_duration;
      if (w.expected_duration.count() > 0 && ends > snapshot.now) b.ends = ends;
      out[k].push_back(b);
    }
  }
  return out;
}

Time LastCheckpointAt(const Borrower& b, Time at) {
  if (b.interval.count() <= 0 || at <= b.last_checkpoint) return b.last_checkpoint;
  return b.last_checkpoint + ((at - b.last_checkpoint) / b.interval) * b.interval;
}

double LostAt(const std::vector<Borrower>& borrowers, Time at) {
  double lost = 0;
  for (const Borrower& b : borrowers) {
    if (at >= b.ends) continue;
    lost += b.save.count() > 0 ? b.gpus * ToSeconds(b.save)
                               : b.gpus * std::max(0.0, ToSeconds(at - LastCheckpointAt(b, at)));
  }
  return lost;
}

}  // namespace

std::vector<NodeId> ReturnsToDefer(const Snapshot& snapshot, const std::vector<NodeId>& early,
                                   Duration window, Duration tick, Duration grace,
                                   const std::map<std::pair<WorkloadId, NodeId>, Time>& noticed) {
  std::vector<NodeId> defer;
  if (early.empty() || window <= Duration(0)) return defer;
  const Time now = snapshot.now;
  const std::vector<std::vector<Borrower>> borrowers = BorrowersOn(snapshot, early, grace, noticed);
  for (size_t k = 0; k < early.size(); ++k) {
    const double lost_now = LostAt(borrowers[k], now);
    if (lost_now <= 0) continue;
    if (std::all_of(borrowers[k].begin(), borrowers[k].end(),
                    [](const Borrower& b) { return b.save.count() > 0; })) {
      defer.push_back(early[k]);  // the same price later: as late as is safe
      continue;
    }
    bool later_is_cheaper = false;
    auto consider = [&](Time event) {
      const Time candidate = event + tick;  // the first pass after it
      if (candidate <= now + window && LostAt(borrowers[k], candidate) < lost_now) later_is_cheaper = true;
    };
    for (const Borrower& b : borrowers[k]) {
      if (b.interval.count() > 0) consider(LastCheckpointAt(b, now) + b.interval);
      if (b.ends < kInfiniteFuture) consider(b.ends);
    }
    if (later_is_cheaper) defer.push_back(early[k]);
  }
  return defer;
}

}  // namespace tidal
