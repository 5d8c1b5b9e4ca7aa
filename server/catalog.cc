#include "server/catalog.h"

namespace tidal::server {
namespace {

template <typename Id, typename Map>
std::optional<Id> Lookup(const Map& map, const std::string& name) {
  auto it = map.find(name);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void Catalog::Index() {
  nodes_.clear();
  queues_.clear();
  projects_.clear();
  pools_.clear();
  zones_.clear();
  racks_.clear();
  for (size_t i = 0; i < cluster.zones.size(); ++i) zones_[cluster.zones[i].name] = ZoneId(i);
  for (size_t i = 0; i < cluster.racks.size(); ++i) racks_[cluster.racks[i].name] = RackId(i);
  for (size_t i = 0; i < cluster.nodes.size(); ++i) nodes_[cluster.nodes[i].name] = NodeId(i);
  for (size_t i = 0; i < queues.size(); ++i) queues_[queues[i].name] = QueueId(i);
  for (size_t i = 0; i < projects.size(); ++i) projects_[projects[i].name] = ProjectId(i);
  for (size_t i = 0; i < cluster.pools.size(); ++i) pools_[cluster.pools[i].name] = PoolId(i);
}

std::optional<NodeId> Catalog::FindNode(const std::string& name) const {
  return Lookup<NodeId>(nodes_, name);
}
std::optional<ZoneId> Catalog::FindZone(const std::string& name) const {
  return Lookup<ZoneId>(zones_, name);
}
std::optional<RackId> Catalog::FindRack(const std::string& name) const {
  return Lookup<RackId>(racks_, name);
}

NodeId Catalog::AddNode(Node node) {
  const NodeId id(cluster.nodes.size());
  node.id = id;
  nodes_[node.name] = id;
  cluster.nodes.push_back(std::move(node));
  return id;
}

ZoneId Catalog::AddZone(const std::string& name) {
  const ZoneId id(cluster.zones.size());
  cluster.zones.push_back({id, name});
  zones_[name] = id;
  return id;
}

RackId Catalog::AddRack(const std::string& name, ZoneId zone) {
  const RackId id(cluster.racks.size());
  cluster.racks.push_back({id, name, zone});
  racks_[name] = id;
  return id;
}

std::optional<QueueId> Catalog::FindQueue(const std::string& name) const {
  return Lookup<QueueId>(queues_, name);
}
std::optional<ProjectId> Catalog::FindProject(const std::string& name) const {
  return Lookup<ProjectId>(projects_, name);
}
std::optional<PoolId> Catalog::FindPool(const std::string& name) const {
  return Lookup<PoolId>(pools_, name);
}

}  // namespace tidal::server
