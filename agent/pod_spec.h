// What the server asks this node to run: one entry of
// GET /v1/agent/nodes/{name}/pods (docs/api.md), parsed and checked.
#ifndef TIDAL_AGENT_POD_SPEC_H_
#define TIDAL_AGENT_POD_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/common/status.h"

namespace tidal::agent {

struct HttpEndpoint {
  // The port the replica would like; the agent passes the one it really
  // gets (this one while free on the node) as $PORT and probes that.
  int port = 0;
  std::string path;
};

struct StopNotice {
  std::string cause;  // "priority", "reclaim", "idle", "cancel", ...
  int64_t notice_time_ms = 0;
  int64_t grace_deadline_ms = 0;
  int signal = 15;  // SIGTERM
};

struct PodKey {
  uint64_t workload = 0;
  int rank = 0;
  // Distinguishes a restarted pod from the earlier run of the same rank; the
  // server's `attempt` when it sends one.
  int64_t attempt = 0;
  auto operator<=>(const PodKey&) const = default;
};

struct PodSpec {
  PodKey key;
  std::string name;  // workload name
  std::string kind;  // "training", "inference", "batch_inference", "debug"
  int world_size = 1;
  std::vector<int> gpus;
  std::string master_addr;
  int master_port = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string checkpoint_dir_key;
  std::optional<HttpEndpoint> readiness;
  std::optional<HttpEndpoint> load_endpoint;
  bool desired_run = true;
  std::optional<StopNotice> notice;
};

// Parses one pod object; the message names the offending field.
StatusOr<PodSpec> ParsePodSpec(const nlohmann::json& pod);
// The inverse of ParsePodSpec (desired "run"; the notice is not kept): what
// the agent's state file stores so that a restarted agent can adopt the pod.
nlohmann::json PodSpecToJson(const PodSpec& spec);
// Parses {"pods": [...]}.
StatusOr<std::vector<PodSpec>> ParsePodList(const nlohmann::json& body);
// "SIGTERM", "TERM" or "15" -> 15.
StatusOr<int> ParseSignal(const std::string& name);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_SPEC_H_
