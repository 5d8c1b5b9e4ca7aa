// Builds engine snapshots for tests: pools, zones, racks, nodes, queues and
// workloads, with ids equal to their indices as the engine expects.
#ifndef TIDAL_TESTS_SUPPORT_CLUSTER_BUILDER_H_
#define TIDAL_TESTS_SUPPORT_CLUSTER_BUILDER_H_

#include <map>
#include <string>
#include <vector>

#include "core/model/snapshot.h"

namespace tidal::testing {

struct NodeSpec {
  int gpus = 8;
  std::string model = "H100";
  int nvlink_domains = 1;  // equal-sized domains; 0 = one domain per GPU
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  Health health = Health::kHealthy;
  bool cordoned = false;
  GpuMask failed_gpus = 0;
};

class ClusterBuilder {
 public:
  ClusterBuilder();

  PoolId AddPool(std::string name, PoolKind kind, QueueId owner = QueueId());
  ZoneId AddZone(std::string name);
  RackId AddRack(std::string name, ZoneId zone = ZoneId(0));
  // Adds `count` nodes named "<rack>-n<i>" and returns the first one's id.
  NodeId AddNodes(int count, PoolId pool, RackId rack, const NodeSpec& spec = {});
  QueueId AddQueue(std::string name, int guaranteed_gpus, QueueId parent = QueueId(),
                   double weight = 1.0, int lending_limit = kUnlimited,
                   int borrowing_limit = kUnlimited);

  // The snapshot so far; tests may edit it directly.
  Snapshot& snapshot() { return snapshot_; }
  Snapshot Build() const { return snapshot_; }

 private:
  Snapshot snapshot_;
};

// A training pool with `racks` racks of `nodes_per_rack` nodes, one zone,
// and one queue "default" with no guarantee (all its work borrows).
Snapshot SimpleCluster(int racks, int nodes_per_rack, int gpus_per_node = 8);

// A pending training job: `pods` x `gpus_per_pod`, a rigid gang when pods > 1.
Workload Job(uint64_t id, QueueId queue, int pods, int gpus_per_pod, Duration expected,
             int priority = 0, Time submit = Time());

// A mask of `count` GPUs starting at GPU `first`.
GpuMask GpuRange(int first, int count);

// Adds `w` as running with the given pods.
void AddRunning(Snapshot& snapshot, Workload w, const std::vector<PodPlacement>& pods,
                Time start, Time last_checkpoint);

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_CLUSTER_BUILDER_H_
