// What the server asks a node to run: one entry of
// GET /v1/agent/nodes/{name}/pods (docs/api.md), and the list.
#ifndef TIDAL_PROTOCOL_POD_ASSIGNMENT_H_
#define TIDAL_PROTOCOL_POD_ASSIGNMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "protocol/pod_key.h"

namespace tidal::protocol {

struct HttpEndpoint {
  // The port the replica would like; the agent passes the one it really
  // gets (this one while free on the node) as $PORT and probes that.
  // 0 = no fixed port.
  int port = 0;
  std::string path = "/";
  bool operator==(const HttpEndpoint&) const = default;
};

struct StopNotice {
  std::string cause;  // "priority", "reclaim", "idle", "cancel", "shrink", "drain", ...
  int64_t notice_time_ms = 0;
  int64_t grace_deadline_ms = 0;
  int signal = 15;  // SIGTERM; on the wire by name ("SIGTERM")
  // The workload saves on request (TrainingSpec::checkpoint_on_request) and
  // is asked to checkpoint now; the notice file says so. Absent = false.
  bool checkpoint = false;
  bool operator==(const StopNotice&) const = default;
};

// A pod's rank is not bounded by the world size: a pod a shrink removes
// keeps its rank while the world counts the pods that stay, and an inference
// replica keeps its rank while others come and go (server/pod_ranks.h).
inline constexpr int kMaxPodRank = 1 << 30;

struct PodAssignment {
  PodKey key;
  std::string name;  // workload name
  std::string kind = "training";  // "training", "inference", "batch_inference", "debug"
  int world_size = 1;
  std::vector<int> gpus;  // GPU indices on the node
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string image;
  std::string checkpoint_dir_key;  // stable across restarts
  std::optional<HttpEndpoint> readiness;
  std::optional<HttpEndpoint> load_endpoint;
  bool desired_run = true;  // on the wire "desired": "run" | "stop"
  std::optional<StopNotice> notice;
  bool operator==(const PodAssignment&) const = default;
};

// The reply: {"pods": [...]}.
struct PodAssignmentList {
  std::vector<PodAssignment> pods;
  // The node's assignment version (server/node_pods_watch.h): an agent
  // passes it back to wait for the next change. "" = not given.
  std::string version;
  bool operator==(const PodAssignmentList&) const = default;
};

nlohmann::json PodAssignmentToJson(const PodAssignment& pod);
// Checks types and ranges and names the bad field under `path`. Unknown
// fields are ignored: an agent must run against a newer server. Defaults
// for absent fields: name and checkpoint_dir_key "w<workload>", kind
// training, world_size 1, desired run, notice signal SIGTERM.
StatusOr<PodAssignment> PodAssignmentFromJson(const nlohmann::json& j, std::string_view path = "pod");

inline constexpr size_t kMaxVersionLength = 64;
nlohmann::json PodAssignmentListToJson(const PodAssignmentList& list);
StatusOr<PodAssignmentList> PodAssignmentListFromJson(const nlohmann::json& j);
// The "pods" array alone (also the heartbeat reply's).
StatusOr<std::vector<PodAssignment>> PodAssignmentsFromJson(const nlohmann::json& pods,
                                                            std::string_view path = "pods");

// "SIGTERM", "TERM" or "15" -> 15.
StatusOr<int> ParseSignal(const std::string& name);
// 15 -> "SIGTERM"; a number without a name as digits.
std::string SignalName(int signal);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_POD_ASSIGNMENT_H_
