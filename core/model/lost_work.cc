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

double LostGpuSeconds(const Workload* w, const Allocation& a, Time now, Duration grace) {
  return LostGpuSeconds(w, a.gpu_count(), std::max(a.last_checkpoint, a.start_time), now, grace);
}

}  // namespace tidal
