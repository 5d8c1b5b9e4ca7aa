// Batch inference deadlines and debug runtime limits.
//
// Batch: remaining = expected_duration for a pending job, expected_duration -
// (now - start) for a running one (at full size; floor 0). slack = deadline -
// now - remaining. Jobs are served earliest deadline first, then least slack,
// then id. A pending job whose earliest possible finish (earliest start +
// expected_duration; earliest start = now unless the caller knows later) is
// after its deadline is rejected with ReasonCode::kDeadline and the numbers.
// A job with unknown duration (0) or no deadline is never rejected.
//
// Debug: a debug session stops at start + max_runtime. Its notice goes out
// `grace` earlier, so the grace deadline is exactly start + max_runtime; a
// session already past that point gets notice now and the grace period.
#ifndef TIDAL_CORE_COLOCATION_BATCH_ADMISSION_H_
#define TIDAL_CORE_COLOCATION_BATCH_ADMISSION_H_

#include <optional>
#include <vector>

#include "core/common/time.h"
#include "core/model/decision.h"
#include "core/model/snapshot.h"
#include "core/model/workload.h"

namespace tidal {

// `allocation` is null for a pending job.
Duration BatchRemaining(const Workload& job, const Allocation* allocation, Time now);
// Deadline - now - remaining; may be negative. Duration::max() with no deadline.
Duration BatchSlack(const Workload& job, const Allocation* allocation, Time now);

// Pending and running batch-inference workloads of the snapshot in EDF order.
std::vector<WorkloadId> BatchEdfOrder(const Snapshot& snapshot);

// The rejection for a pending batch job that cannot meet its deadline even if
// it started at `earliest_start` (>= now), or nullopt.
std::optional<RejectDecision> CheckBatchDeadline(const Workload& job, Time now,
                                                 Time earliest_start);

// CheckBatchDeadline(start = now) over every pending batch job, in id order.
std::vector<RejectDecision> RejectInfeasibleBatch(const Snapshot& snapshot);

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_BATCH_ADMISSION_H_
