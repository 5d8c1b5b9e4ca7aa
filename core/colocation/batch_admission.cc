#include "core/colocation/batch_admission.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <unordered_map>

#include "core/common/check.h"

namespace tidal {
namespace {

std::string Minutes(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f min", ToSeconds(d) / 60.0);
  return buf;
}

std::unordered_map<WorkloadId, const Allocation*> AllocationIndex(const Snapshot& snapshot) {
  std::unordered_map<WorkloadId, const Allocation*> index;
  for (const Allocation& a : snapshot.allocations) index.emplace(a.workload, &a);
  return index;
}

// Workloads of `kind` in `state`, in id order. Filtering before sorting keeps
// a pass over tens of thousands of training jobs cheap.
std::vector<const Workload*> ById(const Snapshot& snapshot, WorkloadKind kind, WorkloadState state) {
  std::vector<const Workload*> out;
  snapshot.ForEachOfKind(kind, [&](const Workload& w) {
    if (w.state == state) out.push_back(&w);
  });
  std::sort(out.begin(), out.end(),
            [](const Workload* a, const Workload* b) { return a->id < b->id; });
  return out;
}

}  // namespace

Duration BatchRemaining(const Workload& job, const Allocation* allocation, Time now) {
  if (allocation == nullptr) return job.expected_duration;
  const Duration elapsed = std::max(Duration(0), now - allocation->start_time);
  return std::max(Duration(0), job.expected_duration - elapsed);
}

Duration BatchSlack(const Workload& job, const Allocation* allocation, Time now) {
  if (job.batch.deadline == kInfiniteFuture) return Duration::max();
  return job.batch.deadline - now - BatchRemaining(job, allocation, now);
}

std::vector<WorkloadId> BatchEdfOrder(const Snapshot& snapshot) {
  const auto allocations = AllocationIndex(snapshot);
  struct Entry {
    Time deadline;
    Duration slack;
    WorkloadId id;
  };
  std::vector<Entry> entries;
  snapshot.ForEachOfKind(WorkloadKind::kBatchInference, [&](const Workload& w) {
    if (w.state != WorkloadState::kPending && w.state != WorkloadState::kRunning) return;
    auto it = allocations.find(w.id);
    const Allocation* a = it == allocations.end() ? nullptr : it->second;
    entries.push_back({w.batch.deadline, BatchSlack(w, a, snapshot.now), w.id});
  });
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.deadline, a.slack, a.id) < std::tie(b.deadline, b.slack, b.id);
  });
  std::vector<WorkloadId> order;
  order.reserve(entries.size());
  for (const Entry& e : entries) order.push_back(e.id);
  return order;
}

std::optional<RejectDecision> CheckBatchDeadline(const Workload& job, Time now,
                                                 Time earliest_start) {
  if (job.kind != WorkloadKind::kBatchInference) return std::nullopt;
  if (job.batch.deadline == kInfiniteFuture || job.expected_duration.count() <= 0) {
    return std::nullopt;
  }
  const Time start = std::max(now, earliest_start);
  if (start + job.expected_duration <= job.batch.deadline) return std::nullopt;
  const Duration late = start + job.expected_duration - job.batch.deadline;
  RejectDecision reject;
  reject.workload = job.id;
  reject.reason = ReasonCode::kDeadline;
  reject.detail = "deadline: needs " + Minutes(job.expected_duration) + " from the earliest start " +
                  (start == now ? std::string("(now)")
                                : "in " + Minutes(start - now)) +
                  ", but the deadline is in " + Minutes(job.batch.deadline - now) +
                  "; it would finish " + Minutes(late) + " late (slack " +
                  Minutes(job.batch.deadline - now - job.expected_duration) + ")";
  return reject;
}

std::vector<RejectDecision> RejectInfeasibleBatch(const Snapshot& snapshot) {
  std::vector<RejectDecision> out;
  for (const Workload* w : ById(snapshot, WorkloadKind::kBatchInference, WorkloadState::kPending)) {
    if (auto reject = CheckBatchDeadline(*w, snapshot.now, snapshot.now)) {
      out.push_back(std::move(*reject));
    }
  }
  return out;
}

}  // namespace tidal
