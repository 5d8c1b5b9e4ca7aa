// The Alibaba openb node list (alibaba-gpu-v2023/openb_node_list_*.csv: 1,213
// GPU nodes of 7 models) as a cluster: `tidal sim --cluster openb:PATH`.
#ifndef TIDAL_SIM_OPENB_CLUSTER_LOADER_H_
#define TIDAL_SIM_OPENB_CLUSTER_LOADER_H_

#include <string>
#include <string_view>

#include "config/cluster_config.h"
#include "core/common/status.h"

namespace tidal::sim {

struct OpenbClusterOptions {
  // Share of each GPU model's nodes in the `shared` pool (inference first,
  // lent to training while the load is low); the rest are `training`. The
  // trace's pods are 57 % LS (inference) and 42 % BE, hence one half each.
  double inference_share = 0.5;
};

struct OpenbCluster {
  config::ClusterConfig config;
  int skipped_cpu_nodes = 0;  // nodes with no GPU: nothing for the scheduler to place
};

// sn,cpu_milli,memory_mib,gpu,model. One rack; GPU nodes keep their name,
// GPU count and model. Queues `serving` (pool shared) and `batch` (pools
// training and shared), each guaranteed its pool's GPUs; projects `online`
// (tier critical, approved, queue serving) and `batch` (standard, queue
// batch): run the openb pods with project=batch,inference_project=online.
StatusOr<OpenbCluster> LoadOpenbCluster(const std::string& path, const OpenbClusterOptions& options);

// "openb:PATH[,inference_share=F]" -> the cluster; `text` without the
// "openb:" prefix is not a spec (IsOpenbClusterSpec says which).
bool IsOpenbClusterSpec(std::string_view text);
StatusOr<OpenbCluster> LoadOpenbClusterSpec(std::string_view text);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_OPENB_CLUSTER_LOADER_H_
