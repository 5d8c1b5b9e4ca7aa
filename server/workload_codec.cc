#include "server/workload_codec.h"

#include <bit>

#include <fmt/format.h>

#include "config/field_reader.h"

namespace tidal::server {
namespace {

using config::ObjectReader;
using nlohmann::json;

constexpr std::pair<std::string_view, WorkloadKind> kKinds[] = {
    {"training", WorkloadKind::kTraining},
    {"inference", WorkloadKind::kInference},
    {"batch_inference", WorkloadKind::kBatchInference},
    {"debug", WorkloadKind::kDebug},
};
constexpr std::pair<std::string_view, WorkloadState> kStates[] = {
    {"awaiting_approval", WorkloadState::kAwaitingApproval},
    {"pending", WorkloadState::kPending},
    {"running", WorkloadState::kRunning},
    {"terminating", WorkloadState::kTerminating},
    {"succeeded", WorkloadState::kSucceeded},
    {"failed", WorkloadState::kFailed},
    {"cancelled", WorkloadState::kCancelled},
};

Status ReadEndpoint(const ObjectReader& parent, std::string_view key,
                    std::optional<Endpoint>* out) {
  if (!parent.Has(key)) return Status::Ok();
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r,
                         ObjectReader::Open(parent.at(key), parent.FieldPath(key), {"port", "path"}));
  Endpoint e;
  TIDAL_RETURN_IF_ERROR(r.Int("port", &e.port, 1, 65535, /*required=*/true));
  e.path = "/";
  TIDAL_RETURN_IF_ERROR(r.String("path", &e.path));
  if (e.path.empty() || e.path[0] != '/') {
    return config::FieldError(r.FieldPath("path"), "expected a path starting with '/'");
  }
  *out = e;
  return Status::Ok();
}

json EndpointToJson(const std::optional<Endpoint>& e) {
  if (!e) return nullptr;
  return {{"port", e->port}, {"path", e->path}};
}

std::optional<Endpoint> EndpointFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  return Endpoint{j.value("port", 0), j.value("path", std::string("/"))};
}

double Secs(Duration d) { return ToSeconds(d); }

}  // namespace

std::optional<WorkloadKind> ParseKind(std::string_view name) {
  for (const auto& [n, k] : kKinds) {
    if (n == name) return k;
  }
  return std::nullopt;
}

std::optional<WorkloadState> ParseState(std::string_view name) {
  for (const auto& [n, s] : kStates) {
    if (n == name) return s;
  }
  return std::nullopt;
}

std::vector<int> MaskToIndices(GpuMask mask) {
  std::vector<int> out;
  while (mask != 0) {
    const int i = std::countr_zero(mask);
    out.push_back(i);
    mask &= mask - 1;
  }
  return out;
}

