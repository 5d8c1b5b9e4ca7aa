// The configured world the server resolves names against: the cluster (nodes
// from the cluster file plus nodes that registered), queues and projects.
#ifndef TIDAL_SERVER_CATALOG_H_
#define TIDAL_SERVER_CATALOG_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model/cluster.h"
#include "core/model/queue.h"

namespace tidal::server {

struct Catalog {
  Cluster cluster;
  std::vector<Queue> queues;
  std::vector<Project> projects;

  // Rebuilds the name indexes after the vectors changed.
  void Index();
  // Appends a node, zone or rack and indexes it: O(log N), so that 10,000
  // agents registering cost O(N log N), not a re-index each.
  NodeId AddNode(Node node);
  ZoneId AddZone(const std::string& name);
  RackId AddRack(const std::string& name, ZoneId zone);
  std::optional<NodeId> FindNode(const std::string& name) const;
  std::optional<ZoneId> FindZone(const std::string& name) const;
  std::optional<RackId> FindRack(const std::string& name) const;
  std::optional<QueueId> FindQueue(const std::string& name) const;
  std::optional<ProjectId> FindProject(const std::string& name) const;
  std::optional<PoolId> FindPool(const std::string& name) const;
  const Queue& queue(QueueId id) const { return queues[id.value()]; }
  const Project& project(ProjectId id) const { return projects[id.value()]; }
  std::string QueueName(QueueId id) const {
    return id.valid() && id.value() < queues.size() ? queues[id.value()].name : "";
  }
  std::string ProjectName(ProjectId id) const {
    return id.valid() && id.value() < projects.size() ? projects[id.value()].name : "";
  }

 private:
  std::map<std::string, NodeId> nodes_;
  std::map<std::string, QueueId> queues_;
  std::map<std::string, ProjectId> projects_;
  std::map<std::string, PoolId> pools_;
  std::map<std::string, ZoneId> zones_;
  std::map<std::string, RackId> racks_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_CATALOG_H_
