// What stopping a running workload loses, the one price that victim
// selection, the co-location returns, the Lifecycle's notices and the
// metrics share.
//
// A workload given notice at `now` with `grace` to leave loses the work it
// has not saved:
//  - a training job that saves on request (TrainingSpec::
//    checkpoint_on_request = s > 0) and whose grace covers the save (s <=
//    grace) checkpoints at the notice, so it loses only the save itself:
//    GPUs x s;
//  - anything else loses what it did since its last checkpoint (the start
//    when it has none): GPUs x (now - last checkpoint), never negative.
#ifndef TIDAL_CORE_MODEL_LOST_WORK_H_
#define TIDAL_CORE_MODEL_LOST_WORK_H_

#include "core/common/time.h"
#include "core/model/allocation.h"
#include "core/model/workload.h"

namespace tidal {

// Whether `w` saves a checkpoint when its notice asks and `grace` covers
// the save. A null `w` (an allocation whose workload is unknown) does not.
bool SavesOnRequest(const Workload* w, Duration grace);

// GPU-seconds of work `gpus` GPUs did since their last checkpoint at
// `last_checkpoint`, never negative: what a stop without a save loses.
double UnsavedGpuSeconds(int gpus, Time last_checkpoint, Time now);
// The same for the whole allocation `a` (its start when it has no
// checkpoint).
double UnsavedGpuSeconds(const Allocation& a, Time now);

// GPU-seconds lost by stopping `gpus` GPUs of `w`, last checkpointed at
// `last_checkpoint`, with notice at `now` and `grace` to leave.
double LostGpuSeconds(const Workload* w, int gpus, Time last_checkpoint, Time now, Duration grace);

// The same for the whole allocation `a` (its start when it has no
// checkpoint).
double LostGpuSeconds(const Workload* w, const Allocation& a, Time now, Duration grace);

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_LOST_WORK_H_