StatusOr<SubmitSpec> ParseSubmit(const json& body) {
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(body, "",
                         {"kind", "name", "tenant", "project", "queue", "gpus_per_replica",
                          "replicas", "min_replicas", "max_replicas", "preemptible",
                          "duration_s", "checkpoint_interval_s", "target_p99_ms", "cold_start_s",
                          "replica_capacity_rps", "model_size_gib", "model_source", "deadline_s",
                          "max_runtime_s", "gpu_models", "node_selector", "tolerations",
                          "topology", "image", "dataset", "model_version", "command", "env",
                          "readiness", "load_endpoint", "labels"}));
  // JSON bodies are typed: unlike YAML files, a number is not a name.
  for (const char* key : {"kind", "name", "tenant", "project", "queue", "image", "dataset",
                          "model_version", "model_source"}) {
    if (r.Has(key) && !r.at(key).is_string()) {
      return config::FieldError(key, "expected a string, got " + config::Shown(r.at(key)));
    }
  }
  for (const char* key : {"env", "labels", "node_selector"}) {
    if (!r.Has(key) || !r.at(key).is_object()) continue;
    for (const auto& [k, v] : r.at(key).items()) {
      if (!v.is_string()) {
        return config::FieldError(config::JoinPath(key, k), "expected a string, got " + config::Shown(v));
      }
    }
  }
  SubmitSpec spec;
  WorkloadRecord& rec = spec.record;
  Workload& w = rec.w;
  TIDAL_RETURN_IF_ERROR(r.Enum("kind", &w.kind,
                               {kKinds[0], kKinds[1], kKinds[2], kKinds[3]}));
  TIDAL_RETURN_IF_ERROR(r.String("name", &w.name, /*required=*/true));
  if (w.name.empty() || w.name.size() > 253) {
    return config::FieldError("name", "expected 1 to 253 characters");
  }
  TIDAL_RETURN_IF_ERROR(r.String("tenant", &spec.tenant));
  TIDAL_RETURN_IF_ERROR(r.String("project", &spec.project));
  TIDAL_RETURN_IF_ERROR(r.String("queue", &spec.queue));
  TIDAL_RETURN_IF_ERROR(r.Int("gpus_per_replica", &w.gpus_per_pod, 1, kMaxGpusPerNode));
  TIDAL_RETURN_IF_ERROR(r.Int("replicas", &w.pods, 1, kMaxTotalGpus));
  w.min_pods = w.kind == WorkloadKind::kInference ? 1 : w.pods;
  w.max_pods = w.pods;
  spec.has_min = r.Has("min_replicas");
  spec.has_max = r.Has("max_replicas");
  TIDAL_RETURN_IF_ERROR(r.Int("min_replicas", &w.min_pods, 1, kMaxTotalGpus));
  TIDAL_RETURN_IF_ERROR(r.Int("max_replicas", &w.max_pods, 1, kMaxTotalGpus));
  if (spec.has_min && !r.Has("replicas")) w.pods = w.min_pods;
  if (!spec.has_max && w.max_pods < w.pods) w.max_pods = w.pods;
  if (w.min_pods > w.pods) {
    return config::FieldError("min_replicas", fmt::format("{} is above replicas ({})",
                                                          w.min_pods, w.pods));
  }
  if (w.max_pods < w.pods) {
    return config::FieldError("max_replicas", fmt::format("{} is below replicas ({})",
                                                          w.max_pods, w.pods));
  }
  if (static_cast<int64_t>(w.max_pods) * w.gpus_per_pod > kMaxTotalGpus) {
    return config::FieldError(
        "max_replicas", fmt::format("{} replicas x {} GPUs = {} GPUs is above the limit of {}",
                                    w.max_pods, w.gpus_per_pod, w.max_pods * w.gpus_per_pod,
                                    kMaxTotalGpus));
  }
  TIDAL_RETURN_IF_ERROR(r.Bool("preemptible", &w.preemptible));
  TIDAL_RETURN_IF_ERROR(r.Seconds("duration_s", &w.expected_duration, 365.0 * 86400));
  spec.has_checkpoint = r.Has("checkpoint_interval_s");
  TIDAL_RETURN_IF_ERROR(r.Seconds("checkpoint_interval_s", &w.training.checkpoint_interval,
                                  30.0 * 86400));
  TIDAL_RETURN_IF_ERROR(r.Millis("target_p99_ms", &w.inference.target_p99, 3600e3));
  TIDAL_RETURN_IF_ERROR(r.Seconds("cold_start_s", &w.inference.cold_start, 86400));
  TIDAL_RETURN_IF_ERROR(r.Double("replica_capacity_rps", &w.inference.replica_capacity_rps, 0, 1e7));
  TIDAL_RETURN_IF_ERROR(r.Double("model_size_gib", &w.inference.model_size_gib, 0, 1e5));
  TIDAL_RETURN_IF_ERROR(r.Enum("model_source", &w.inference.model_source,
                               {{"local_cache", ModelSource::kLocalCache},
                                {"shared_storage", ModelSource::kSharedStorage}}));
  TIDAL_RETURN_IF_ERROR(r.Double("deadline_s", &spec.deadline_s, 0, 365.0 * 86400));
  TIDAL_RETURN_IF_ERROR(r.Seconds("max_runtime_s", &w.debug.max_runtime, 30.0 * 86400));
  if (w.kind == WorkloadKind::kInference && r.Has("replica_capacity_rps") &&
      w.inference.replica_capacity_rps <= 0) {
    return config::FieldError("replica_capacity_rps", "expected a positive number for inference");
  }
  if (r.Has("gpu_models")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader g, ObjectReader::Open(r.at("gpu_models"), "gpu_models",
                                                              {"required", "preferred"}));
    TIDAL_RETURN_IF_ERROR(g.StringList("required", &w.constraints.required_gpu_models));
    TIDAL_RETURN_IF_ERROR(g.StringList("preferred", &w.constraints.preferred_gpu_models));
  }
  TIDAL_RETURN_IF_ERROR(r.StringMap("node_selector", &w.constraints.node_selector));
  if (r.Has("tolerations")) {
    TIDAL_RETURN_IF_ERROR(config::ExpectArray(r.at("tolerations"), "tolerations"));
    size_t i = 0;
    for (const json& t : r.at("tolerations")) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader tr,
                             ObjectReader::Open(t, config::IndexPath("tolerations", i++),
                                                {"key", "value"}));
      Taint taint;
      TIDAL_RETURN_IF_ERROR(tr.String("key", &taint.key, /*required=*/true));
      TIDAL_RETURN_IF_ERROR(tr.String("value", &taint.value));
      w.constraints.tolerations.push_back(taint);
    }
  }
  if (r.Has("topology")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader t, ObjectReader::Open(r.at("topology"), "topology",
                                                              {"level", "required"}));
    TIDAL_RETURN_IF_ERROR(t.Enum("level", &w.constraints.topology.level,
                                 {{"none", TopologyLevel::kNone},
                                  {"nvlink", TopologyLevel::kNvlink},
                                  {"node", TopologyLevel::kNode},
                                  {"rack", TopologyLevel::kRack}}));
    TIDAL_RETURN_IF_ERROR(t.Bool("required", &w.constraints.topology.required));
  }
  spec.has_image = r.Has("image");
  spec.has_dataset = r.Has("dataset");
  spec.has_model_version = r.Has("model_version");
  TIDAL_RETURN_IF_ERROR(r.String("image", &rec.run.image));
  TIDAL_RETURN_IF_ERROR(r.String("dataset", &rec.run.dataset));
  TIDAL_RETURN_IF_ERROR(r.String("model_version", &rec.run.model_version));
  TIDAL_RETURN_IF_ERROR(r.StringList("command", &rec.run.command));
  TIDAL_RETURN_IF_ERROR(r.StringMap("env", &rec.run.env));
  TIDAL_RETURN_IF_ERROR(r.StringMap("labels", &rec.run.labels));
  TIDAL_RETURN_IF_ERROR(ReadEndpoint(r, "readiness", &rec.run.readiness));
  TIDAL_RETURN_IF_ERROR(ReadEndpoint(r, "load_endpoint", &rec.run.load_endpoint));
  return spec;
}

