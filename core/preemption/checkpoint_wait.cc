#include "core/preemption/checkpoint_wait.h"

#include "core/model/lost_work.h"

namespace tidal::preemption {
namespace {

// The victim's checkpoint interval while it keeps it (its last checkpoint
// less than one interval ago), else 0: a job late for its checkpoint is
// not expected to make the next one either.
Duration KeptInterval(const UnsavedWork& v, Time now) {
  if (v.workload == nullptr || v.workload->kind != WorkloadKind::kTraining) return Duration::zero();
  const Duration interval = v.workload->training.checkpoint_interval;
  return interval > Duration::zero() && now - v.last_checkpoint < interval ? interval : Duration::zero();
}

// The victim's latest expected checkpoint at or before `at` (>= now).
Time LastCheckpointAt(const UnsavedWork& v, Time now, Time at) {
  const Duration interval = KeptInterval(v, now);
  if (interval <= Duration::zero() || at <= v.last_checkpoint) return v.last_checkpoint;
  return v.last_checkpoint + ((at - v.last_checkpoint) / interval) * interval;
}

double LostAt(std::span<const UnsavedWork> victims, Time now, Time at, Duration grace) {
  double lost = 0;
  for (const UnsavedWork& v : victims) {
    lost += LostGpuSeconds(v.workload, v.gpus, LastCheckpointAt(v, now, at), at, grace);
  }
  return lost;
}

}  // namespace

StopTime CheapestStopTime(std::span<const UnsavedWork> victims, int preemptor_gpus, Time now, Duration max_wait,
                          Duration grace) {
  StopTime best;
  best.at = now;
  best.lost_now_gpu_seconds = LostAt(victims, now, now, grace);
  best.lost_gpu_seconds = best.lost_now_gpu_seconds;
  double best_cost = best.lost_gpu_seconds;
  for (const UnsavedWork& v : victims) {
    const Duration interval = KeptInterval(v, now);
    if (interval <= Duration::zero() || SavesOnRequest(v.workload, grace)) continue;
    const Time at = v.last_checkpoint + interval;  // its next checkpoint
    if (at <= now || at - now > max_wait) continue;
    const double lost = LostAt(victims, now, at, grace);
    const double cost = lost + preemptor_gpus * ToSeconds(at - now);
    if (cost < best_cost || (cost == best_cost && at < best.at)) {
      best_cost = cost;
      best.at = at;
      best.lost_gpu_seconds = lost;
    }
  }
  return best;
}

}  // namespace tidal::preemption
