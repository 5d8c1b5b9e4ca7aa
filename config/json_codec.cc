#include "config/json_codec.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "config/field_reader.h"
#include "config/input_limits.h"
#include "core/priority/priority_deriver.h"

namespace tidal::config {
namespace {

using nlohmann::json;

const std::initializer_list<std::pair<std::string_view, WorkloadKind>> kKinds = {
    {"training", WorkloadKind::kTraining},
    {"inference", WorkloadKind::kInference},
    {"batch_inference", WorkloadKind::kBatchInference},
    {"debug", WorkloadKind::kDebug}};

const std::initializer_list<std::pair<std::string_view, WorkloadState>> kStates = {
    {"awaiting_approval", WorkloadState::kAwaitingApproval},
    {"pending", WorkloadState::kPending},
    {"running", WorkloadState::kRunning},
    {"terminating", WorkloadState::kTerminating},
    {"succeeded", WorkloadState::kSucceeded},
    {"failed", WorkloadState::kFailed},
    {"cancelled", WorkloadState::kCancelled}};

const std::initializer_list<std::pair<std::string_view, PreemptibilityClass>> kClasses = {
    {"never", PreemptibilityClass::kNever},
    {"preemptible", PreemptibilityClass::kPreemptible},
    {"reclaimable", PreemptibilityClass::kReclaimable}};

std::string_view PoolKindName(PoolKind k) {
  switch (k) {
    case PoolKind::kInferenceReserved: return "inference-reserved";
    case PoolKind::kShared: return "shared";
    case PoolKind::kTraining: return "training";
    case PoolKind::kDedicated: return "dedicated";
    case PoolKind::kSemiDedicated: return "semi-dedicated";
  }
  return "unknown";
}

json TimeJson(Time t) {
  if (t == kInfiniteFuture) return nullptr;
  return ToMillis(t);
}

json LimitJson(int gpus) { return gpus == kUnlimited ? json("unlimited") : json(gpus); }

json TaintsJson(const std::vector<Taint>& taints) {
  json out = json::array();
  for (const Taint& t : taints) out.push_back({{"key", t.key}, {"value", t.value}});
  return out;
}

json PodsJson(const std::vector<PodPlacement>& pods, const NameScope& scope) {
  json out = json::array();
  for (const PodPlacement& p : pods) {
    out.push_back({{"node", scope.NodeName(p.node)}, {"gpus", GpuIndices(p.gpus)}});
  }
  return out;
}

// Which optional fields each kind accepts; the rest are refused, so that a
// field meant for another kind cannot be silently ignored.
std::vector<std::string_view> KindFields(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kTraining: return {"checkpoint_interval_s", "checkpoint_on_request_s", "deadline_s"};
    case WorkloadKind::kInference:
      return {"target_p99_ms", "cold_start_s", "replica_capacity_rps", "model_size_gib", "model_source"};
    case WorkloadKind::kBatchInference:
      return {"deadline_s", "cold_start_s", "model_size_gib", "model_source"};
    case WorkloadKind::kDebug: return {"max_runtime_s"};
  }
  return {};
}

constexpr std::string_view kCommonFields[] = {
    "kind", "name", "tenant", "project", "queue", "gpus_per_replica", "replicas", "min_replicas",
    "max_replicas", "duration_s", "preemptible", "submit_at_s", "gpu_models", "node_selector",
    "tolerations", "topology"};
constexpr std::string_view kAllKindFields[] = {
    "checkpoint_interval_s", "checkpoint_on_request_s", "deadline_s", "target_p99_ms", "cold_start_s",
    "replica_capacity_rps", "model_size_gib", "model_source", "max_runtime_s"};
constexpr std::string_view kStoredFields[] = {"id", "state", "submit_time_ms", "priority"};

std::string AllowedKindsText(const Project& p) {
  if (p.allowed_kinds.empty()) return "all";
  std::string out;
  for (WorkloadKind k : p.allowed_kinds) out += (out.empty() ? "" : ", ") + std::string(WorkloadKindName(k));
  return out;
}

}  // namespace

std::string_view ModelSourceName(ModelSource s) {
  return s == ModelSource::kLocalCache ? "local_cache" : "shared_storage";
}