json PriorityToJson(const Priority& p) {
  return {{"value", p.value},
          {"preemptibility", PreemptibilityClassName(p.preemptibility)},
          {"template", p.template_name},
          {"derivation", p.derivation},
          {"awaiting_approval", p.awaiting_approval}};
}

json WaitToJson(const WaitDecision& w) {
  json j = {{"reason", ReasonCodeName(w.reason)}, {"detail", w.detail}};
  j["estimated_start_ms"] =
      w.estimated_start ? json(ToMillis(*w.estimated_start)) : json(nullptr);
  return j;
}

namespace {

json PodsToJson(const std::vector<PodPlacement>& pods, const Catalog& catalog) {
  json out = json::array();
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodPlacement& p = pods[i];
    out.push_back({{"rank", i},
                   {"node", p.node.value() < catalog.cluster.nodes.size()
                                ? catalog.cluster.nodes[p.node.value()].name
                                : ""},
                   {"gpus", MaskToIndices(p.gpus)}});
  }
  return out;
}

StatusOr<std::vector<PodPlacement>> PodsFromJson(const json& j, const Catalog& catalog) {
  std::vector<PodPlacement> pods;
  for (const json& p : j) {
    auto node = catalog.FindNode(p.at("node").get<std::string>());
    if (!node) return NotFound(fmt::format("allocation node \"{}\" is unknown", p.at("node").dump()));
    GpuMask mask = 0;
    for (int g : p.at("gpus")) mask |= GpuMask{1} << g;
    pods.push_back({*node, mask});
  }
  return pods;
}

json NoticeToJson(const std::optional<StopNotice>& n) {
  if (!n) return nullptr;
  return {{"cause", n->cause},
          {"notice_time_ms", n->notice_ms},
          {"grace_deadline_ms", n->grace_deadline_ms},
          {"requeue", n->requeue}};
}

std::optional<StopNotice> NoticeFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  return StopNotice{j.at("cause").get<std::string>(), j.at("notice_time_ms").get<int64_t>(),
                    j.at("grace_deadline_ms").get<int64_t>(), j.value("requeue", true)};
}

}  // namespace

