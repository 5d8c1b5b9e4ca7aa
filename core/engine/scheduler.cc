#include "core/engine/scheduler.h"

#include "core/engine/scheduling_pass.h"

namespace tidal {

Decisions Scheduler::Schedule(const Snapshot& snapshot) const {
  return engine::SchedulingPass(policy_, snapshot).Run();
}

}  // namespace tidal
