// What POST /v1/agent/nodes/{name}/pods/status carries (docs/api.md): the
// agent's events about its pods, one list per call.
#ifndef TIDAL_PROTOCOL_POD_EVENT_H_
#define TIDAL_PROTOCOL_POD_EVENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "protocol/pod_key.h"

namespace tidal::protocol {

// One replica's load, as it reported it. A figure the replica did not give
// is negative and left off the wire (the server then keeps its last one).
struct LoadReport {
  double rps = -1;
  double p95_ms = -1;
  double p99_ms = -1;
  bool operator==(const LoadReport&) const = default;
};

// How a pod that was told to stop ended; only on the "exited" event of such
// a pod. Absent means the agent did not say, which the server counts as
// "not checkpointed in time".
struct StopOutcome {
  int64_t notice_time_ms = 0;  // when the agent delivered the notice
  bool killed_at_deadline = false;
  bool checkpointed_in_time = false;
  bool operator==(const StopOutcome&) const = default;
};

// The longest exit reason kept (bytes); see PodEventFromJson.
inline constexpr size_t kMaxPodReasonBytes = 1024;

struct PodEvent {
  PodKey key;          // key.attempt 0 = not sent (the server then takes any attempt)
  std::string phase;   // "running", "ready", "exited"; "" = a periodic report
  int64_t time_ms = 0;  // 0 = not sent (the server uses its own clock)
  // exited
  int exit_code = 0;
  int signal = 0;
  std::string reason;
  int64_t checkpoint_time_ms = 0;  // 0 = none
  // ready: launch to ready
  int64_t cold_start_ms = -1;  // -1 = not sent
  std::optional<StopOutcome> stop;
  // periodic reports
  std::optional<LoadReport> load;
  std::optional<double> utilization;  // 0..1
  bool operator==(const PodEvent&) const = default;
};

// The body: {"events": [...]}.
struct PodEventBatch {
  std::vector<PodEvent> events;
  bool operator==(const PodEventBatch&) const = default;
};

nlohmann::json PodEventToJson(const PodEvent& event);
// Strict: an unknown field, a wrong type or a value out of range is an
// error that names the field under `path`.
StatusOr<PodEvent> PodEventFromJson(const nlohmann::json& j, std::string_view path = "event");

// A replica's reply to its load endpoint (docs/agent.md "Load reports"):
// {"rps", "p95_ms", "p99_ms"}, each in [0, 1e9] (the range the server takes
// in a pod event, so that a pod cannot make the agent's whole event batch
// refused); other keys are ignored, and a figure left out is 0.
StatusOr<LoadReport> LoadReplyFromJson(const nlohmann::json& j);

nlohmann::json PodEventBatchToJson(const PodEventBatch& batch);
StatusOr<PodEventBatch> PodEventBatchFromJson(const nlohmann::json& j);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_POD_EVENT_H_
