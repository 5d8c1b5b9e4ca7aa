// POST /v1/agent/register (docs/api.md): what a node says about itself, and
// the reply. Every field but the name is optional: a node the cluster config
// already knows keeps what the request leaves out. Pool, labels and taints
// belong to the cluster file: a registration may repeat them, never change
// them (the server answers 400).
#ifndef TIDAL_PROTOCOL_NODE_REGISTRATION_H_
#define TIDAL_PROTOCOL_NODE_REGISTRATION_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/model/cluster.h"

namespace tidal::protocol {

struct GpuInfo {
  std::optional<int> index;  // absent = its position in the list
  std::string uuid;
  bool healthy = true;
  std::string model;   // "" = not sent
  int memory_gib = 0;  // 0 = not sent
  bool operator==(const GpuInfo&) const = default;
};

struct NetworkInfo {
  std::optional<double> nic_gbps;
  std::optional<bool> rdma;
  bool operator==(const NetworkInfo&) const = default;
};

struct NodeRegistration {
  std::string name;  // required
  std::optional<std::string> address;
  std::optional<std::string> pool;
  std::optional<std::string> rack;
  std::optional<std::string> zone;
  std::optional<std::string> gpu_model;
  std::optional<int> gpu_memory_gib;
  std::optional<std::string> driver_version;
  std::optional<bool> mig_capable;
  std::optional<NetworkInfo> network;
  std::optional<std::vector<GpuInfo>> gpus;
  // GPU indices per NVLink domain, e.g. [[0,1,2,3],[4,5,6,7]].
  std::optional<std::vector<std::vector<int>>> nvlink_domains;
  std::optional<std::map<std::string, std::string>> labels;
  std::optional<std::vector<Taint>> taints;
  bool operator==(const NodeRegistration&) const = default;
};

struct RegistrationReply {
  std::string node;
  int lease_s = 30;
  int heartbeat_interval_s = 5;
  // The node's own bearer credential (256 random bits, hex), issued on each
  // registration: the agent presents it for everything after registering.
  // The server keeps only its SHA-256 digest. "" from a server that issues
  // none.
  std::string credential;
  bool operator==(const RegistrationReply&) const = default;
};

nlohmann::json NodeRegistrationToJson(const NodeRegistration& reg);
// Strict; what depends on the cluster (a known pool, an index below the GPU
// count, NVLink domains that fit) is the server's to check.
StatusOr<NodeRegistration> NodeRegistrationFromJson(const nlohmann::json& j);

nlohmann::json RegistrationReplyToJson(const RegistrationReply& reply);
// Unknown fields are ignored; absent ones keep the defaults above.
StatusOr<RegistrationReply> RegistrationReplyFromJson(const nlohmann::json& j);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_NODE_REGISTRATION_H_
