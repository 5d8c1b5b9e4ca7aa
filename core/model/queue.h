// Queues form a tree. Quota is counted in GPUs. A queue is admitted up to its
// guarantee; beyond it, it borrows others' idle guarantee within its
// borrowing limit and their lending limits.
#ifndef TIDAL_CORE_MODEL_QUEUE_H_
#define TIDAL_CORE_MODEL_QUEUE_H_

#include <string>
#include <vector>

#include <algorithm>

#include "core/common/ids.h"
#include "core/model/workload.h"

namespace tidal {

inline constexpr int kUnlimited = -1;

struct Queue {
  QueueId id;
  std::string name;
  QueueId parent;             // invalid for a root
  int guaranteed_gpus = 0;
  // How much of its idle guarantee others may borrow. kUnlimited = all of it;
  // guaranteed_gpus - lending_limit_gpus is never lent.
  int lending_limit_gpus = kUnlimited;
  // How far above its guarantee it may go by borrowing. kUnlimited = no cap.
  int borrowing_limit_gpus = kUnlimited;
  double weight = 1.0;        // fair share among borrowers
  std::vector<PoolId> pools;  // pools its workloads may use; empty = any non-dedicated

  friend bool operator==(const Queue&, const Queue&) = default;
};

// Business tier and budget of a project; priority templates read these.
struct Project {
  ProjectId id;
  std::string name;
  std::string tenant;
  std::string tier;            // e.g. "critical", "standard", "experiment"
  QueueId default_queue;
  double budget_gpu_hours = 0;  // 0 = no budget set
  double used_gpu_hours = 0;    // in the current budget period
  bool top_tier_approved = false;
  // Queues its workloads may name besides default_queue (cluster file
  // `allowed_queues`). A queue is someone's quota: without a grant a
  // project cannot spend another team's guarantee or reach its pools.
  std::vector<QueueId> allowed_queues;
  // Kinds its workloads may be (cluster file `allowed_kinds`); empty = all.
  // A kind carries a priority bonus and a preemptibility class, so it is an
  // entitlement, not a label.
  std::vector<WorkloadKind> allowed_kinds;

  bool MayUseQueue(QueueId q) const {
    return q == default_queue ||
           std::find(allowed_queues.begin(), allowed_queues.end(), q) != allowed_queues.end();
  }
  bool MaySubmitKind(WorkloadKind k) const {
    return allowed_kinds.empty() ||
           std::find(allowed_kinds.begin(), allowed_kinds.end(), k) != allowed_kinds.end();
  }
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_QUEUE_H_