json RecordToJson(const WorkloadRecord& r, const Catalog& catalog) {
  const Workload& w = r.w;
  json j;
  j["id"] = w.id.value();
  j["name"] = w.name;
  j["kind"] = WorkloadKindName(w.kind);
  j["state"] = WorkloadStateName(w.state);
  j["tenant"] = w.tenant;
  j["project"] = catalog.ProjectName(w.project);
  j["queue"] = catalog.QueueName(w.queue);
  j["gpus_per_replica"] = w.gpus_per_pod;
  j["replicas"] = w.pods;
  j["min_replicas"] = w.min_pods;
  j["max_replicas"] = w.max_pods;
  j["preemptible"] = w.preemptible;
  j["duration_s"] = Secs(w.expected_duration);
  j["submit_time_ms"] = ToMillis(w.submit_time);
  j["submitted_by"] = r.submitted_by;
  if (w.kind == WorkloadKind::kTraining) {
    j["checkpoint_interval_s"] = Secs(w.training.checkpoint_interval);
  }
  if (w.kind == WorkloadKind::kInference) {
    j["target_p99_ms"] = w.inference.target_p99.count();
    j["cold_start_s"] = Secs(w.inference.cold_start);
    j["replica_capacity_rps"] = w.inference.replica_capacity_rps;
    j["model_size_gib"] = w.inference.model_size_gib;
    j["model_source"] =
        w.inference.model_source == ModelSource::kLocalCache ? "local_cache" : "shared_storage";
  }
  if (w.batch.deadline != kInfiniteFuture) j["deadline_ms"] = ToMillis(w.batch.deadline);
  if (w.kind == WorkloadKind::kDebug) j["max_runtime_s"] = Secs(w.debug.max_runtime);
  const PlacementConstraints& c = w.constraints;
  j["gpu_models"] = {{"required", c.required_gpu_models}, {"preferred", c.preferred_gpu_models}};
  j["node_selector"] = c.node_selector;
  j["tolerations"] = json::array();
  for (const Taint& t : c.tolerations) j["tolerations"].push_back({{"key", t.key}, {"value", t.value}});
  j["topology"] = {{"level", TopologyLevelName(c.topology.level)}, {"required", c.topology.required}};
  j["image"] = r.run.image;
  j["dataset"] = r.run.dataset;
  j["model_version"] = r.run.model_version;
  j["command"] = r.run.command;
  j["env"] = r.run.env;
  j["labels"] = r.run.labels;
  j["readiness"] = EndpointToJson(r.run.readiness);
  j["load_endpoint"] = EndpointToJson(r.run.load_endpoint);
  j["budget_gpu_hours"] = r.run.budget_gpu_hours;
  j["priority"] = PriorityToJson(w.priority);
  if (r.allocation) {
    const Allocation& a = *r.allocation;
    j["allocation"] = {{"pods", PodsToJson(a.pods, catalog)},
                       {"start_time_ms", ToMillis(a.start_time)},
                       {"last_checkpoint_ms", ToMillis(a.last_checkpoint)},
                       {"borrowed", a.borrowed},
                       {"terminating", a.terminating},
                       {"grace_deadline_ms", a.grace_deadline == kInfiniteFuture
                                                 ? json(nullptr)
                                                 : json(ToMillis(a.grace_deadline))}};
  } else {
    j["allocation"] = nullptr;
  }
  j["stop"] = NoticeToJson(r.stop);
  j["shrink"] = NoticeToJson(r.shrink_notice);
  j["stopping_pods"] = PodsToJson(r.stopping_pods, catalog);
  j["exited_ranks"] = r.exited_ranks;
  j["ready_ranks"] = r.ready_ranks;
  j["pod_started_ms"] = r.pod_started_ms;
  j["wait"] = r.last_wait ? WaitToJson(*r.last_wait) : json(nullptr);
  j["rejected"] = r.rejected ? json{{"reason", ReasonCodeName(r.rejected->reason)},
                                    {"detail", r.rejected->detail}}
                             : json(nullptr);
  j["runs"] = json::array();
  for (const RunInterval& run : r.runs) {
    j["runs"].push_back({{"start_ms", run.start_ms}, {"end_ms", run.end_ms}, {"gpus", run.gpus},
                         {"borrowed", run.borrowed}, {"end_reason", run.end_reason},
                         {"gpu_model", run.gpu_model}});
  }
  j["preemptions"] = json::array();
  for (const PreemptionRecord& p : r.preemptions) {
    j["preemptions"].push_back({{"time_ms", p.time_ms}, {"audit_seq", p.audit_seq},
                                {"cause", p.cause}, {"preemptor", p.preemptor},
                                {"lost_gpu_seconds", p.lost_gpu_seconds},
                                {"recovery_s", p.recovery_s}});
  }
  j["scale_ups"] = json::array();
  for (const ScaleUp& s : r.scale_ups) {
    j["scale_ups"].push_back({{"requested_ms", s.requested_ms}, {"from", s.from_pods},
                              {"to", s.to_pods}, {"placed_ms", s.placed_ms},
                              {"ready_ms", s.ready_ms}, {"victims_grace_s", s.victims_grace_s},
                              {"failed", s.failed}});
  }
  j["finish_time_ms"] = r.finish_time_ms;
  j["first_start_ms"] = r.first_start_ms;
  j["utilization"] = r.utilization;
  j["load"] = {{"rps", r.load_rps}, {"p95_ms", r.p95_ms}, {"p99_ms", r.p99_ms},
               {"slo_samples", r.slo_samples}, {"slo_met", r.slo_met}};
  j["gang_start_failures"] = r.gang_start_failures;
  return j;
}

