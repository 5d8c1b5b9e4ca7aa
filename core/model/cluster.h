// The cluster as the engine sees it: pools, nodes with their GPUs, and the
// topology tree NVLink domain ⊂ node ⊂ rack ⊂ zone.
#ifndef TIDAL_CORE_MODEL_CLUSTER_H_
#define TIDAL_CORE_MODEL_CLUSTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/ids.h"

namespace tidal {

// One bit per GPU on a node; a node has at most 64 GPUs.
using GpuMask = uint64_t;
inline constexpr int kMaxGpusPerNode = 64;

enum class PoolKind {
  kInferenceReserved,  // inference only; never lent
  kShared,             // elastic: lent to training while inference is low
  kTraining,
  kDedicated,          // only its owner queue may use it
  kSemiDedicated,      // its owner comes first, but it may lend
};

struct Pool {
  PoolId id;
  std::string name;  // "inference-reserved", "shared", "training", "dedicated:nlp"
  PoolKind kind = PoolKind::kTraining;
  QueueId owner;     // for kDedicated and kSemiDedicated

  friend bool operator==(const Pool&, const Pool&) = default;
};

// kNotReady: the control plane has no live agent for the node (it never
// registered, or its lease ran out), so nothing it places there would start.
// kFailed: the node itself failed. Neither takes work.
enum class Health { kHealthy, kDegraded, kFailed, kNotReady };
// "healthy", "degraded", "failed", "not_ready".
std::string_view HealthName(Health health);

struct Taint {
  std::string key;
  std::string value;
  bool operator==(const Taint&) const = default;
};

struct NetworkSpec {
  double nic_gbps = 0;
  bool rdma = false;
};

struct Node {
  NodeId id;
  std::string name;
  PoolId pool;
  RackId rack;
  ZoneId zone;

  // All GPUs on a node are one model.
  std::string gpu_model;  // e.g. "H100-SXM-80GB"
  int gpu_memory_gib = 0;
  int gpu_count = 0;
  // Each NVLink domain is a mask of the node's GPUs; together they cover the
  // node. A node without NVLink has one domain per GPU.
  std::vector<GpuMask> nvlink_domains;
  bool mig_capable = false;
  std::string driver_version;
  NetworkSpec network;

  Health health = Health::kHealthy;
  GpuMask failed_gpus = 0;   // GPUs with a fatal error (XID, uncorrectable ECC)
  bool cordoned = false;     // drained by an operator or by a GPU fault

  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;

  GpuMask all_gpus() const {
    return gpu_count >= 64 ? ~GpuMask{0} : ((GpuMask{1} << gpu_count) - 1);
  }
  // New work may land here: healthy or degraded, and not cordoned.
  bool takes_work() const {
    return (health == Health::kHealthy || health == Health::kDegraded) && !cordoned;
  }
};

struct Rack {
  RackId id;
  std::string name;
  ZoneId zone;
};

struct Zone {
  ZoneId id;
  std::string name;
};

struct Cluster {
  std::vector<Pool> pools;
  std::vector<Zone> zones;
  std::vector<Rack> racks;
  std::vector<Node> nodes;

  const Node& node(NodeId id) const { return nodes[id.value()]; }
  const Pool& pool(PoolId id) const { return pools[id.value()]; }
  int total_gpus() const;
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_CLUSTER_H_
