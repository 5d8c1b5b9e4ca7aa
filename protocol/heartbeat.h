// POST /v1/agent/nodes/{name}/heartbeat (docs/api.md): the node's GPU health
// and use, and the reply, its lease and desired pods.
#ifndef TIDAL_PROTOCOL_HEARTBEAT_H_
#define TIDAL_PROTOCOL_HEARTBEAT_H_

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "protocol/pod_assignment.h"

namespace tidal::protocol {

struct GpuReport {
  int index = 0;  // required on the wire
  bool healthy = true;
  int xid = 0;  // the last critical Xid, 0 = none
  int ecc_uncorrectable = 0;
  std::optional<double> utilization;  // 0..1
  std::optional<double> memory_used_gib;
  bool operator==(const GpuReport&) const = default;
};

struct Heartbeat {
  std::vector<GpuReport> gpus;
  // The agent follows its pods by the pod watch (GET .../pods?wait_ms=),
  // so the reply need not list them: the heartbeat is then only a lease
  // (and GPU health), which the server answers without waiting on the
  // store for anything but the heartbeat's own changes.
  bool pods_by_watch = false;
  bool operator==(const Heartbeat&) const = default;
};

struct HeartbeatReply {
  std::optional<int> lease_s;
  // Absent = the server said nothing about the pods (keep what runs);
  // empty = nothing should run.
  std::optional<std::vector<PodAssignment>> pods;
  bool operator==(const HeartbeatReply&) const = default;
};

nlohmann::json HeartbeatToJson(const Heartbeat& heartbeat);
// Strict. The index is checked against the node's GPU count by the server,
// which knows it.
StatusOr<Heartbeat> HeartbeatFromJson(const nlohmann::json& j);

nlohmann::json HeartbeatReplyToJson(const HeartbeatReply& reply);
// Unknown fields are ignored (a newer server).
StatusOr<HeartbeatReply> HeartbeatReplyFromJson(const nlohmann::json& j);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_HEARTBEAT_H_
