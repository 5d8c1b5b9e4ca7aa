// A counting semaphore over pod start phases (model loads, image pulls): at
// most `capacity` pods of a node are in a start phase at once, so a burst of
// replica starts cannot saturate the node's disk and network and slow down
// the pods already serving there. Non-blocking: a pod that gets no slot
// waits for the next agent tick.
#ifndef TIDAL_AGENT_START_LIMITER_H_
#define TIDAL_AGENT_START_LIMITER_H_

#include "core/common/check.h"

namespace tidal::agent {

class StartLimiter {
 public:
  explicit StartLimiter(int capacity) : capacity_(capacity) { TIDAL_CHECK(capacity >= 1); }

  bool TryAcquire() {
    if (in_use_ >= capacity_) return false;
    ++in_use_;
    return true;
  }
  void Release() {
    TIDAL_CHECK(in_use_ > 0) << "StartLimiter released more than acquired";
    --in_use_;
  }
  int in_use() const { return in_use_; }
  int capacity() const { return capacity_; }

 private:
  int capacity_;
  int in_use_ = 0;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_START_LIMITER_H_
