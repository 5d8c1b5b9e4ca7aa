#include "core/model/lost_work.h"

#include <algorithm>

namespace tidal {

bool SavesOnRequest(const Workload* w, Duration grace) {
  if (w == nullptr) return false;
  const Duration save = w->training.checkpoint_on_request;
  return w->kind == WorkloadKind::kTraining && save.count() > 0 && save <= grace;
}

double UnsavedGpuSeconds(int gpus, Time last_checkpoint, Time now) {
  return gpus * std::max(0.0, ToSeconds(now - last_checkpoint));
}

double LostGpuSeconds(const Workload* w, int gpus, Time last_checkpoint, Time now, Duration grace) {
  if (SavesOnRequest(w, grace)) return gpus * ToSeconds(w->training.checkpoint_on_request);
  return UnsavedGpuSeconds(gpus, last_checkpoint, now);
}

double UnsavedGpuSeconds(const Allocation& a, Time now) {
  return UnsavedGpuSeconds(a.gpu_count(), std::max(a.last_checkpoint, a.start_time), now);
}

double LostGpuSeconds(const Workload* w, const Allocation& a, Time now, Duration grace) {
  if (SavesOnRequest(w, grace)) return a.gpu_count() * ToSeconds(w->training.checkpoint_on_request);
  return UnsavedGpuSeconds(a, now);
}

}  // namespace tidal
