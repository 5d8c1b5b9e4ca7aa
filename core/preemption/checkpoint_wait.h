// When to stop the victims a training preemptor has chosen: now, or a
// little later, just after their next periodic checkpoints.
//
// A victim that checkpoints every `interval` loses, when stopped at time T,
// what it did since its last checkpoint before T (core/model/lost_work.h);
// periodic checkpoints are expected at last + k x interval. So the price of
// stopping all victims at T is
//     cost(T) = sum over victims of LostGpuSeconds(v, gpus, last_v(T), T)
//             + idle_gpus x (T - now),
// where last_v(T) is the victim's latest expected checkpoint at or before T
// (its recorded one when T is now) and idle_gpus are the GPUs of the
// preemptor's plan that are free now and stay held, unused, while it waits.
// The candidate times are now and each victim's next expected checkpoint
// within `max_wait`; the cheapest wins, the earliest on a tie. A victim that
// saves on request (within the grace) costs the same at every time, and one
// that never checkpoints only grows dearer, so neither makes waiting pay.
// The preemptor's own delay is not a cost here: the victims keep doing
// work they will keep, and it is bounded by `max_wait`.
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
  Time at;                       // now, or a victim's next checkpoint
  double lost_gpu_seconds = 0;   // the victims' lost work if stopped at `at`
  double lost_now_gpu_seconds = 0;  // the same if stopped now
};

StopTime CheapestStopTime(std::span<const UnsavedWork> victims, int idle_gpus, Time now, Duration max_wait,
                          Duration grace);

}  // namespace tidal::preemption

#endif  // TIDAL_CORE_PREEMPTION_CHECKPOINT_WAIT_H_
