// The cluster file's content: the cluster itself plus the queue tree and the
// projects (they live in the cluster file because pools name their owner
// queues and queues name their pools). Every entity sits at the index of its
// id, as in a Snapshot, so these vectors can be copied into one.
#ifndef TIDAL_CONFIG_CLUSTER_CONFIG_H_
#define TIDAL_CONFIG_CLUSTER_CONFIG_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/model/cluster.h"
#include "core/model/queue.h"

namespace tidal::config {

struct ClusterConfig {
  Cluster cluster;
  std::vector<Queue> queues;      // indexed by QueueId
  std::vector<Project> projects;  // indexed by ProjectId

  // Lookups by name; nullptr when unknown.
  const Queue* FindQueue(std::string_view name) const;
  const Project* FindProject(std::string_view name) const;
  const Pool* FindPool(std::string_view name) const;
  const Node* FindNode(std::string_view name) const;
};

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_CLUSTER_CONFIG_H_