std::string AllowedQueuesText(const Project& p, const NameScope& scope) {
  std::string out = scope.QueueName(p.default_queue);
  for (QueueId q : p.allowed_queues) out += ", " + scope.QueueName(q);
  return out;
}

Status CheckLabelMap(std::string_view path, const std::map<std::string, std::string>& labels) {
  TIDAL_RETURN_IF_ERROR(CheckCount(path, labels.size(), kMaxLabels));
  for (const auto& [k, v] : labels) {
    TIDAL_RETURN_IF_ERROR(CheckLabelKey(JoinPath(path, k.size() <= kMaxLabelKeyLength ? k : "<key>"), k));
    TIDAL_RETURN_IF_ERROR(CheckLabelValue(JoinPath(path, k), v));
  }
  return Status::Ok();
}

std::vector<int> GpuIndices(GpuMask mask) {
  std::vector<int> out;
  while (mask != 0) {
    out.push_back(std::countr_zero(mask));
    mask &= mask - 1;
  }
  return out;
}

std::string NameScope::QueueName(QueueId id) const {
  if (queues && id.valid() && id.value() < queues->size()) return (*queues)[id.value()].name;
  return id.valid() ? std::to_string(id.value()) : "";
}
std::string NameScope::ProjectName(ProjectId id) const {
  if (projects && id.valid() && id.value() < projects->size()) return (*projects)[id.value()].name;
  return id.valid() ? std::to_string(id.value()) : "";
}
std::string NameScope::PoolName(PoolId id) const {
  if (cluster && id.valid() && id.value() < cluster->pools.size()) return cluster->pools[id.value()].name;
  return id.valid() ? std::to_string(id.value()) : "";
}
std::string NameScope::NodeName(NodeId id) const {
  if (cluster && id.valid() && id.value() < cluster->nodes.size()) return cluster->nodes[id.value()].name;
  return id.valid() ? std::to_string(id.value()) : "";
}
std::string NameScope::WorkloadName(WorkloadId id) const {
  if (workloads) {
    for (const Workload& w : *workloads) {
      if (w.id == id) return w.name;
    }
  }
  return "";
}

NameScope ScopeOf(const ClusterConfig& config) {
  return NameScope{&config.cluster, &config.queues, &config.projects, nullptr};
}
NameScope ScopeOf(const Snapshot& snapshot) {
  return NameScope{&snapshot.cluster, &snapshot.queues, &snapshot.projects, &snapshot.workloads};
}

