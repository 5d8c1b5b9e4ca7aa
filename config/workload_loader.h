// Loads the workload file (format: docs/formats.md "Workload file"): a list
// of workloads, each resolved against the cluster's projects and queues.
// Workloads get ids 1..N in file order and submit_time = submit_at_s from
// time zero (the start of the simulation or demo).
#ifndef TIDAL_CONFIG_WORKLOAD_LOADER_H_
#define TIDAL_CONFIG_WORKLOAD_LOADER_H_

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "config/json_codec.h"
#include "core/common/status.h"

namespace tidal::config {

StatusOr<std::vector<WorkloadSpec>> LoadWorkloadFile(const std::string& path,
                                                     const ClusterConfig& cluster);
StatusOr<std::vector<WorkloadSpec>> ParseWorkloadYaml(std::string_view text,
                                                      const ClusterConfig& cluster,
                                                      std::string source_name = "workloads.yaml");
// The document is {workloads: [...]} or just the list.
StatusOr<std::vector<WorkloadSpec>> ParseWorkloadJson(const nlohmann::json& root,
                                                      const ClusterConfig& cluster);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_WORKLOAD_LOADER_H_