StatusOr<WorkloadRecord> RecordFromJson(const json& j, const Catalog& catalog) {
  try {
    WorkloadRecord r;
    Workload& w = r.w;
    w.id = WorkloadId(j.at("id").get<uint64_t>());
    w.name = j.at("name").get<std::string>();
    w.kind = ParseKind(j.at("kind").get<std::string>()).value_or(WorkloadKind::kTraining);
    w.state = ParseState(j.at("state").get<std::string>()).value_or(WorkloadState::kPending);
    w.tenant = j.at("tenant").get<std::string>();
    auto project = catalog.FindProject(j.at("project").get<std::string>());
    auto queue = catalog.FindQueue(j.at("queue").get<std::string>());
    if (!project || !queue) {
      return NotFound(fmt::format("workload {}: project \"{}\" or queue \"{}\" is not configured",
                                  w.id.value(), j.at("project").get<std::string>(),
                                  j.at("queue").get<std::string>()));
    }
    w.project = *project;
    w.queue = *queue;
    w.gpus_per_pod = j.at("gpus_per_replica");
    w.pods = j.at("replicas");
    w.min_pods = j.at("min_replicas");
    w.max_pods = j.at("max_replicas");
    w.preemptible = j.at("preemptible");
    w.expected_duration = SecondsF(j.at("duration_s").get<double>());
    w.submit_time = TimeFromMillis(j.at("submit_time_ms"));
    r.submitted_by = j.value("submitted_by", "");
    w.training.checkpoint_interval = SecondsF(j.value("checkpoint_interval_s", 0.0));
    w.inference.target_p99 = Duration(j.value("target_p99_ms", int64_t{0}));
    w.inference.cold_start = SecondsF(j.value("cold_start_s", 0.0));
    w.inference.replica_capacity_rps = j.value("replica_capacity_rps", 0.0);
    w.inference.model_size_gib = j.value("model_size_gib", 0.0);
    w.inference.model_source = j.value("model_source", "local_cache") == "shared_storage"
                                   ? ModelSource::kSharedStorage
                                   : ModelSource::kLocalCache;
    if (j.contains("deadline_ms")) w.batch.deadline = TimeFromMillis(j.at("deadline_ms"));
    w.debug.max_runtime = SecondsF(j.value("max_runtime_s", 3600.0));
    PlacementConstraints& c = w.constraints;
    c.required_gpu_models = j.at("gpu_models").at("required").get<std::vector<std::string>>();
    c.preferred_gpu_models = j.at("gpu_models").at("preferred").get<std::vector<std::string>>();
    c.node_selector = j.at("node_selector").get<std::map<std::string, std::string>>();
    for (const json& t : j.at("tolerations")) {
      c.tolerations.push_back({t.at("key"), t.at("value")});
    }
    const std::string level = j.at("topology").at("level");
    c.topology.level = level == "nvlink" ? TopologyLevel::kNvlink
                       : level == "node" ? TopologyLevel::kNode
                       : level == "rack" ? TopologyLevel::kRack
                                         : TopologyLevel::kNone;
    c.topology.required = j.at("topology").at("required");
    r.run.image = j.value("image", "");
    r.run.dataset = j.value("dataset", "");
    r.run.model_version = j.value("model_version", "");
    r.run.command = j.value("command", std::vector<std::string>{});
    r.run.env = j.value("env", std::map<std::string, std::string>{});
    r.run.labels = j.value("labels", std::map<std::string, std::string>{});
    r.run.readiness = EndpointFromJson(j.value("readiness", json()));
    r.run.load_endpoint = EndpointFromJson(j.value("load_endpoint", json()));
    r.run.budget_gpu_hours = j.value("budget_gpu_hours", 0.0);
    const json& p = j.at("priority");
    w.priority.value = p.at("value");
    const std::string pc = p.at("preemptibility");
    w.priority.preemptibility = pc == "never"         ? PreemptibilityClass::kNever
                                : pc == "reclaimable" ? PreemptibilityClass::kReclaimable
                                                      : PreemptibilityClass::kPreemptible;
    w.priority.template_name = p.at("template");
    w.priority.derivation = p.at("derivation").get<std::vector<std::string>>();
    w.priority.awaiting_approval = p.at("awaiting_approval");
    if (j.at("allocation").is_object()) {
      const json& a = j.at("allocation");
      Allocation alloc;
      alloc.workload = w.id;
      TIDAL_ASSIGN_OR_RETURN(alloc.pods, PodsFromJson(a.at("pods"), catalog));
      alloc.start_time = TimeFromMillis(a.at("start_time_ms"));
      alloc.last_checkpoint = TimeFromMillis(a.at("last_checkpoint_ms"));
      alloc.borrowed = a.at("borrowed");
      alloc.terminating = a.at("terminating");
      alloc.grace_deadline = a.at("grace_deadline_ms").is_null()
                                 ? kInfiniteFuture
                                 : TimeFromMillis(a.at("grace_deadline_ms"));
      r.allocation = alloc;
    }
    r.stop = NoticeFromJson(j.value("stop", json()));
    r.shrink_notice = NoticeFromJson(j.value("shrink", json()));
    TIDAL_ASSIGN_OR_RETURN(r.stopping_pods, PodsFromJson(j.value("stopping_pods", json::array()), catalog));
    r.exited_ranks = j.value("exited_ranks", std::set<int>{});
    r.ready_ranks = j.value("ready_ranks", std::set<int>{});
    r.pod_started_ms = j.value("pod_started_ms", int64_t{0});
    if (j.at("wait").is_object()) {
      const json& wj = j.at("wait");
      WaitDecision wd;
      wd.workload = w.id;
      wd.detail = wj.at("detail");
      for (int c = 0; c <= static_cast<int>(ReasonCode::kCapacity); ++c) {
        if (ReasonCodeName(static_cast<ReasonCode>(c)) == wj.at("reason").get<std::string>()) {
          wd.reason = static_cast<ReasonCode>(c);
        }
      }
      if (!wj.at("estimated_start_ms").is_null()) {
        wd.estimated_start = TimeFromMillis(wj.at("estimated_start_ms"));
      }
      r.last_wait = wd;
    }
    if (j.value("rejected", json()).is_object()) {
      RejectDecision rd;
      rd.workload = w.id;
      rd.detail = j.at("rejected").at("detail");
      r.rejected = rd;
    }
    for (const json& run : j.value("runs", json::array())) {
      r.runs.push_back({run.at("start_ms"), run.at("end_ms"), run.at("gpus"), run.at("borrowed"),
                        run.at("end_reason"), run.value("gpu_model", "")});
    }
    for (const json& pr : j.value("preemptions", json::array())) {
      r.preemptions.push_back({pr.at("time_ms"), pr.at("audit_seq"), pr.at("cause"),
                               pr.at("preemptor"), pr.at("lost_gpu_seconds"), pr.at("recovery_s")});
    }
    for (const json& s : j.value("scale_ups", json::array())) {
      r.scale_ups.push_back({s.at("requested_ms"), s.at("from"), s.at("to"), s.at("placed_ms"),
                             s.at("ready_ms"), s.at("victims_grace_s"), s.at("failed")});
    }
    r.finish_time_ms = j.value("finish_time_ms", int64_t{0});
    r.first_start_ms = j.value("first_start_ms", int64_t{0});
    r.utilization = j.value("utilization", -1.0);
    const json load = j.value("load", json::object());
    r.load_rps = load.value("rps", 0.0);
    r.p95_ms = load.value("p95_ms", 0.0);
    r.p99_ms = load.value("p99_ms", 0.0);
    r.slo_samples = load.value("slo_samples", int64_t{0});
    r.slo_met = load.value("slo_met", int64_t{0});
    r.gang_start_failures = j.value("gang_start_failures", 0);
    return r;
  } catch (const json::exception& e) {
    return Internal(fmt::format("stored workload record is malformed: {}", e.what()));
  }
}

}  // namespace tidal::server
