// JSON codecs for the model, used by the server API, the event logs and
// `tidal schedule -o json`. Workloads use the same field names as the
// workload file (docs/formats.md); parsing is strict: unknown fields, wrong
// types and absurd sizes are errors that start with the field's path.
#ifndef TIDAL_CONFIG_JSON_CODEC_H_
#define TIDAL_CONFIG_JSON_CODEC_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "core/common/status.h"
#include "core/common/time.h"
#include "core/model/decision.h"
#include "core/model/queue.h"
#include "core/model/snapshot.h"
#include "core/model/workload.h"

namespace tidal::config {

// Sizes beyond these are refused as input mistakes.
inline constexpr int kMaxGpusPerPod = kMaxGpusPerNode;  // 64
inline constexpr int kMaxWorkloadGpus = 4096;

// A workload as declared, plus when it is submitted relative to the start of
// a simulation or demo (`submit_at_s`).
struct WorkloadSpec {
  Workload workload;
  Duration submit_offset = Duration(0);
};

// Where names resolve to ids and back. Any pointer may be null: names then
// fail to resolve (parsing) or print as numeric ids (encoding).
struct NameScope {
  const Cluster* cluster = nullptr;
  const std::vector<Queue>* queues = nullptr;
  const std::vector<Project>* projects = nullptr;
  const std::vector<Workload>* workloads = nullptr;

  std::string QueueName(QueueId id) const;
  std::string ProjectName(ProjectId id) const;
  std::string PoolName(PoolId id) const;
  std::string NodeName(NodeId id) const;
  std::string WorkloadName(WorkloadId id) const;
};
// A NameScope is a view: what it points to must outlive it.
NameScope ScopeOf(const ClusterConfig& config);
NameScope ScopeOf(const Snapshot& snapshot);
NameScope ScopeOf(ClusterConfig&&) = delete;
NameScope ScopeOf(Snapshot&&) = delete;

enum class WorkloadJsonMode {
  // A user's submission: `id`, `state` and `submit_time_ms` are refused
  // (the server assigns them) and `priority` is refused (it is derived).
  kSubmit,
  // A stored record (event log, store): also reads id, state,
  // submit_time_ms and the derived priority.
  kStored,
};

struct WorkloadJsonOptions {
  WorkloadJsonMode mode = WorkloadJsonMode::kSubmit;
  // submit_time = submit_base + submit_at_s (kSubmit); deadlines are
  // relative to submit_time.
  Time submit_base = Time();
  // Assigned when the JSON carries no id (kSubmit); 0 leaves it invalid.
  uint64_t id = 0;
  // kSubmit: training and batch inference must give gpus_per_replica (a job
  // silently shrunk to 1 GPU is a wasted run) unless the caller has its own
  // default for it (the server's per-project defaults) and checks it after.
  bool caller_defaults_gpus_per_replica = false;
};

// Parses one workload. `path` prefixes errors ("workloads[2]").
StatusOr<WorkloadSpec> WorkloadFromJson(const nlohmann::json& value, const NameScope& scope,
                                        const WorkloadJsonOptions& options = {},
                                        std::string_view path = "");
// The stored form: every field that applies to the kind, plus id, state,
// submit_time_ms and the priority with its derivation. WorkloadFromJson in
// kStored mode reads it back to an equal workload.
nlohmann::json WorkloadToJson(const Workload& workload, const NameScope& scope);

nlohmann::json PriorityToJson(const Priority& priority);
// "local_cache" or "shared_storage", as the workload fields spell it.
std::string_view ModelSourceName(ModelSource source);
StatusOr<Priority> PriorityFromJson(const nlohmann::json& value, std::string_view path = "priority");

// Places, preempts, resizes, waits and rejects; times in ms since the epoch
// of the snapshot's clock, node and workload names where the scope has them.
nlohmann::json DecisionsToJson(const Decisions& decisions, const NameScope& scope);

nlohmann::json NodeToJson(const Node& node, const Cluster& cluster);
nlohmann::json ClusterToJson(const Cluster& cluster);
nlohmann::json QueueToJson(const Queue& queue, const NameScope& scope);
nlohmann::json ProjectToJson(const Project& project, const NameScope& scope);

// "research, shared": the queues a project may use, its default first.
std::string AllowedQueuesText(const Project& project, const NameScope& scope);
// Labels and node selectors: at most kMaxLabels entries, keys and values
// within config/input_limits.h's bounds. Errors name "path.key".
Status CheckLabelMap(std::string_view path, const std::map<std::string, std::string>& labels);

// GPU indices of a mask, lowest first: 0b1010 -> [1, 3].
std::vector<int> GpuIndices(GpuMask mask);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_JSON_CODEC_H_