StatusOr<WorkloadSpec> WorkloadFromJson(const json& value, const NameScope& scope,
                                        const WorkloadJsonOptions& options, std::string_view path_view) {
  const std::string path(path_view);
  const bool stored = options.mode == WorkloadJsonMode::kStored;
  std::vector<std::string_view> allowed(std::begin(kCommonFields), std::end(kCommonFields));
  allowed.insert(allowed.end(), std::begin(kAllKindFields), std::end(kAllKindFields));
  if (stored) allowed.insert(allowed.end(), std::begin(kStoredFields), std::end(kStoredFields));
  if (!stored && value.is_object()) {
    for (std::string_view key : {"id", "state", "submit_time_ms"}) {
      if (value.contains(key)) {
        return FieldError(JoinPath(path, key), "is set by the server; remove field '" + std::string(key) + "'");
      }
    }
  }
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(value, path, allowed));

  WorkloadSpec spec;
  Workload& w = spec.workload;
  if (!r.Has("kind")) return FieldError(r.FieldPath("kind"), "required field is missing");
  TIDAL_RETURN_IF_ERROR(r.Enum<WorkloadKind>("kind", &w.kind, kKinds));
  const std::vector<std::string_view> kind_fields = KindFields(w.kind);
  for (std::string_view key : kAllKindFields) {
    if (r.Has(key) && std::find(kind_fields.begin(), kind_fields.end(), key) == kind_fields.end()) {
      return FieldError(r.FieldPath(key), fmt::format("does not apply to kind {}",
                                                      WorkloadKindName(w.kind)));
    }
  }
  TIDAL_RETURN_IF_ERROR(r.String("name", &w.name, /*required=*/true));
  // Stored records were checked when submitted; the rules may have grown since.
  if (!stored) TIDAL_RETURN_IF_ERROR(CheckObjectName(r.FieldPath("name"), w.name));

  // Project, then tenant and queue, which default from the project.
  std::string project_name;
  TIDAL_RETURN_IF_ERROR(r.String("project", &project_name, /*required=*/true));
  const Project* project = nullptr;
  if (scope.projects) {
    for (const Project& p : *scope.projects) {
      if (p.name == project_name) project = &p;
    }
  }
  if (project == nullptr) return FieldError(r.FieldPath("project"), "unknown project '" + project_name + "'");
  if (!stored && !project->MaySubmitKind(w.kind)) {
    return FieldError(r.FieldPath("kind"), fmt::format("project '{}' may not submit kind {} (allowed: {})",
                                                       project->name, WorkloadKindName(w.kind),
                                                       AllowedKindsText(*project)));
  }
  w.project = project->id;
  w.tenant = project->tenant;
  if (r.Has("tenant")) {
    std::string tenant;
    TIDAL_RETURN_IF_ERROR(r.String("tenant", &tenant));
    if (tenant != project->tenant) {
      return FieldError(r.FieldPath("tenant"), fmt::format("project '{}' belongs to tenant '{}', not '{}'",
                                                           project->name, project->tenant, tenant));
    }
  }
  w.queue = project->default_queue;
  if (r.Has("queue")) {
    std::string queue_name;
    TIDAL_RETURN_IF_ERROR(r.String("queue", &queue_name));
    const Queue* queue = nullptr;
    if (scope.queues) {
      for (const Queue& q : *scope.queues) {
        if (q.name == queue_name) queue = &q;
      }
    }
    if (queue == nullptr) return FieldError(r.FieldPath("queue"), "unknown queue '" + queue_name + "'");
    if (!stored && !project->MayUseQueue(queue->id)) {
      return FieldError(r.FieldPath("queue"), fmt::format("project '{}' may not use queue '{}' (allowed: {})",
                                                          project->name, queue->name,
                                                          AllowedQueuesText(*project, scope)));
    }
    w.queue = queue->id;
  }

  // Shape. Training, batch and debug pods form a rigid gang by default; an
  // inference service may shrink to one replica unless told otherwise.
  const bool needs_gpus = w.kind == WorkloadKind::kTraining || w.kind == WorkloadKind::kBatchInference;
  const bool gpus_required = !stored && needs_gpus && !options.caller_defaults_gpus_per_replica;
  if (gpus_required && !r.Has("gpus_per_replica") && !r.IsNull("gpus_per_replica")) {
    return FieldError(r.FieldPath("gpus_per_replica"),
                      fmt::format("required for kind {} (1 to {})", WorkloadKindName(w.kind), kMaxGpusPerPod));
  }
  TIDAL_RETURN_IF_ERROR(r.Int("gpus_per_replica", &w.gpus_per_pod, 1, kMaxGpusPerPod));
  TIDAL_RETURN_IF_ERROR(r.Int("replicas", &w.pods, 1, kMaxWorkloadGpus));
  w.min_pods = w.kind == WorkloadKind::kInference ? 1 : w.pods;
  w.max_pods = w.pods;
  TIDAL_RETURN_IF_ERROR(r.Int("min_replicas", &w.min_pods, 1, kMaxWorkloadGpus));
  TIDAL_RETURN_IF_ERROR(r.Int("max_replicas", &w.max_pods, 1, kMaxWorkloadGpus));
  if (w.min_pods > w.pods) {
    return FieldError(r.FieldPath("min_replicas"),
                      fmt::format("{} is more than replicas {}", w.min_pods, w.pods));
  }
  if (w.max_pods < w.pods) {
    return FieldError(r.FieldPath("max_replicas"),
                      fmt::format("{} is less than replicas {}", w.max_pods, w.pods));
  }
  if (static_cast<int64_t>(w.gpus_per_pod) * w.max_pods > kMaxWorkloadGpus) {
    return FieldError(r.FieldPath(r.Has("max_replicas") ? "max_replicas" : "replicas"),
                      fmt::format("{} x {} GPUs is more than the {} GPUs a workload may ask for",
                                  w.max_pods, w.gpus_per_pod, kMaxWorkloadGpus));
  }
  TIDAL_RETURN_IF_ERROR(r.Seconds("duration_s", &w.expected_duration));
  TIDAL_RETURN_IF_ERROR(r.Bool("preemptible", &w.preemptible));

  // Submission time and the deadline measured from it.
  TIDAL_RETURN_IF_ERROR(r.Seconds("submit_at_s", &spec.submit_offset));
  w.submit_time = options.submit_base + spec.submit_offset;
  if (stored) {
    int64_t ms = 0;
    if (r.Has("submit_time_ms")) {
      TIDAL_RETURN_IF_ERROR(r.Int64("submit_time_ms", &ms, INT64_MIN / 2, INT64_MAX / 2));
      w.submit_time = TimeFromMillis(ms);
    }
  }
  if (r.Has("deadline_s")) {
    Duration deadline(0);
    TIDAL_RETURN_IF_ERROR(r.Seconds("deadline_s", &deadline));
    // A deadline moments away is a priority lever, not a plan (docs/priority.md).
    if (!stored && deadline < kMinDeadlineLead) {
      return FieldError(r.FieldPath("deadline_s"),
                        fmt::format("expected at least {} s after submission, got {}",
                                    std::chrono::duration_cast<seconds>(kMinDeadlineLead).count(),
                                    Shown(r.at("deadline_s"))));
    }
    w.batch.deadline = w.submit_time + deadline;
  }

  // Kind-specific fields.
  TIDAL_RETURN_IF_ERROR(r.Seconds("checkpoint_interval_s", &w.training.checkpoint_interval));
  // A save that takes over an hour is not one a notice can wait for.
  TIDAL_RETURN_IF_ERROR(r.Seconds("checkpoint_on_request_s", &w.training.checkpoint_on_request, 3600));
  TIDAL_RETURN_IF_ERROR(r.Millis("target_p99_ms", &w.inference.target_p99));
  TIDAL_RETURN_IF_ERROR(r.Seconds("cold_start_s", &w.inference.cold_start));
  TIDAL_RETURN_IF_ERROR(r.Double("replica_capacity_rps", &w.inference.replica_capacity_rps, 0, 1e9));
  TIDAL_RETURN_IF_ERROR(r.Double("model_size_gib", &w.inference.model_size_gib, 0, 1e6));
  TIDAL_RETURN_IF_ERROR(r.Enum<ModelSource>("model_source", &w.inference.model_source,
                                            {{"local_cache", ModelSource::kLocalCache},
                                             {"shared_storage", ModelSource::kSharedStorage}}));
  TIDAL_RETURN_IF_ERROR(r.Seconds("max_runtime_s", &w.debug.max_runtime));

  // Placement constraints.
  PlacementConstraints& c = w.constraints;
  if (r.Has("gpu_models")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader gr, ObjectReader::Open(r.at("gpu_models"), r.FieldPath("gpu_models"),
                                                               {"required", "preferred"}));
    TIDAL_RETURN_IF_ERROR(gr.StringList("required", &c.required_gpu_models));
    TIDAL_RETURN_IF_ERROR(gr.StringList("preferred", &c.preferred_gpu_models));
    if (!stored) {
      for (const auto& [key, list] : {std::pair{"required", &c.required_gpu_models},
                                      std::pair{"preferred", &c.preferred_gpu_models}}) {
        TIDAL_RETURN_IF_ERROR(CheckCount(gr.FieldPath(key), list->size(), kMaxListEntries));
        for (size_t i = 0; i < list->size(); ++i) {
          TIDAL_RETURN_IF_ERROR(CheckLabelValue(IndexPath(gr.FieldPath(key), i), (*list)[i]));
        }
      }
    }
  }
  TIDAL_RETURN_IF_ERROR(r.StringMap("node_selector", &c.node_selector));
  if (!stored) TIDAL_RETURN_IF_ERROR(CheckLabelMap(r.FieldPath("node_selector"), c.node_selector));
  if (r.Has("tolerations")) {
    TIDAL_RETURN_IF_ERROR(ReadTaintList(r.at("tolerations"), r.FieldPath("tolerations"), &c.tolerations));
    if (!stored) {
      TIDAL_RETURN_IF_ERROR(CheckCount(r.FieldPath("tolerations"), c.tolerations.size(), kMaxListEntries));
      for (size_t i = 0; i < c.tolerations.size(); ++i) {
        const std::string item = IndexPath(r.FieldPath("tolerations"), i);
        TIDAL_RETURN_IF_ERROR(CheckLabelKey(JoinPath(item, "key"), c.tolerations[i].key));
        TIDAL_RETURN_IF_ERROR(CheckLabelValue(JoinPath(item, "value"), c.tolerations[i].value));
      }
    }
  }
  if (r.Has("topology")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, ObjectReader::Open(r.at("topology"), r.FieldPath("topology"),
                                                               {"level", "required"}));
    if (!tr.Has("level")) return FieldError(tr.FieldPath("level"), "required field is missing");
    TIDAL_RETURN_IF_ERROR(tr.Enum<TopologyLevel>("level", &c.topology.level,
                                                 {{"none", TopologyLevel::kNone},
                                                  {"nvlink", TopologyLevel::kNvlink},
                                                  {"node", TopologyLevel::kNode},
                                                  {"rack", TopologyLevel::kRack}}));
    TIDAL_RETURN_IF_ERROR(tr.Bool("required", &c.topology.required));
    if (c.topology.level == TopologyLevel::kNvlink && w.gpus_per_pod * w.min_pods > kMaxGpusPerNode) {
      return FieldError(tr.FieldPath("level"), "an NVLink domain never spans more than one node");
    }
  }

  // Stored records carry what the server assigned and derived.
  if (options.id != 0) w.id = WorkloadId(options.id);
  if (stored) {
    if (r.Has("id")) {
      int64_t id = 0;
      TIDAL_RETURN_IF_ERROR(r.Int64("id", &id, 1, INT64_MAX));
      w.id = WorkloadId(static_cast<uint64_t>(id));
    }
    TIDAL_RETURN_IF_ERROR(r.Enum<WorkloadState>("state", &w.state, kStates));
    if (r.Has("priority")) {
      TIDAL_ASSIGN_OR_RETURN(w.priority, PriorityFromJson(r.at("priority"), r.FieldPath("priority")));
    }
  }
  return spec;
}

