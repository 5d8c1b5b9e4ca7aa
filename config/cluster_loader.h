// Loads the cluster file (format: docs/formats.md "Cluster file"): zones,
// racks, pools, nodes and node groups, queues and projects. Names resolve to
// ids; every error names the file, line and field.
#ifndef TIDAL_CONFIG_CLUSTER_LOADER_H_
#define TIDAL_CONFIG_CLUSTER_LOADER_H_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "core/common/status.h"

namespace tidal::config {

StatusOr<ClusterConfig> LoadClusterFile(const std::string& path);
// `source_name` stands in for the file name in errors.
StatusOr<ClusterConfig> ParseClusterYaml(std::string_view text,
                                         std::string source_name = "cluster.yaml");
// The same from parsed JSON; errors start with the field path.
StatusOr<ClusterConfig> ParseClusterJson(const nlohmann::json& root);

// Parses an NVLink layout for a node with `gpus` GPUs: "AxB" (A domains of B
// consecutive GPUs), "none" (one domain per GPU), "all" (one domain), or a
// list of GPU index lists. The domains must cover every GPU exactly once.
StatusOr<std::vector<GpuMask>> ParseNvlink(const nlohmann::json& value, int gpus,
                                           std::string_view path);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_CLUSTER_LOADER_H_
