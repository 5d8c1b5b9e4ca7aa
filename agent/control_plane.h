// The agent's view of the server: the agent endpoints of docs/api.md
// behind an interface, so the agent loop is tested against an in-memory fake
// and run against HTTP. The bodies are the protocol codecs' JSON
// (protocol/node_registration.h, heartbeat.h, pod_event.h, pod_log.h).
#ifndef TIDAL_AGENT_CONTROL_PLANE_H_
#define TIDAL_AGENT_CONTROL_PLANE_H_

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/common/time.h"

namespace tidal::agent {

struct Lease {
  int lease_s = 30;
  int heartbeat_interval_s = 5;
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  // POST /v1/agent/register.
  virtual StatusOr<Lease> Register(const nlohmann::json& body) = 0;
  // POST /v1/agent/nodes/{node}/heartbeat; returns the reply ({"pods": ...}).
  virtual StatusOr<nlohmann::json> Heartbeat(const std::string& node,
                                             const nlohmann::json& body) = 0;
  // GET /v1/agent/nodes/{node}/pods?version=V&wait_ms=N: the node's pods
  // (protocol::PodAssignmentList) once they differ from `version`, or after
  // `wait` (server/node_pods_watch.h). FailedPrecondition from a control
  // plane without it (test fakes): heartbeat replies then carry the pods.
  virtual StatusOr<nlohmann::json> WatchPods(const std::string& /*node*/, const std::string& /*version*/,
                                             Duration /*wait*/) {
    return FailedPrecondition("no pod watch");
  }
  // Ends a WatchPods in flight; every later one returns at once.
  virtual void CancelWatch() {}
  // POST /v1/agent/nodes/{node}/pods/status with {"events": [...]}.
  virtual Status ReportEvents(const std::string& node, const nlohmann::json& body) = 0;
  // POST /v1/agent/nodes/{node}/pods/logs with a protocol::PodLogBatch. A
  // control plane that keeps no logs (most test fakes) takes and drops them.
  virtual Status ShipLogs(const std::string& /*node*/, const nlohmann::json& /*body*/) { return Status::Ok(); }
};

// `server_urls` like "http://127.0.0.1:8080", or the replicas of a
// replicated control plane, "http://a:8080,http://b:8080"
// (protocol::ParseServerList): calls go to one of them, and move to the
// leader a replica names when it is in the list (protocol/leader_redirect.h),
// else to the next one, when a replica cannot be reached or does not lead;
// kUnavailable, naming the replicas tried, when none answered as the leader.
// Replies outside 2xx become a Status carrying the server's error message;
// 404 maps to kNotFound (the node is unknown: register again), 401/403 to
// kUnauthenticated / kPermissionDenied. `token` is the bootstrap token; the
// node credential the server issues is kept in `credential_file` (mode 0600)
// when one is given, so that a restarted agent keeps its node and its pods.
// An https:// server's certificate must chain to `ca_file` (PEM), or to the
// system's CAs when it is "": tokens never go to a server that cannot prove
// its name. With `ca_file`, every URL of the list must be https://.
StatusOr<std::unique_ptr<ControlPlane>> MakeHttpControlPlane(const std::string& server_urls,
                                                             const std::string& token,
                                                             Duration timeout = seconds(5),
                                                             const std::string& credential_file = "",
                                                             const std::string& ca_file = "");

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_CONTROL_PLANE_H_