json WorkloadToJson(const Workload& w, const NameScope& scope) {
  json j;
  j["id"] = w.id.value();
  j["name"] = w.name;
  j["kind"] = WorkloadKindName(w.kind);
  j["state"] = WorkloadStateName(w.state);
  j["tenant"] = w.tenant;
  j["project"] = scope.ProjectName(w.project);
  j["queue"] = scope.QueueName(w.queue);
  j["gpus_per_replica"] = w.gpus_per_pod;
  j["replicas"] = w.pods;
  j["min_replicas"] = w.min_pods;
  j["max_replicas"] = w.max_pods;
  j["duration_s"] = ToSeconds(w.expected_duration);
  j["preemptible"] = w.preemptible;
  j["submit_time_ms"] = ToMillis(w.submit_time);
  switch (w.kind) {
    case WorkloadKind::kTraining:
      j["checkpoint_interval_s"] = ToSeconds(w.training.checkpoint_interval);
      if (w.training.checkpoint_on_request.count() > 0) {
        j["checkpoint_on_request_s"] = ToSeconds(w.training.checkpoint_on_request);
      }
      break;
    case WorkloadKind::kInference:
      j["target_p99_ms"] = w.inference.target_p99.count();
      j["replica_capacity_rps"] = w.inference.replica_capacity_rps;
      [[fallthrough]];
    case WorkloadKind::kBatchInference:
      j["cold_start_s"] = ToSeconds(w.inference.cold_start);
      j["model_size_gib"] = w.inference.model_size_gib;
      j["model_source"] = ModelSourceName(w.inference.model_source);
      break;
    case WorkloadKind::kDebug:
      j["max_runtime_s"] = ToSeconds(w.debug.max_runtime);
      break;
  }
  if ((w.kind == WorkloadKind::kTraining || w.kind == WorkloadKind::kBatchInference) &&
      w.batch.deadline != kInfiniteFuture) {
    j["deadline_s"] = ToSeconds(w.batch.deadline - w.submit_time);
  }
  const PlacementConstraints& c = w.constraints;
  if (!c.required_gpu_models.empty() || !c.preferred_gpu_models.empty()) {
    j["gpu_models"] = {{"required", c.required_gpu_models}, {"preferred", c.preferred_gpu_models}};
  }
  if (!c.node_selector.empty()) j["node_selector"] = c.node_selector;
  if (!c.tolerations.empty()) j["tolerations"] = TaintsJson(c.tolerations);
  if (c.topology.level != TopologyLevel::kNone) {
    j["topology"] = {{"level", TopologyLevelName(c.topology.level)}, {"required", c.topology.required}};
  }
  j["priority"] = PriorityToJson(w.priority);
  return j;
}

