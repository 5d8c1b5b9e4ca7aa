// Replica autoscaler for inference services.
//
// The raw need is MinReplicasForTarget(load, replica_capacity_rps, target_p99,
// headroom) for load = max(current rps, forecast rps), clamped to
// [min_pods, max_pods] of the service. Scaling up is immediate. Scaling down
// happens only once every need over the last `scale_down_delay` (and at least
// that long since the last scale-up) was below the target, and then only to
// the highest need in that window, so noisy load never makes the count flap.
//
// Cold start: the declared inference.cold_start, else
//   container_start + model_size_gib / bandwidth(model_source),
// with a node-local cache read at 2 GiB/s and shared storage at 0.5 GiB/s
// (a conservative share of one NVMe drive and of a 10 Gb/s storage link
// under contention); container_start defaults to 30 s (image already on the
// node, CUDA context and server start).
#ifndef TIDAL_CORE_COLOCATION_AUTOSCALER_H_
#define TIDAL_CORE_COLOCATION_AUTOSCALER_H_

#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/workload.h"

namespace tidal {

struct ColdStartModel {
  Duration container_start = seconds(30);
  double local_cache_gib_per_s = 2.0;
  double shared_storage_gib_per_s = 0.5;
};

// Declared cold start, else the estimate above.
Duration EstimateColdStart(const InferenceSpec& spec, const ColdStartModel& model = {});

struct AutoscalerOptions {
  double headroom = 0.2;
  Duration scale_down_delay = minutes(10);
};

// The replica count the latency model asks for, before clamping and
// hysteresis. 0 load -> 0.
int RequiredReplicas(const InferenceSpec& spec, double rps, double headroom);

// What the autoscaler remembers of one service between ticks: its target,
// since when, and the needs of the scale-down window.
struct ServiceScaling {
  int target = 0;
  Time since;  // first update or last scale-up
  std::deque<std::pair<Time, int>> needs;  // within scale_down_delay
  bool operator==(const ServiceScaling&) const = default;
};

class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerOptions options = {});

  // Updates the service's hysteresis state and returns its target replica
  // count. `service` must be an inference workload; call once per tick, in
  // time order.
  int Update(const Workload& service, double current_rps, double forecast_rps, Time now);

  // The last target returned for the service, if any.
  std::optional<int> Target(WorkloadId service) const;
  // Forget a finished service.
  void Forget(WorkloadId service);

  // The memory of every service, and back (Restore replaces it).
  std::map<WorkloadId, ServiceScaling> scaling() const;
  void Restore(const std::map<WorkloadId, ServiceScaling>& scaling);

 private:
  struct State : ServiceScaling {
    // The last RequiredReplicas call: sizing runs a bisection per replica
    // count tried, and the load often stays the same for many ticks.
    double memo_rps = -1;
    double memo_capacity_rps = 0;
    Duration memo_target{0};
    int memo_need = 0;
  };

  AutoscalerOptions options_;
  std::map<WorkloadId, State> state_;
};

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_AUTOSCALER_H_
