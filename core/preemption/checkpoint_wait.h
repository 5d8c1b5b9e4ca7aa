// When to stop the victims a training preemptor has chosen: now, or a
// little later, just after their next periodic checkpoints.
//
// A victim that checkpoints every `interval` loses, when stopped at time T,
// what it did since its last checkpoint before T (core/model/lost_work.h);
// periodic checkpoints are expected at last + k x interval, but only from a
// victim that keeps its interval (its last checkpoint less than one
// interval ago): one late for a checkpoint is priced as if it made no more,
// so a job that declares an interval and never checkpoints delays its
// preemptor at most once, until the checkpoint it missed. Waiting is not
// free either: the preemptor is owed its GPUs now (by priority or by its
// guarantee), and each second it waits costs it its GPUs' worth. So the
// price of stopping all victims at T is
//     cost(T) = sum over victims of LostGpuSeconds(v, gpus, last_v(T), T)
//             + preemptor_gpus x (T - now),
// where last_v(T) is the victim's latest expected checkpoint at or before T
// (its recorded one when T is now). The candidate times are now and each
// victim's next expected checkpoint within `max_wait`; the cheapest wins,
// the earliest on a tie. Waiting therefore pays only when the victims would
// lose more GPU-time than the preemptor waits: a gang 25 minutes past its
// checkpoint is worth 5 minutes of the same GPUs, one that started a
// minute ago is not. A victim that saves on request (within the grace)
// costs the same at every time, and one that never checkpoints only grows
// dearer, so neither makes waiting pay.
#ifndef TIDAL_CORE_PREEMPTION_CHECKPOINT_WAIT_H_
#define TIDAL_CORE_PREEMPTION_CHECKPOINT_WAIT_H_

#include <span>

#include "core/common/time.h"
#include "core/model/workload.h"

namespace tidal::preemption {

// One chosen victim's part in the price.
struct UnsavedWork {
  const Workload* workload = nullptr;  // null: priced as never checkpointing
  int gpus = 0;
  Time last_checkpoint;  // or its start, when it has none
};

struct StopTime {
  Time at;                          // now, or a victim's next checkpoint
  double lost_gpu_seconds = 0;      // the victims' lost work if stopped at `at`
  double lost_now_gpu_seconds = 0;  // the same if stopped now
};

StopTime CheapestStopTime(std::span<const UnsavedWork> victims, int preemptor_gpus, Time now, Duration max_wait,
                          Duration grace);

}  // namespace tidal::preemption

#endif  // TIDAL_CORE_PREEMPTION_CHECKPOINT_WAIT_H_