json PriorityToJson(const Priority& p) {
  return {{"value", p.value},
          {"preemptibility", PreemptibilityClassName(p.preemptibility)},
          {"template", p.template_name},
          {"derivation", p.derivation},
          {"awaiting_approval", p.awaiting_approval},
          {"resume_bonus", p.resume_bonus},
          {"borrowing_start_delta", p.borrowing_start_delta}};
}

StatusOr<Priority> PriorityFromJson(const json& value, std::string_view path) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(value, std::string(path),
                                                            {"value", "preemptibility", "template",
                                                             "derivation", "awaiting_approval",
                                                             "resume_bonus", "borrowing_start_delta"}));
  Priority p;
  TIDAL_RETURN_IF_ERROR(r.Int("value", &p.value));
  TIDAL_RETURN_IF_ERROR(r.Enum<PreemptibilityClass>("preemptibility", &p.preemptibility, kClasses));
  TIDAL_RETURN_IF_ERROR(r.String("template", &p.template_name));
  TIDAL_RETURN_IF_ERROR(r.StringList("derivation", &p.derivation));
  TIDAL_RETURN_IF_ERROR(r.Bool("awaiting_approval", &p.awaiting_approval));
  TIDAL_RETURN_IF_ERROR(r.Int("resume_bonus", &p.resume_bonus));
  TIDAL_RETURN_IF_ERROR(r.Int("borrowing_start_delta", &p.borrowing_start_delta));
  return p;
}

