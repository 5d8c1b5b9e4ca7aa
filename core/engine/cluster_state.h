// The engine's per-pass view of GPU capacity. Nodes that every workload sees
// the same way (same pool, GPU model and count, NVLink layout, labels, taints,
// health, loan state) share one NodeClass, so eligibility is decided once per
// class instead of once per node. Inside a class, nodes are bucketed by their
// free-GPU count, which makes best-fit (the smallest node that fits) a walk
// over at most 65 buckets instead of a scan of every node.
#ifndef TIDAL_CORE_ENGINE_CLUSTER_STATE_H_
#define TIDAL_CORE_ENGINE_CLUSTER_STATE_H_

#include <cstdint>
#include <vector>

#include "core/common/ids.h"
#include "core/engine/snapshot.h"
#include "core/model/cluster.h"

namespace tidal::engine {

struct NodeClass {
  int id = 0;
  NodeId representative;  // its first node; every member has its attributes
  PoolId pool;
  bool usable = true;     // not failed and not cordoned
  bool degraded = false;
  bool lent = false;      // a shared-pool node lent to training
  int gpu_count = 0;
  int max_domain_gpus = 0;  // the largest NVLink domain of a member
  int node_count = 0;
};

class ClusterState {
 public:
  // Free GPUs are a node's GPUs minus failed GPUs minus every allocation in
  // the snapshot, terminating ones included (they hold GPUs until gone).
  explicit ClusterState(const Snapshot& snapshot);
  // It keeps a reference to the snapshot's cluster, which must outlive it.
  explicit ClusterState(Snapshot&&) = delete;

  const Cluster& cluster() const { return *cluster_; }
  int node_count() const { return static_cast<int>(free_.size()); }
  int class_count() const { return static_cast<int>(classes_.size()); }
  const NodeClass& node_class(int c) const { return classes_[c]; }
  int class_of(NodeId n) const { return class_of_[n.value()]; }

  GpuMask free_mask(NodeId n) const { return free_[n.value()]; }
  int free_count(NodeId n) const;
  // Free GPUs over all nodes of class c.
  int class_free_gpus(int c) const { return class_free_[c]; }
  // Node indices of class c with exactly k free GPUs, 0 <= k <= gpu_count.
  const std::vector<uint32_t>& bucket(int c, int k) const { return buckets_[c][k]; }
  // NVLink domains of a node; a node that lists none is one domain.
  const std::vector<GpuMask>& domains(NodeId n) const;

  // GPUs in `mask` become used / free. Taking a used GPU is a bug; releasing
  // skips failed GPUs, which stay out of service.
  void Take(NodeId n, GpuMask mask);
  void Release(NodeId n, GpuMask mask);

 private:
  void Move(uint32_t node, int from_count, int to_count);

  const Cluster* cluster_;
  std::vector<NodeClass> classes_;
  std::vector<int> class_of_;
  std::vector<GpuMask> free_;
  std::vector<int> class_free_;
  // buckets_[class][free count] and each node's index inside its bucket.
  std::vector<std::vector<std::vector<uint32_t>>> buckets_;
  std::vector<uint32_t> bucket_pos_;
  std::vector<std::vector<GpuMask>> whole_node_domains_;
};

}  // namespace tidal::engine

#endif  // TIDAL_CORE_ENGINE_CLUSTER_STATE_H_
