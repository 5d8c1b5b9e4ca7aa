// The engine's per-pass view of GPU capacity. Nodes that every workload sees
// the same way (same pool, GPU model and count, NVLink layout, labels, taints,
// health, loan state) share one NodeClass, so eligibility is decided once per
// class instead of once per node. Inside a class, nodes are bucketed by their
// free-GPU count, which makes best-fit (the smallest node that fits) a walk
// over at most 65 buckets instead of a scan of every node.
//
// It lives in placement/ because the gang placer, eligibility and the victim
// selector all work on it and sit below the scheduling pass; it stays in
// namespace tidal::engine because it is still the engine's view of one pass.
#ifndef TIDAL_CORE_PLACEMENT_CLUSTER_STATE_H_
#define TIDAL_CORE_PLACEMENT_CLUSTER_STATE_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/common/ids.h"
#include "core/model/cluster.h"
#include "core/model/snapshot.h"

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

  bool operator==(const NodeClass&) const = default;
};

// Node classes without the loan state: everything about a node that changes
// only when the cluster does. Building it costs a string key per node, so a
// caller that knows the cluster did not change (Snapshot::cluster_version)
// builds it once and shares it across passes; ClusterState only splits each
// static class by loan state, an integer step per node.
struct StaticNodeClasses {
  struct Class {
    NodeId representative;
    int node_count = 0;
    int max_domain_gpus = 0;
    // GPUs of its members per rack and per zone, (index, GPUs) ascending by
    // index: the static capacity eligibility reports, without a node scan.
    std::vector<std::pair<uint32_t, int>> rack_gpus;
    std::vector<std::pair<uint32_t, int>> zone_gpus;
  };
  std::vector<Class> classes;  // in order of first member
  std::vector<int> class_of;   // per node
  // One whole-node domain for nodes that list no NVLink domains.
  std::vector<std::vector<GpuMask>> whole_node_domains;

  static std::shared_ptr<const StaticNodeClasses> Build(const Cluster& cluster);
};

class ClusterState {
 public:
  // Free GPUs are a node's GPUs minus failed GPUs minus every allocation in
  // the snapshot, terminating ones included (they hold GPUs until gone).
  // `statics` must have been built from this snapshot's cluster; null builds
  // it here. `allocation_gpus` (may be null) receives each allocation's GPU
  // count, computed in the same scan.
  explicit ClusterState(const Snapshot& snapshot,
                        std::shared_ptr<const StaticNodeClasses> statics = nullptr,
                        std::vector<int>* allocation_gpus = nullptr);
  // It keeps a reference to the snapshot's cluster, which must outlive it.
  explicit ClusterState(Snapshot&&, std::shared_ptr<const StaticNodeClasses> = nullptr,
                        std::vector<int>* = nullptr) = delete;

  // Brings a state built from an earlier snapshot of the same cluster (the
  // same `statics`, i.e. the same Snapshot::cluster_version) and the same
  // loans to `snapshot`, moving only the nodes whose free GPUs changed, so a
  // caller that keeps one state across passes pays per changed node instead
  // of per node; with the snapshot's free_gpus_log it does not even compare
  // the others. The result is the state the constructor would build: each
  // bucket stays in ascending node order, which is the order placement
  // walks, so the decisions do not depend on which way it was made. Returns
  // false, changing nothing, when it cannot (other statics or loans, or a
  // snapshot without free_gpus); the caller then builds a new one.
  bool CatchUp(const Snapshot& snapshot, const std::shared_ptr<const StaticNodeClasses>& statics);
  // Field-by-field equality (the cluster reference aside): for checks.
  bool SameAs(const ClusterState& other) const;

  const Cluster& cluster() const { return *cluster_; }
  int node_count() const { return static_cast<int>(free_.size()); }
  int class_count() const { return static_cast<int>(classes_.size()); }
  const NodeClass& node_class(int c) const { return classes_[c]; }
  int class_of(NodeId n) const { return class_of_[n.value()]; }
  // The loan-independent class of class c.
  int static_class_of(int c) const { return static_of_[c]; }
  const StaticNodeClasses& statics() const { return *statics_; }

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
  // Fills buckets_, bucket_pos_ and class_free_ from free_, each bucket in
  // ascending node order.
  void FillBuckets();
  // Moves a node between buckets keeping both in ascending node order.
  void MoveSorted(uint32_t node, int from_count, int to_count);

  const Cluster* cluster_;
  std::shared_ptr<const StaticNodeClasses> statics_;
  std::vector<NodeClass> classes_;
  std::vector<int> static_of_;  // per class
  std::vector<int> class_of_;
  std::vector<GpuMask> free_;
  std::vector<int> class_free_;
  // buckets_[class][free count] and each node's index inside its bucket.
  std::vector<std::vector<std::vector<uint32_t>>> buckets_;
  std::vector<uint32_t> bucket_pos_;
  std::vector<bool> lent_;  // the snapshot's lent_nodes it was built with
  // How far the snapshot's free_gpus_log was read: changes up to log_seen_
  // of lineage log_lineage_ are in free_ (0 = no log read).
  uint64_t log_lineage_ = 0;
  uint64_t log_seen_ = 0;
};

}  // namespace tidal::engine

#endif  // TIDAL_CORE_PLACEMENT_CLUSTER_STATE_H_