json DecisionsToJson(const Decisions& d, const NameScope& scope) {
  // One index instead of a scan per decision: passes can hold 50,000 workloads.
  std::unordered_map<WorkloadId, const std::string*> names;
  if (scope.workloads) {
    for (const Workload& w : *scope.workloads) names.emplace(w.id, &w.name);
  }
  auto name_of = [&names](WorkloadId id) -> std::string {
    auto it = names.find(id);
    return it == names.end() ? std::string() : *it->second;
  };
  json out = {{"preempts", json::array()}, {"resizes", json::array()}, {"places", json::array()},
              {"waits", json::array()}, {"rejects", json::array()}};
  for (const PreemptDecision& p : d.preempts) {
    out["preempts"].push_back({{"victim", p.victim.value()},
                               {"victim_name", name_of(p.victim)},
                               {"preemptor", p.preemptor.valid() ? json(p.preemptor.value()) : json(nullptr)},
                               {"preemptor_name", name_of(p.preemptor)},
                               {"cause", PreemptCauseName(p.cause)},
                               {"notice_time_ms", TimeJson(p.notice_time)},
                               {"grace_deadline_ms", TimeJson(p.grace_deadline)},
                               {"lost_gpu_seconds", p.lost_gpu_seconds},
                               {"detail", p.detail}});
  }
  for (const ResizeDecision& r : d.resizes) {
    out["resizes"].push_back({{"workload", r.workload.value()},
                              {"name", name_of(r.workload)},
                              {"from_pods", r.from_pods},
                              {"to_pods", r.to_pods},
                              {"added", PodsJson(r.added, scope)},
                              {"removed", PodsJson(r.removed, scope)},
                              {"beneficiary", r.beneficiary.valid() ? json(r.beneficiary.value()) : json(nullptr)},
                              {"grace_deadline_ms", TimeJson(r.grace_deadline)},
                              {"detail", r.detail}});
  }
  for (const PlaceDecision& p : d.places) {
    int gpus = 0;
    for (const PodPlacement& pod : p.pods) gpus += std::popcount(pod.gpus);
    out["places"].push_back({{"workload", p.workload.value()},
                             {"name", name_of(p.workload)},
                             {"gpus", gpus},
                             {"borrowed", p.borrowed},
                             {"pods", PodsJson(p.pods, scope)}});
  }
  for (const WaitDecision& w : d.waits) {
    out["waits"].push_back({{"workload", w.workload.value()},
                            {"name", name_of(w.workload)},
                            {"reason", ReasonCodeName(w.reason)},
                            {"detail", w.detail},
                            {"estimated_start_ms", w.estimated_start ? TimeJson(*w.estimated_start) : json(nullptr)}});
  }
  for (const RejectDecision& r : d.rejects) {
    out["rejects"].push_back({{"workload", r.workload.value()},
                              {"name", name_of(r.workload)},
                              {"reason", ReasonCodeName(r.reason)},
                              {"detail", r.detail}});
  }
  return out;
}

