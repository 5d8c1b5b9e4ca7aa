#include "tests/support/cluster_builder.h"

#include <utility>

namespace tidal::testing {

ClusterBuilder::ClusterBuilder() { snapshot_.now = Time(); }

PoolId ClusterBuilder::AddPool(std::string name, PoolKind kind, QueueId owner) {
  const PoolId id(static_cast<uint32_t>(snapshot_.cluster.pools.size()));
  snapshot_.cluster.pools.push_back({id, std::move(name), kind, owner});
  return id;
}

ZoneId ClusterBuilder::AddZone(std::string name) {
  const ZoneId id(static_cast<uint32_t>(snapshot_.cluster.zones.size()));
  snapshot_.cluster.zones.push_back({id, std::move(name)});
  return id;
}

RackId ClusterBuilder::AddRack(std::string name, ZoneId zone) {
  if (snapshot_.cluster.zones.empty()) AddZone("zone-0");
  const RackId id(static_cast<uint32_t>(snapshot_.cluster.racks.size()));
  snapshot_.cluster.racks.push_back({id, std::move(name), zone});
  return id;
}

NodeId ClusterBuilder::AddNodes(int count, PoolId pool, RackId rack, const NodeSpec& spec) {
  Cluster& c = snapshot_.cluster;
  const NodeId first(static_cast<uint32_t>(c.nodes.size()));
  for (int i = 0; i < count; ++i) {
    Node n;
    n.id = NodeId(static_cast<uint32_t>(c.nodes.size()));
    n.name = c.racks[rack.value()].name + "-n" + std::to_string(n.id.value());
    n.pool = pool;
    n.rack = rack;
    n.zone = c.racks[rack.value()].zone;
    n.gpu_model = spec.model;
    n.gpu_memory_gib = 80;
    n.gpu_count = spec.gpus;
    const int domains = spec.nvlink_domains == 0 ? spec.gpus : spec.nvlink_domains;
    const int per = spec.gpus / domains;
    for (int d = 0; d < domains; ++d) n.nvlink_domains.push_back(GpuRange(d * per, per));
    n.labels = spec.labels;
    n.taints = spec.taints;
    n.health = spec.health;
    n.cordoned = spec.cordoned;
    n.failed_gpus = spec.failed_gpus;
    c.nodes.push_back(std::move(n));
  }
  return first;
}

QueueId ClusterBuilder::AddQueue(std::string name, int guaranteed_gpus, QueueId parent, double weight,
                                 int lending_limit, int borrowing_limit) {
  const QueueId id(static_cast<uint32_t>(snapshot_.queues.size()));
  Queue q;
  q.id = id;
  q.name = std::move(name);
  q.parent = parent;
  q.guaranteed_gpus = guaranteed_gpus;
  q.lending_limit_gpus = lending_limit;
  q.borrowing_limit_gpus = borrowing_limit;
  q.weight = weight;
  snapshot_.queues.push_back(std::move(q));
  return id;
}

Snapshot SimpleCluster(int racks, int nodes_per_rack, int gpus_per_node) {
  ClusterBuilder b;
  const PoolId pool = b.AddPool("training", PoolKind::kTraining);
  NodeSpec spec;
  spec.gpus = gpus_per_node;
  for (int r = 0; r < racks; ++r) {
    b.AddNodes(nodes_per_rack, pool, b.AddRack("r" + std::to_string(r)), spec);
  }
  b.AddQueue("default", 0);
  return b.Build();
}

Workload Job(uint64_t id, QueueId queue, int pods, int gpus_per_pod, Duration expected, int priority,
             Time submit) {
  Workload w;
  w.id = WorkloadId(id);
  w.name = "job-" + std::to_string(id);
  w.queue = queue;
  w.kind = WorkloadKind::kTraining;
  w.state = WorkloadState::kPending;
  w.gpus_per_pod = gpus_per_pod;
  w.pods = pods;
  w.min_pods = pods;
  w.max_pods = pods;
  w.expected_duration = expected;
  w.submit_time = submit;
  w.priority.value = priority;
  return w;
}

GpuMask GpuRange(int first, int count) {
  GpuMask m = 0;
  for (int i = 0; i < count; ++i) m |= GpuMask{1} << (first + i);
  return m;
}

void AddRunning(Snapshot& snapshot, Workload w, const std::vector<PodPlacement>& pods, Time start,
                Time last_checkpoint) {
  w.state = WorkloadState::kRunning;
  Allocation a;
  a.workload = w.id;
  a.pods = pods;
  a.start_time = start;
  a.last_checkpoint = last_checkpoint;
  snapshot.workloads.push_back(std::move(w));
  snapshot.allocations.push_back(std::move(a));
}

}  // namespace tidal::testing