json NodeToJson(const Node& n, const Cluster& cluster) {
  const NameScope scope{&cluster, nullptr, nullptr, nullptr};
  json nvlink = json::array();
  for (GpuMask m : n.nvlink_domains) nvlink.push_back(GpuIndices(m));
  return {{"name", n.name},
          {"pool", scope.PoolName(n.pool)},
          {"rack", n.rack.valid() && n.rack.value() < cluster.racks.size() ? cluster.racks[n.rack.value()].name : ""},
          {"zone", n.zone.valid() && n.zone.value() < cluster.zones.size() ? cluster.zones[n.zone.value()].name : ""},
          {"gpus", n.gpu_count},
          {"gpu_model", n.gpu_model},
          {"gpu_memory_gib", n.gpu_memory_gib},
          {"nvlink", nvlink},
          {"mig", n.mig_capable},
          {"driver", n.driver_version},
          {"nic_gbps", n.network.nic_gbps},
          {"rdma", n.network.rdma},
          {"health", HealthName(n.health)},
          {"failed_gpus", GpuIndices(n.failed_gpus)},
          {"cordoned", n.cordoned},
          {"labels", n.labels},
          {"taints", TaintsJson(n.taints)}};
}

json ClusterToJson(const Cluster& cluster) {
  json zones = json::array();
  for (const Zone& z : cluster.zones) zones.push_back(z.name);
  json racks = json::array();
  for (const Rack& r : cluster.racks) {
    racks.push_back({{"name", r.name},
                     {"zone", r.zone.valid() && r.zone.value() < cluster.zones.size() ? cluster.zones[r.zone.value()].name : ""}});
  }
  json pools = json::array();
  for (const Pool& p : cluster.pools) {
    json pj = {{"name", p.name}, {"kind", PoolKindName(p.kind)}};
    if (p.owner.valid()) pj["owner_queue_id"] = p.owner.value();
    pools.push_back(pj);
  }
  json nodes = json::array();
  for (const Node& n : cluster.nodes) nodes.push_back(NodeToJson(n, cluster));
  return {{"zones", zones}, {"racks", racks}, {"pools", pools}, {"nodes", nodes},
          {"total_gpus", cluster.total_gpus()}};
}

json QueueToJson(const Queue& q, const NameScope& scope) {
  json pools = json::array();
  for (PoolId p : q.pools) pools.push_back(scope.PoolName(p));
  json j = {{"name", q.name},
            {"guaranteed_gpus", q.guaranteed_gpus},
            {"lending_limit_gpus", LimitJson(q.lending_limit_gpus)},
            {"borrowing_limit_gpus", LimitJson(q.borrowing_limit_gpus)},
            {"weight", q.weight},
            {"pools", pools}};
  j["parent"] = q.parent.valid() ? json(scope.QueueName(q.parent)) : json(nullptr);
  return j;
}

json ProjectToJson(const Project& p, const NameScope& scope) {
  return {{"name", p.name},
          {"tenant", p.tenant},
          {"tier", p.tier},
          {"queue", scope.QueueName(p.default_queue)},
          {"budget_gpu_hours", p.budget_gpu_hours},
          {"used_gpu_hours", p.used_gpu_hours},
          {"top_tier_approved", p.top_tier_approved},
          {"allowed_queues", [&] {
             json q = json::array();
             for (QueueId id : p.allowed_queues) q.push_back(scope.QueueName(id));
             return q;
           }()},
          {"allowed_kinds", [&] {
             json k = json::array();
             for (WorkloadKind kind : p.allowed_kinds) k.push_back(WorkloadKindName(kind));
             return k;
           }()}};
}

}  // namespace tidal::config
