#include "protocol/journal_record.h"
#include "protocol/journal_snapshot.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "protocol/colocation_memory.h"
#include "protocol/json_writer.h"
#include "protocol/object_reader.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;
using state::Edit;

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

template <typename E>
using EnumTable = std::initializer_list<std::pair<std::string_view, E>>;

const EnumTable<state::EditOrigin> kOrigins = {{"world", state::EditOrigin::kWorld},
                                               {"priority", state::EditOrigin::kPriority},
                                               {"lifecycle", state::EditOrigin::kLifecycle},
                                               {"colocation", state::EditOrigin::kColocation},
                                               {"engine", state::EditOrigin::kEngine}};
const EnumTable<PassPhase> kPhases = {{"tick", PassPhase::kTick},
                                      {"plan_snapshot", PassPhase::kPlanSnapshot},
                                      {"plan_apply", PassPhase::kPlanApply},
                                      {"engine_snapshot", PassPhase::kEngineSnapshot},
                                      {"engine_apply", PassPhase::kEngineApply}};
const EnumTable<WorkloadKind> kKinds = {{"training", WorkloadKind::kTraining},
                                        {"inference", WorkloadKind::kInference},
                                        {"batch_inference", WorkloadKind::kBatchInference},
                                        {"debug", WorkloadKind::kDebug}};
const EnumTable<WorkloadState> kStates = {{"awaiting_approval", WorkloadState::kAwaitingApproval},
                                          {"pending", WorkloadState::kPending},
                                          {"running", WorkloadState::kRunning},
                                          {"terminating", WorkloadState::kTerminating},
                                          {"succeeded", WorkloadState::kSucceeded},
                                          {"failed", WorkloadState::kFailed},
                                          {"cancelled", WorkloadState::kCancelled}};
const EnumTable<PreemptibilityClass> kClasses = {{"never", PreemptibilityClass::kNever},
                                                 {"preemptible", PreemptibilityClass::kPreemptible},
                                                 {"reclaimable", PreemptibilityClass::kReclaimable}};
const EnumTable<TopologyLevel> kLevels = {{"none", TopologyLevel::kNone},
                                          {"nvlink", TopologyLevel::kNvlink},
                                          {"node", TopologyLevel::kNode},
                                          {"rack", TopologyLevel::kRack}};
const EnumTable<ModelSource> kSources = {{"local_cache", ModelSource::kLocalCache},
                                         {"shared_storage", ModelSource::kSharedStorage}};
const EnumTable<PreemptCause> kCauses = {{"priority", PreemptCause::kPriority},
                                         {"reclaim", PreemptCause::kReclaim},
                                         {"inference_return", PreemptCause::kInferenceReturn},
                                         {"max_runtime", PreemptCause::kMaxRuntime},
                                         {"idle", PreemptCause::kIdle},
                                         {"drain", PreemptCause::kDrain},
                                         {"cancel", PreemptCause::kCancel}};
const EnumTable<Health> kHealths = {
    {"healthy", Health::kHealthy},
    {"degraded", Health::kDegraded},
    {"failed", Health::kFailed},
    {"not_ready", Health::kNotReady}};

const EnumTable<state::ScaleUpResult> kScaleUpResults = {{"ready", state::ScaleUpResult::kReady},
                                                         {"timed_out", state::ScaleUpResult::kTimedOut}};

const EnumTable<state::EndCause> kEndCauses = {{"reported", state::EndCause::kReported},
                                               {"grace_expired", state::EndCause::kGraceExpired},
                                               {"node_lost", state::EndCause::kNodeLost}};

// Every enum value is in its table (a new one without a name is a codec
// bug, caught by the round-trip test), so the fallback is never written.
template <typename E>
std::string_view NameOf(const EnumTable<E>& table, E value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}

// Edit names in variant order, the ones EditName() gives.
constexpr std::string_view kEditNames[] = {
    "submit", "approve", "set_priority", "set_target", "place",   "grow",
    "notice", "shrink",  "pod_exit",     "checkpoint", "requeue", "release",
    "lend",   "return",  "register_node", "node_health", "gpu_fault", "cordon",
    "lease",  "idle", "replica_ready", "scale_up_end"};
static_assert(std::size(kEditNames) == std::variant_size_v<Edit>);

// Times are exact milliseconds; the infinite future (no deadline) is null.
json TimeJson(Time t) { return t == kInfiniteFuture ? json(nullptr) : json(ToMillis(t)); }
constexpr int64_t kMinMs = kMinTimeMs;
constexpr int64_t kMaxMs = kMaxTimeMs;
constexpr int64_t kMaxId32 = static_cast<int64_t>(NodeId::kInvalid) - 1;  // kInvalid is no id
constexpr int64_t kMaxWorkloadId = std::numeric_limits<int64_t>::max();

json GpusJson(GpuMask mask) {
  json out = json::array();
  while (mask != 0) {
    out.push_back(std::countr_zero(mask));
    mask &= mask - 1;
  }
  return out;
}

json PodJson(const PodPlacement& p) { return {{"node", p.node.value()}, {"gpus", GpusJson(p.gpus)}}; }

json PodsJson(const std::vector<PodPlacement>& pods) {
  json out = json::array();
  for (const PodPlacement& p : pods) out.push_back(PodJson(p));
  return out;
}

json PriorityJson(const Priority& p) {
  return {{"value", p.value},
          {"preemptibility", NameOf(kClasses, p.preemptibility)},
          {"template", p.template_name},
          {"derivation", p.derivation},
          {"awaiting_approval", p.awaiting_approval},
          {"resume_bonus", p.resume_bonus},
          {"borrowing_start_delta", p.borrowing_start_delta}};
}

json NodeJson(const Node& n) {
  json domains = json::array();
  for (GpuMask d : n.nvlink_domains) domains.push_back(GpusJson(d));
  json taints = json::array();
  for (const Taint& t : n.taints) taints.push_back({{"key", t.key}, {"value", t.value}});
  return {{"id", n.id.value()},
          {"name", n.name},
          {"pool", n.pool.value()},
          {"rack", n.rack.valid() ? json(n.rack.value()) : json(nullptr)},
          {"zone", n.zone.valid() ? json(n.zone.value()) : json(nullptr)},
          {"gpu_model", n.gpu_model},
          {"gpu_memory_gib", n.gpu_memory_gib},
          {"gpu_count", n.gpu_count},
          {"nvlink_domains", std::move(domains)},
          {"mig_capable", n.mig_capable},
          {"driver_version", n.driver_version},
          {"nic_gbps", n.network.nic_gbps},
          {"rdma", n.network.rdma},
          {"health", NameOf(kHealths, n.health)},
          {"failed_gpus", GpusJson(n.failed_gpus)},
          {"cordoned", n.cordoned},
          {"labels", n.labels},
          {"taints", std::move(taints)}};
}

// The save on request is written only when the job has one, so journals of
// jobs without it read as they did before it existed.
json TrainingJson(const TrainingSpec& t) {
  json j = {{"checkpoint_interval_ms", t.checkpoint_interval.count()}};
  if (t.checkpoint_on_request.count() > 0) j["checkpoint_on_request_ms"] = t.checkpoint_on_request.count();
  return j;
}

json WorkloadJson(const Workload& w) {
  json tolerations = json::array();
  for (const Taint& t : w.constraints.tolerations) tolerations.push_back({{"key", t.key}, {"value", t.value}});
  json j = {
      {"id", w.id.value()},
      {"name", w.name},
      {"tenant", w.tenant},
      {"project", w.project.value()},
      {"queue", w.queue.value()},
      {"requeues", w.requeues},
      {"kind", NameOf(kKinds, w.kind)},
      {"state", NameOf(kStates, w.state)},
      {"gpus_per_pod", w.gpus_per_pod},
      {"pods", w.pods},
      {"min_pods", w.min_pods},
      {"max_pods", w.max_pods},
      {"preemptible", w.preemptible},
      {"expected_duration_ms", w.expected_duration.count()},
      {"submit_time_ms", TimeJson(w.submit_time)},
      {"constraints",
       {{"required_gpu_models", w.constraints.required_gpu_models},
        {"preferred_gpu_models", w.constraints.preferred_gpu_models},
        {"node_selector", w.constraints.node_selector},
        {"tolerations", std::move(tolerations)},
        {"topology",
         {{"level", NameOf(kLevels, w.constraints.topology.level)},
          {"required", w.constraints.topology.required}}}}},
      // Every kind's profile, not only this kind's: the replay must rebuild
      // exactly the workload the server held.
      {"training", TrainingJson(w.training)},
      {"inference",
       {{"target_p99_ms", w.inference.target_p99.count()},
        {"cold_start_ms", w.inference.cold_start.count()},
        {"replica_capacity_rps", w.inference.replica_capacity_rps},
        {"model_size_gib", w.inference.model_size_gib},
        {"model_source", NameOf(kSources, w.inference.model_source)}}},
      {"batch", {{"deadline_ms", TimeJson(w.batch.deadline)}}},
      {"debug", {{"max_runtime_ms", w.debug.max_runtime.count()}}},
      {"priority", PriorityJson(w.priority)},
  };
  if (w.spare_pods > 0) j["spare_pods"] = w.spare_pods;
  return j;
}

json EditJson(const Edit& edit) {
  json j;
  j["edit"] = kEditNames[edit.index()];
  std::visit(Overloaded{
                 [&](const state::SubmitEdit& e) { j["workload"] = WorkloadJson(e.workload); },
                 [&](const state::ApproveEdit& e) { j["workload"] = e.workload.value(); },
                 [&](const state::SetPriorityEdit& e) {
                   j["workload"] = e.workload.value();
                   j["priority"] = PriorityJson(e.priority);
                 },
                 [&](const state::SetTargetEdit& e) {
                   j["workload"] = e.workload.value();
                   j["pods"] = e.pods;
                   j["min_pods"] = e.min_pods;
                   j["max_pods"] = e.max_pods;
                   if (e.spare_pods > 0) j["spare_pods"] = e.spare_pods;
                 },
                 [&](const state::PlaceEdit& e) {
                   j["workload"] = e.workload.value();
                   j["pods"] = PodsJson(e.pods);
                   j["borrowed"] = e.borrowed;
                 },
                 [&](const state::GrowEdit& e) {
                   j["workload"] = e.workload.value();
                   j["pods"] = PodsJson(e.pods);
                 },
                 [&](const state::NoticeEdit& e) {
                   j["workload"] = e.workload.value();
                   j["preemptor"] = e.preemptor.value();
                   j["cause"] = NameOf(kCauses, e.cause);
                   j["grace_deadline_ms"] = TimeJson(e.grace_deadline);
                   j["lost_gpu_seconds"] = e.lost_gpu_seconds;
                   j["requeue"] = e.requeue;
                 },
                 [&](const state::ShrinkEdit& e) {
                   j["workload"] = e.workload.value();
                   j["pods"] = PodsJson(e.pods);
                   j["beneficiary"] = e.beneficiary.value();
                   j["grace_deadline_ms"] = TimeJson(e.grace_deadline);
                 },
                 [&](const state::PodExitEdit& e) {
                   j["workload"] = e.workload.value();
                   j["pod"] = PodJson(e.pod);
                 },
                 [&](const state::CheckpointEdit& e) {
                   j["workload"] = e.workload.value();
                   j["checkpoint_ms"] = TimeJson(e.at);
                 },
                 // `cause` only when the lifecycle ended it: the world's
                 // (most) requeues and releases stay as they were written.
                 [&](const state::RequeueEdit& e) {
                   j["workload"] = e.workload.value();
                   if (e.cause != state::EndCause::kReported) j["cause"] = NameOf(kEndCauses, e.cause);
                 },
                 [&](const state::ReleaseEdit& e) {
                   j["workload"] = e.workload.value();
                   j["final_state"] = NameOf(kStates, e.final_state);
                   if (e.cause != state::EndCause::kReported) j["cause"] = NameOf(kEndCauses, e.cause);
                 },
                 [&](const state::LeaseEdit& e) {
                   j["node"] = e.node.value();
                   j["until_ms"] = TimeJson(e.until);
                 },
                 [&](const state::IdleEdit& e) {
                   j["workload"] = e.workload.value();
                   j["reclaim_at_ms"] = TimeJson(e.reclaim_at);
                 },
                 [&](const state::ReplicaReadyEdit& e) {
                   j["workload"] = e.workload.value();
                   j["pod"] = PodJson(e.pod);
                   j["ready"] = e.ready;
                 },
                 [&](const state::ScaleUpEndEdit& e) {
                   j["workload"] = e.workload.value();
                   j["result"] = NameOf(kScaleUpResults, e.result);
                   j["from"] = e.from;
                   j["to"] = e.to;
                   j["requested_at_ms"] = TimeJson(e.requested_at);
                   j["ready_at_ms"] = TimeJson(e.ready_at);
                 },
                 [&](const state::LendEdit& e) { j["node"] = e.node.value(); },
                 [&](const state::ReturnEdit& e) { j["node"] = e.node.value(); },
                 [&](const state::RegisterNodeEdit& e) {
                   j["node"] = NodeJson(e.node);
                   json zones = json::array(), racks = json::array();
                   for (const Zone& z : e.zones) zones.push_back({{"id", z.id.value()}, {"name", z.name}});
                   for (const Rack& k : e.racks) {
                     racks.push_back({{"id", k.id.value()}, {"name", k.name}, {"zone", k.zone.value()}});
                   }
                   j["zones"] = std::move(zones);
                   j["racks"] = std::move(racks);
                 },
                 [&](const state::NodeHealthEdit& e) {
                   j["node"] = e.node.value();
                   j["health"] = NameOf(kHealths, e.health);
                 },
                 [&](const state::GpuFaultEdit& e) {
                   j["node"] = e.node.value();
                   j["gpus"] = GpusJson(e.gpus);
                 },
                 [&](const state::CordonEdit& e) {
                   j["node"] = e.node.value();
                   j["cordoned"] = e.cordoned;
                 },
             },
             edit);
  return j;
}

// ---- Reading --------------------------------------------------------------

using Keys = std::vector<std::string_view>;

StatusOr<ObjectReader> Open(const json& value, const std::string& path, Keys keys) {
  return ObjectReader::Open(value, path, std::move(keys));
}

Status Require(const ObjectReader& r, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) {
    if (!r.Has(k)) return r.Missing(k);
  }
  return Status::Ok();
}

template <typename E>
Status ReadEnum(const ObjectReader& r, std::string_view key, const EnumTable<E>& table, E* out) {
  if (!r.Has(key)) return Status::Ok();
  std::string name;
  TIDAL_RETURN_IF_ERROR(r.String(key, &name));
  for (const auto& [n, v] : table) {
    if (n == name) {
      *out = v;
      return Status::Ok();
    }
  }
  std::string names;
  for (const auto& [n, v] : table) names += (names.empty() ? "" : "|") + std::string(n);
  return FieldError(r.FieldPath(key), "expected one of " + names + ", got " + Shown(r.at(key)));
}

// A required time: integer milliseconds, never null.
Status ReadAt(const ObjectReader& r, std::string_view key, Time* out) {
  if (!r.Has(key)) return r.Missing(key);
  int64_t ms = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64(key, &ms, kMinMs, kMaxMs));
  *out = TimeFromMillis(ms);
  return Status::Ok();
}

Status ReadDuration(const ObjectReader& r, std::string_view key, Duration* out) {
  int64_t ms = out->count();
  TIDAL_RETURN_IF_ERROR(r.Int64(key, &ms, 0, kMaxMs));
  *out = Duration(ms);
  return Status::Ok();
}

Status ReadWorkloadId(const ObjectReader& r, std::string_view key, WorkloadId* out, int64_t min = 1) {
  int64_t id = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64(key, &id, min, kMaxWorkloadId));
  *out = WorkloadId(static_cast<uint64_t>(id));
  return Status::Ok();
}

template <typename Id>
Status ReadId32(const ObjectReader& r, std::string_view key, Id* out) {
  int64_t id = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64(key, &id, 0, kMaxId32));
  *out = Id(static_cast<uint32_t>(id));
  return Status::Ok();
}

Status CheckString(const ObjectReader& r, std::string_view key, const std::string& s) {
  if (s.size() > kMaxJournalStringBytes) {
    return FieldError(r.FieldPath(key), "longer than " + std::to_string(kMaxJournalStringBytes) + " bytes");
  }
  return Status::Ok();
}

Status ReadString(const ObjectReader& r, std::string_view key, std::string* out) {
  TIDAL_RETURN_IF_ERROR(r.String(key, out));
  return CheckString(r, key, *out);
}

Status CheckSize(const json& v, const std::string& path, size_t max) {
  if (v.is_array() && v.size() > max) {
    return FieldError(path, "more than " + std::to_string(max) + " entries (" + std::to_string(v.size()) + ")");
  }
  if (v.is_object() && v.size() > max) {
    return FieldError(path, "more than " + std::to_string(max) + " entries (" + std::to_string(v.size()) + ")");
  }
  return Status::Ok();
}

Status ReadStringList(const ObjectReader& r, std::string_view key, std::vector<std::string>* out) {
  if (!r.Has(key)) return Status::Ok();
  TIDAL_RETURN_IF_ERROR(CheckSize(r.at(key), r.FieldPath(key), kMaxJournalListEntries));
  TIDAL_RETURN_IF_ERROR(r.StringList(key, out));
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].size() > kMaxJournalStringBytes) {
      return FieldError(IndexPath(r.FieldPath(key), i),
                        "longer than " + std::to_string(kMaxJournalStringBytes) + " bytes");
    }
  }
  return Status::Ok();
}

// GPU indices, strictly increasing, each once: the mask's canonical form.
Status ReadGpus(const json& v, const std::string& path, GpuMask* out) {
  TIDAL_RETURN_IF_ERROR(ExpectArray(v, path));
  TIDAL_RETURN_IF_ERROR(CheckSize(v, path, 64));
  std::vector<int> indices;
  TIDAL_RETURN_IF_ERROR(ReadIntList(v, path, 0, 63, &indices));
  GpuMask mask = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i > 0 && indices[i] <= indices[i - 1]) {
      return FieldError(IndexPath(path, i), "GPU indices must be listed once each, in increasing order");
    }
    mask |= GpuMask{1} << indices[i];
  }
  *out = mask;
  return Status::Ok();
}

StatusOr<PodPlacement> ReadPod(const json& v, const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(v, path, {"node", "gpus"}));
  TIDAL_RETURN_IF_ERROR(Require(r, {"node", "gpus"}));
  PodPlacement p;
  TIDAL_RETURN_IF_ERROR(ReadId32(r, "node", &p.node));
  TIDAL_RETURN_IF_ERROR(ReadGpus(r.at("gpus"), r.FieldPath("gpus"), &p.gpus));
  return p;
}

Status ReadPods(const ObjectReader& r, std::string_view key, std::vector<PodPlacement>* out) {
  if (!r.Has(key)) return r.Missing(key);
  const json& v = r.at(key);
  const std::string path = r.FieldPath(key);
  TIDAL_RETURN_IF_ERROR(ExpectArray(v, path));
  TIDAL_RETURN_IF_ERROR(CheckSize(v, path, kMaxJournalPods));
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(PodPlacement p, ReadPod(v[i], IndexPath(path, i)));
    out->push_back(p);
  }
  return Status::Ok();
}

StatusOr<Priority> ReadPriority(const json& v, const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(v, path, {"value", "preemptibility", "template", "derivation",
                                                        "awaiting_approval", "resume_bonus",
                                                        "borrowing_start_delta"}));
  TIDAL_RETURN_IF_ERROR(Require(r, {"value", "preemptibility", "template", "derivation", "awaiting_approval"}));
  Priority p;
  TIDAL_RETURN_IF_ERROR(r.Int("value", &p.value));
  TIDAL_RETURN_IF_ERROR(ReadEnum(r, "preemptibility", kClasses, &p.preemptibility));
  TIDAL_RETURN_IF_ERROR(ReadString(r, "template", &p.template_name));
  TIDAL_RETURN_IF_ERROR(ReadStringList(r, "derivation", &p.derivation));
  TIDAL_RETURN_IF_ERROR(r.Bool("awaiting_approval", &p.awaiting_approval));
  // Journals written before the requeued bonus have none.
  if (r.Has("resume_bonus")) {
    TIDAL_RETURN_IF_ERROR(r.Int("resume_bonus", &p.resume_bonus));
  }
  // Journals written before the borrowing start delta have none: their
  // waiting workloads were derived with the state of their own start.
  if (r.Has("borrowing_start_delta")) {
    TIDAL_RETURN_IF_ERROR(r.Int("borrowing_start_delta", &p.borrowing_start_delta));
  }
  return p;
}

Status ReadConstraints(const json& v, const std::string& path, PlacementConstraints* c) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(v, path, {"required_gpu_models", "preferred_gpu_models",
                                                        "node_selector", "tolerations", "topology"}));
  TIDAL_RETURN_IF_ERROR(Require(r, {"required_gpu_models", "preferred_gpu_models", "node_selector",
                                    "tolerations", "topology"}));
  TIDAL_RETURN_IF_ERROR(ReadStringList(r, "required_gpu_models", &c->required_gpu_models));
  TIDAL_RETURN_IF_ERROR(ReadStringList(r, "preferred_gpu_models", &c->preferred_gpu_models));
  TIDAL_RETURN_IF_ERROR(CheckSize(r.at("node_selector"), r.FieldPath("node_selector"), kMaxJournalListEntries));
  TIDAL_RETURN_IF_ERROR(r.StringMap("node_selector", &c->node_selector));
  for (const auto& [k, val] : c->node_selector) {
    if (k.size() > kMaxJournalStringBytes || val.size() > kMaxJournalStringBytes) {
      return FieldError(r.FieldPath("node_selector"), "a key or value is longer than " +
                                                          std::to_string(kMaxJournalStringBytes) + " bytes");
    }
  }
  const json& tol = r.at("tolerations");
  const std::string tol_path = r.FieldPath("tolerations");
  TIDAL_RETURN_IF_ERROR(ExpectArray(tol, tol_path));
  TIDAL_RETURN_IF_ERROR(CheckSize(tol, tol_path, kMaxJournalListEntries));
  for (size_t i = 0; i < tol.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, Open(tol[i], IndexPath(tol_path, i), {"key", "value"}));
    TIDAL_RETURN_IF_ERROR(Require(tr, {"key", "value"}));
    Taint t;
    TIDAL_RETURN_IF_ERROR(ReadString(tr, "key", &t.key));
    TIDAL_RETURN_IF_ERROR(ReadString(tr, "value", &t.value));
    c->tolerations.push_back(std::move(t));
  }
  TIDAL_ASSIGN_OR_RETURN(ObjectReader topo, Open(r.at("topology"), r.FieldPath("topology"), {"level", "required"}));
  TIDAL_RETURN_IF_ERROR(Require(topo, {"level", "required"}));
  TIDAL_RETURN_IF_ERROR(ReadEnum(topo, "level", kLevels, &c->topology.level));
  TIDAL_RETURN_IF_ERROR(topo.Bool("required", &c->topology.required));
  return Status::Ok();
}

// A key whose value may be null (a deadline): present, unlike Has().
bool Present(const json& obj, std::string_view key) { return obj.is_object() && obj.contains(key); }

Status ReadNullableTime(const ObjectReader& r, const json& obj, std::string_view key, Time* out) {
  if (!Present(obj, key)) return r.Missing(key);
  if (obj.at(key).is_null()) {
    *out = kInfiniteFuture;
    return Status::Ok();
  }
  return ReadAt(r, key, out);
}

StatusOr<Workload> ReadWorkload(const json& v, const std::string& path) {
  static const Keys kKeys = {"id",          "name",        "tenant",   "project",      "queue",
                             "kind",        "state",       "gpus_per_pod", "pods",     "min_pods",
                             "max_pods",    "preemptible", "expected_duration_ms", "submit_time_ms",
                             "constraints", "training",    "inference", "batch",       "debug",
                             "priority",    "requeues",    "spare_pods"};
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(v, path, kKeys));
  for (std::string_view k : kKeys) {
    // Journals written before requeues were counted have none; spare_pods
    // is written only when there are some.
    if (k != "submit_time_ms" && k != "requeues" && k != "spare_pods" && !r.Has(k)) return r.Missing(k);
  }
  Workload w;
  TIDAL_RETURN_IF_ERROR(ReadWorkloadId(r, "id", &w.id));
  TIDAL_RETURN_IF_ERROR(ReadString(r, "name", &w.name));
  TIDAL_RETURN_IF_ERROR(ReadString(r, "tenant", &w.tenant));
  TIDAL_RETURN_IF_ERROR(ReadId32(r, "project", &w.project));
  TIDAL_RETURN_IF_ERROR(ReadId32(r, "queue", &w.queue));
  TIDAL_RETURN_IF_ERROR(ReadEnum(r, "kind", kKinds, &w.kind));
  TIDAL_RETURN_IF_ERROR(ReadEnum(r, "state", kStates, &w.state));
  constexpr int kMaxPods = static_cast<int>(kMaxJournalPods);
  TIDAL_RETURN_IF_ERROR(r.Int("gpus_per_pod", &w.gpus_per_pod, 1, kMaxGpusPerNode));
  TIDAL_RETURN_IF_ERROR(r.Int("pods", &w.pods, 0, kMaxPods));
  TIDAL_RETURN_IF_ERROR(r.Int("min_pods", &w.min_pods, 0, kMaxPods));
  TIDAL_RETURN_IF_ERROR(r.Int("max_pods", &w.max_pods, 0, kMaxPods));
  if (r.Has("spare_pods")) TIDAL_RETURN_IF_ERROR(r.Int("spare_pods", &w.spare_pods, 0, w.pods));
  TIDAL_RETURN_IF_ERROR(r.Bool("preemptible", &w.preemptible));
  TIDAL_RETURN_IF_ERROR(ReadDuration(r, "expected_duration_ms", &w.expected_duration));
  TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, v, "submit_time_ms", &w.submit_time));
  TIDAL_RETURN_IF_ERROR(ReadConstraints(r.at("constraints"), r.FieldPath("constraints"), &w.constraints));

  TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, Open(r.at("training"), r.FieldPath("training"),
                                               {"checkpoint_interval_ms", "checkpoint_on_request_ms"}));
  TIDAL_RETURN_IF_ERROR(Require(tr, {"checkpoint_interval_ms"}));
  TIDAL_RETURN_IF_ERROR(ReadDuration(tr, "checkpoint_interval_ms", &w.training.checkpoint_interval));
  // Written only when the job saves on request: older journals have none.
  if (tr.Has("checkpoint_on_request_ms")) {
    TIDAL_RETURN_IF_ERROR(ReadDuration(tr, "checkpoint_on_request_ms", &w.training.checkpoint_on_request));
  }

  TIDAL_ASSIGN_OR_RETURN(ObjectReader ir, Open(r.at("inference"), r.FieldPath("inference"),
                                               {"target_p99_ms", "cold_start_ms", "replica_capacity_rps",
                                                "model_size_gib", "model_source"}));
  TIDAL_RETURN_IF_ERROR(Require(ir, {"target_p99_ms", "cold_start_ms", "replica_capacity_rps", "model_size_gib",
                                     "model_source"}));
  TIDAL_RETURN_IF_ERROR(ReadDuration(ir, "target_p99_ms", &w.inference.target_p99));
  TIDAL_RETURN_IF_ERROR(ReadDuration(ir, "cold_start_ms", &w.inference.cold_start));
  TIDAL_RETURN_IF_ERROR(ir.Double("replica_capacity_rps", &w.inference.replica_capacity_rps, 0, 1e12));
  TIDAL_RETURN_IF_ERROR(ir.Double("model_size_gib", &w.inference.model_size_gib, 0, 1e12));
  TIDAL_RETURN_IF_ERROR(ReadEnum(ir, "model_source", kSources, &w.inference.model_source));

  TIDAL_ASSIGN_OR_RETURN(ObjectReader br, Open(r.at("batch"), r.FieldPath("batch"), {"deadline_ms"}));
  TIDAL_RETURN_IF_ERROR(ReadNullableTime(br, r.at("batch"), "deadline_ms", &w.batch.deadline));

  TIDAL_ASSIGN_OR_RETURN(ObjectReader dr, Open(r.at("debug"), r.FieldPath("debug"), {"max_runtime_ms"}));
  TIDAL_RETURN_IF_ERROR(Require(dr, {"max_runtime_ms"}));
  TIDAL_RETURN_IF_ERROR(ReadDuration(dr, "max_runtime_ms", &w.debug.max_runtime));

  TIDAL_ASSIGN_OR_RETURN(w.priority, ReadPriority(r.at("priority"), r.FieldPath("priority")));
  if (r.Has("requeues")) {
    TIDAL_RETURN_IF_ERROR(r.Int("requeues", &w.requeues, 0, std::numeric_limits<int>::max()));
  }
  return w;
}

// An id that may be null (a node outside any rack or zone).
template <typename Id>
Status ReadOptionalId32(const ObjectReader& r, const json& obj, std::string_view key, Id* out) {
  if (!Present(obj, key)) return r.Missing(key);
  if (obj.at(key).is_null()) {
    *out = Id();
    return Status::Ok();
  }
  return ReadId32(r, key, out);
}

StatusOr<Node> ReadNode(const json& v, const std::string& path) {
  static const Keys kKeys = {"id",          "name",         "pool",         "rack",      "zone",
                             "gpu_model",   "gpu_memory_gib", "gpu_count",  "nvlink_domains",
                             "mig_capable", "driver_version", "nic_gbps",   "rdma",      "health",
                             "failed_gpus", "cordoned",     "labels",       "taints"};
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(v, path, kKeys));
  for (std::string_view k : kKeys) {
    if (!Present(v, k)) return r.Missing(k);
  }
  Node n;
  TIDAL_RETURN_IF_ERROR(ReadId32(r, "id", &n.id));
  TIDAL_RETURN_IF_ERROR(ReadString(r, "name", &n.name));
  TIDAL_RETURN_IF_ERROR(ReadId32(r, "pool", &n.pool));
  TIDAL_RETURN_IF_ERROR(ReadOptionalId32(r, v, "rack", &n.rack));
  TIDAL_RETURN_IF_ERROR(ReadOptionalId32(r, v, "zone", &n.zone));
  TIDAL_RETURN_IF_ERROR(ReadString(r, "gpu_model", &n.gpu_model));
  TIDAL_RETURN_IF_ERROR(r.Int("gpu_memory_gib", &n.gpu_memory_gib, 0, 1 << 20));
  TIDAL_RETURN_IF_ERROR(r.Int("gpu_count", &n.gpu_count, 1, kMaxGpusPerNode));
  const json& domains = r.at("nvlink_domains");
  const std::string domains_path = r.FieldPath("nvlink_domains");
  TIDAL_RETURN_IF_ERROR(ExpectArray(domains, domains_path));
  TIDAL_RETURN_IF_ERROR(CheckSize(domains, domains_path, kMaxGpusPerNode));
  for (size_t i = 0; i < domains.size(); ++i) {
    GpuMask d = 0;
    TIDAL_RETURN_IF_ERROR(ReadGpus(domains[i], IndexPath(domains_path, i), &d));
    n.nvlink_domains.push_back(d);
  }
  TIDAL_RETURN_IF_ERROR(r.Bool("mig_capable", &n.mig_capable));
  TIDAL_RETURN_IF_ERROR(ReadString(r, "driver_version", &n.driver_version));
  TIDAL_RETURN_IF_ERROR(r.Double("nic_gbps", &n.network.nic_gbps, 0, 1e9));
  TIDAL_RETURN_IF_ERROR(r.Bool("rdma", &n.network.rdma));
  TIDAL_RETURN_IF_ERROR(ReadEnum(r, "health", kHealths, &n.health));
  TIDAL_RETURN_IF_ERROR(ReadGpus(r.at("failed_gpus"), r.FieldPath("failed_gpus"), &n.failed_gpus));
  TIDAL_RETURN_IF_ERROR(r.Bool("cordoned", &n.cordoned));
  TIDAL_RETURN_IF_ERROR(CheckSize(r.at("labels"), r.FieldPath("labels"), kMaxJournalListEntries));
  TIDAL_RETURN_IF_ERROR(r.StringMap("labels", &n.labels));
  for (const auto& [k, val] : n.labels) {
    if (k.size() > kMaxJournalStringBytes || val.size() > kMaxJournalStringBytes) {
      return FieldError(r.FieldPath("labels"), "a key or value is longer than " +
                                                   std::to_string(kMaxJournalStringBytes) + " bytes");
    }
  }
  const json& taints = r.at("taints");
  const std::string taints_path = r.FieldPath("taints");
  TIDAL_RETURN_IF_ERROR(ExpectArray(taints, taints_path));
  TIDAL_RETURN_IF_ERROR(CheckSize(taints, taints_path, kMaxJournalListEntries));
  for (size_t i = 0; i < taints.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, Open(taints[i], IndexPath(taints_path, i), {"key", "value"}));
    TIDAL_RETURN_IF_ERROR(Require(tr, {"key", "value"}));
    Taint t;
    TIDAL_RETURN_IF_ERROR(ReadString(tr, "key", &t.key));
    TIDAL_RETURN_IF_ERROR(ReadString(tr, "value", &t.value));
    n.taints.push_back(std::move(t));
  }
  return n;
}

StatusOr<state::RegisterNodeEdit> ReadRegisterNode(const ObjectReader& r) {
  state::RegisterNodeEdit e;
  TIDAL_ASSIGN_OR_RETURN(e.node, ReadNode(r.at("node"), r.FieldPath("node")));
  const json& zones = r.at("zones");
  const std::string zones_path = r.FieldPath("zones");
  TIDAL_RETURN_IF_ERROR(ExpectArray(zones, zones_path));
  TIDAL_RETURN_IF_ERROR(CheckSize(zones, zones_path, kMaxJournalPods));
  for (size_t i = 0; i < zones.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader zr, Open(zones[i], IndexPath(zones_path, i), {"id", "name"}));
    TIDAL_RETURN_IF_ERROR(Require(zr, {"id", "name"}));
    Zone z;
    TIDAL_RETURN_IF_ERROR(ReadId32(zr, "id", &z.id));
    TIDAL_RETURN_IF_ERROR(ReadString(zr, "name", &z.name));
    e.zones.push_back(std::move(z));
  }
  const json& racks = r.at("racks");
  const std::string racks_path = r.FieldPath("racks");
  TIDAL_RETURN_IF_ERROR(ExpectArray(racks, racks_path));
  TIDAL_RETURN_IF_ERROR(CheckSize(racks, racks_path, kMaxJournalPods));
  for (size_t i = 0; i < racks.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader kr, Open(racks[i], IndexPath(racks_path, i), {"id", "name", "zone"}));
    TIDAL_RETURN_IF_ERROR(Require(kr, {"id", "name", "zone"}));
    Rack k;
    TIDAL_RETURN_IF_ERROR(ReadId32(kr, "id", &k.id));
    TIDAL_RETURN_IF_ERROR(ReadString(kr, "name", &k.name));
    TIDAL_RETURN_IF_ERROR(ReadId32(kr, "zone", &k.zone));
    e.racks.push_back(std::move(k));
  }
  return e;
}

// The fields each edit has after "record", "at_ms", "origin" and "edit".
Keys EditFields(std::string_view name) {
  if (name == "submit" || name == "approve") return {"workload"};
  if (name == "requeue") return {"workload", "cause"};
  if (name == "set_priority") return {"workload", "priority"};
  if (name == "set_target") return {"workload", "pods", "min_pods", "max_pods", "spare_pods"};
  if (name == "register_node") return {"node", "zones", "racks"};
  if (name == "place") return {"workload", "pods", "borrowed"};
  if (name == "grow") return {"workload", "pods"};
  if (name == "notice") return {"workload", "preemptor", "cause", "grace_deadline_ms", "lost_gpu_seconds", "requeue"};
  if (name == "shrink") return {"workload", "pods", "beneficiary", "grace_deadline_ms"};
  if (name == "pod_exit") return {"workload", "pod"};
  if (name == "checkpoint") return {"workload", "checkpoint_ms"};
  if (name == "release") return {"workload", "final_state", "cause"};
  if (name == "lease") return {"node", "until_ms"};
  if (name == "idle") return {"workload", "reclaim_at_ms"};
  if (name == "replica_ready") return {"workload", "pod", "ready"};
  if (name == "scale_up_end") return {"workload", "result", "from", "to", "requested_at_ms", "ready_at_ms"};
  if (name == "lend" || name == "return") return {"node"};
  if (name == "node_health") return {"node", "health"};
  if (name == "gpu_fault") return {"node", "gpus"};
  if (name == "cordon") return {"node", "cordoned"};
  return {};
}

StatusOr<Edit> ReadEdit(const ObjectReader& r, const json& j, std::string_view name) {
  // Every listed field is required but a requeue's or release's `cause`
  // (absent = reported) and a target's `spare_pods` (absent = none, as
  // journals before spares wrote it); a deadline may be null (none).
  for (std::string_view k : EditFields(name)) {
    if (k == "cause" && (name == "requeue" || name == "release")) continue;
    if (k == "spare_pods") continue;
    if (!Present(j, k)) return r.Missing(k);
    if (j.at(k).is_null() && k != "grace_deadline_ms" && k != "until_ms" && k != "reclaim_at_ms" &&
        k != "ready_at_ms") {
      return r.Missing(k);
    }
  }
  WorkloadId w;
  if (Present(j, "workload") && name != "submit") TIDAL_RETURN_IF_ERROR(ReadWorkloadId(r, "workload", &w));
  if (name == "register_node") {
    TIDAL_ASSIGN_OR_RETURN(state::RegisterNodeEdit e, ReadRegisterNode(r));
    return Edit(std::move(e));
  }
  NodeId node;
  if (Present(j, "node")) TIDAL_RETURN_IF_ERROR(ReadId32(r, "node", &node));
  if (name == "submit") {
    TIDAL_ASSIGN_OR_RETURN(Workload wl, ReadWorkload(r.at("workload"), r.FieldPath("workload")));
    return Edit(state::SubmitEdit{std::move(wl)});
  }
  if (name == "approve") return Edit(state::ApproveEdit{w});
  if (name == "set_priority") {
    TIDAL_ASSIGN_OR_RETURN(Priority p, ReadPriority(r.at("priority"), r.FieldPath("priority")));
    return Edit(state::SetPriorityEdit{w, std::move(p)});
  }
  if (name == "set_target") {
    state::SetTargetEdit e{w, 0};
    TIDAL_RETURN_IF_ERROR(r.Int("pods", &e.pods, 0, static_cast<int>(kMaxJournalPods)));
    TIDAL_RETURN_IF_ERROR(r.Int("min_pods", &e.min_pods, 0, static_cast<int>(kMaxJournalPods)));
    TIDAL_RETURN_IF_ERROR(r.Int("max_pods", &e.max_pods, 0, static_cast<int>(kMaxJournalPods)));
    if (r.Has("spare_pods")) {
      TIDAL_RETURN_IF_ERROR(r.Int("spare_pods", &e.spare_pods, 0, e.pods));
    }
    return Edit(e);
  }
  if (name == "place") {
    state::PlaceEdit e{w, {}, false};
    TIDAL_RETURN_IF_ERROR(ReadPods(r, "pods", &e.pods));
    TIDAL_RETURN_IF_ERROR(r.Bool("borrowed", &e.borrowed));
    return Edit(std::move(e));
  }
  if (name == "grow") {
    state::GrowEdit e{w, {}};
    TIDAL_RETURN_IF_ERROR(ReadPods(r, "pods", &e.pods));
    return Edit(std::move(e));
  }
  if (name == "notice") {
    state::NoticeEdit e;
    e.workload = w;
    TIDAL_RETURN_IF_ERROR(ReadWorkloadId(r, "preemptor", &e.preemptor, 0));
    TIDAL_RETURN_IF_ERROR(ReadEnum(r, "cause", kCauses, &e.cause));
    TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, j, "grace_deadline_ms", &e.grace_deadline));
    TIDAL_RETURN_IF_ERROR(r.Double("lost_gpu_seconds", &e.lost_gpu_seconds, 0, 1e18));
    TIDAL_RETURN_IF_ERROR(r.Bool("requeue", &e.requeue));
    return Edit(e);
  }
  if (name == "shrink") {
    state::ShrinkEdit e;
    e.workload = w;
    TIDAL_RETURN_IF_ERROR(ReadPods(r, "pods", &e.pods));
    TIDAL_RETURN_IF_ERROR(ReadWorkloadId(r, "beneficiary", &e.beneficiary, 0));
    TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, j, "grace_deadline_ms", &e.grace_deadline));
    return Edit(std::move(e));
  }
  if (name == "pod_exit") {
    TIDAL_ASSIGN_OR_RETURN(PodPlacement pod, ReadPod(r.at("pod"), r.FieldPath("pod")));
    return Edit(state::PodExitEdit{w, pod});
  }
  if (name == "checkpoint") {
    state::CheckpointEdit e{w, Time()};
    TIDAL_RETURN_IF_ERROR(ReadAt(r, "checkpoint_ms", &e.at));
    return Edit(e);
  }
  if (name == "requeue") {
    state::RequeueEdit e{w};
    if (Present(j, "cause")) TIDAL_RETURN_IF_ERROR(ReadEnum(r, "cause", kEndCauses, &e.cause));
    return Edit(e);
  }
  if (name == "lease") {
    state::LeaseEdit e{node};
    TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, j, "until_ms", &e.until));
    return Edit(e);
  }
  if (name == "idle") {
    state::IdleEdit e{w};
    TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, j, "reclaim_at_ms", &e.reclaim_at));
    return Edit(e);
  }
  if (name == "replica_ready") {
    TIDAL_ASSIGN_OR_RETURN(PodPlacement pod, ReadPod(r.at("pod"), r.FieldPath("pod")));
    state::ReplicaReadyEdit e{w, pod};
    TIDAL_RETURN_IF_ERROR(r.Bool("ready", &e.ready));
    return Edit(e);
  }
  if (name == "scale_up_end") {
    state::ScaleUpEndEdit e{w};
    TIDAL_RETURN_IF_ERROR(ReadEnum(r, "result", kScaleUpResults, &e.result));
    TIDAL_RETURN_IF_ERROR(r.Int("from", &e.from, 0, static_cast<int>(kMaxJournalPods)));
    TIDAL_RETURN_IF_ERROR(r.Int("to", &e.to, 0, static_cast<int>(kMaxJournalPods)));
    TIDAL_RETURN_IF_ERROR(ReadAt(r, "requested_at_ms", &e.requested_at));
    TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, j, "ready_at_ms", &e.ready_at));
    return Edit(e);
  }
  if (name == "release") {
    state::ReleaseEdit e{w, WorkloadState::kSucceeded};
    if (Present(j, "cause")) TIDAL_RETURN_IF_ERROR(ReadEnum(r, "cause", kEndCauses, &e.cause));
    TIDAL_RETURN_IF_ERROR(ReadEnum(r, "final_state", kStates, &e.final_state));
    if (e.final_state != WorkloadState::kSucceeded && e.final_state != WorkloadState::kFailed &&
        e.final_state != WorkloadState::kCancelled) {
      return FieldError(r.FieldPath("final_state"),
                        "expected one of succeeded|failed|cancelled, got " + Shown(r.at("final_state")));
    }
    return Edit(e);
  }
  if (name == "lend") return Edit(state::LendEdit{node});
  if (name == "return") return Edit(state::ReturnEdit{node});
  if (name == "node_health") {
    state::NodeHealthEdit e{node, Health::kHealthy};
    TIDAL_RETURN_IF_ERROR(ReadEnum(r, "health", kHealths, &e.health));
    return Edit(e);
  }
  if (name == "gpu_fault") {
    state::GpuFaultEdit e{node, 0};
    TIDAL_RETURN_IF_ERROR(ReadGpus(r.at("gpus"), r.FieldPath("gpus"), &e.gpus));
    return Edit(e);
  }
  if (name == "cordon") {
    state::CordonEdit e{node, true};
    TIDAL_RETURN_IF_ERROR(r.Bool("cordoned", &e.cordoned));
    return Edit(e);
  }
  std::string names;
  for (std::string_view n : kEditNames) names += (names.empty() ? "" : "|") + std::string(n);
  return FieldError("edit", "expected one of " + names + ", got " + Shown(r.at("edit")));
}

// How deep JSON text nests, counted without parsing (strings skipped), so
// that hostile nesting is refused before the parser recurses into it.
size_t NestingDepth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    else if ((c == '}' || c == ']') && depth > 0) --depth;
  }
  return deepest;
}
constexpr size_t kMaxDepth = 8;  // a submit's tolerations nest 5 deep

}  // namespace

std::string_view PassPhaseName(PassPhase phase) { return NameOf(kPhases, phase); }

json JournalRecordToJson(const JournalRecord& record) {
  return std::visit(Overloaded{
                        [](const state::JournalEntry& e) {
                          json j = {{"record", "edit"},
                                    {"at_ms", ToMillis(e.at)},
                                    {"origin", NameOf(kOrigins, e.origin)}};
                          j.update(EditJson(e.edit));
                          return j;
                        },
                        [](const PassMarker& m) {
                          return json{{"record", "pass"}, {"at_ms", ToMillis(m.at)},
                                      {"phase", NameOf(kPhases, m.phase)}};
                        },
                        [](const LoadSample& s) {
                          return json{{"record", "load"}, {"at_ms", ToMillis(s.at)},
                                      {"workload", s.workload.value()}, {"rps", s.rps}};
                        },
                        [](const ServerStart& s) {
                          return json{{"record", "server_start"}, {"at_ms", ToMillis(s.at)}};
                        },
                    },
                    record);
}

StatusOr<JournalRecord> JournalRecordFromJson(const json& j) {
  if (!j.is_object()) return FieldError("record", "expected a JSON object, got " + Shown(j));
  if (!j.contains("record")) return FieldError("record", "required field is missing");
  const json& kind = j.at("record");
  if (kind == "pass") {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(j, "", {"record", "at_ms", "phase"}));
    TIDAL_RETURN_IF_ERROR(Require(r, {"phase"}));
    PassMarker m;
    TIDAL_RETURN_IF_ERROR(ReadAt(r, "at_ms", &m.at));
    TIDAL_RETURN_IF_ERROR(ReadEnum(r, "phase", kPhases, &m.phase));
    return JournalRecord(m);
  }
  if (kind == "load") {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(j, "", {"record", "at_ms", "workload", "rps"}));
    TIDAL_RETURN_IF_ERROR(Require(r, {"workload", "rps"}));
    LoadSample s;
    TIDAL_RETURN_IF_ERROR(ReadAt(r, "at_ms", &s.at));
    TIDAL_RETURN_IF_ERROR(ReadWorkloadId(r, "workload", &s.workload));
    TIDAL_RETURN_IF_ERROR(r.Double("rps", &s.rps, 0, 1e12));
    return JournalRecord(s);
  }
  if (kind == "server_start") {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(j, "", {"record", "at_ms"}));
    ServerStart start;
    TIDAL_RETURN_IF_ERROR(ReadAt(r, "at_ms", &start.at));
    return JournalRecord(start);
  }
  if (kind == "edit") {
    if (!j.contains("edit")) return FieldError("edit", "required field is missing");
    const json& name_json = j.at("edit");
    if (!name_json.is_string()) return FieldError("edit", "expected a string, got " + Shown(name_json));
    const std::string name = name_json.get<std::string>();
    Keys keys = EditFields(name);
    if (keys.empty()) {
      std::string names;
      for (std::string_view n : kEditNames) names += (names.empty() ? "" : "|") + std::string(n);
      return FieldError("edit", "expected one of " + names + ", got " + Shown(name_json));
    }
    keys.insert(keys.end(), {"record", "at_ms", "origin", "edit"});
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(j, "", keys));
    TIDAL_RETURN_IF_ERROR(Require(r, {"origin"}));
    state::JournalEntry e;
    TIDAL_RETURN_IF_ERROR(ReadAt(r, "at_ms", &e.at));
    TIDAL_RETURN_IF_ERROR(ReadEnum(r, "origin", kOrigins, &e.origin));
    TIDAL_ASSIGN_OR_RETURN(e.edit, ReadEdit(r, j, name));
    return JournalRecord(std::move(e));
  }
  return FieldError("record", "expected one of edit|pass|load|server_start, got " + Shown(kind));
}

namespace {

void WriteTime(JsonWriter& out, Time t) {
  if (t == kInfiniteFuture) {
    out.Null();
  } else {
    out.Int(ToMillis(t));
  }
}

// WorkloadJson written directly, keys in the sorted order dump() prints.
void WriteWorkload(JsonWriter& out, const Workload& w) {
  out.BeginObject();
  out.Key("batch");
  out.BeginObject();
  out.Key("deadline_ms");
  WriteTime(out, w.batch.deadline);
  out.EndObject();
  out.Key("constraints");
  out.BeginObject();
  out.Key("node_selector");
  out.StringMap(w.constraints.node_selector);
  out.Key("preferred_gpu_models");
  out.StringArray(w.constraints.preferred_gpu_models);
  out.Key("required_gpu_models");
  out.StringArray(w.constraints.required_gpu_models);
  out.Key("tolerations");
  WriteTaints(out, w.constraints.tolerations);
  out.Key("topology");
  out.BeginObject();
  out.Key("level");
  out.String(NameOf(kLevels, w.constraints.topology.level));
  out.Key("required");
  out.Bool(w.constraints.topology.required);
  out.EndObject();
  out.EndObject();
  out.Key("debug");
  out.BeginObject();
  out.Key("max_runtime_ms");
  out.Int(w.debug.max_runtime.count());
  out.EndObject();
  out.Key("expected_duration_ms");
  out.Int(w.expected_duration.count());
  out.Key("gpus_per_pod");
  out.Int(w.gpus_per_pod);
  out.Key("id");
  out.Uint(w.id.value());
  out.Key("inference");
  out.BeginObject();
  out.Key("cold_start_ms");
  out.Int(w.inference.cold_start.count());
  out.Key("model_size_gib");
  out.Double(w.inference.model_size_gib);
  out.Key("model_source");
  out.String(NameOf(kSources, w.inference.model_source));
  out.Key("replica_capacity_rps");
  out.Double(w.inference.replica_capacity_rps);
  out.Key("target_p99_ms");
  out.Int(w.inference.target_p99.count());
  out.EndObject();
  out.Key("kind");
  out.String(NameOf(kKinds, w.kind));
  out.Key("max_pods");
  out.Int(w.max_pods);
  out.Key("min_pods");
  out.Int(w.min_pods);
  out.Key("name");
  out.String(w.name);
  out.Key("pods");
  out.Int(w.pods);
  out.Key("preemptible");
  out.Bool(w.preemptible);
  out.Key("priority");
  WritePriority(out, w.priority);
  out.Key("project");
  out.Uint(w.project.value());
  out.Key("queue");
  out.Uint(w.queue.value());
  out.Key("requeues");
  out.Int(w.requeues);
  if (w.spare_pods > 0) {
    out.Key("spare_pods");
    out.Int(w.spare_pods);
  }
  out.Key("state");
  out.String(NameOf(kStates, w.state));
  out.Key("submit_time_ms");
  WriteTime(out, w.submit_time);
  out.Key("tenant");
  out.String(w.tenant);
  out.Key("training");
  out.BeginObject();
  out.Key("checkpoint_interval_ms");
  out.Int(w.training.checkpoint_interval.count());
  if (w.training.checkpoint_on_request.count() > 0) {
    out.Key("checkpoint_on_request_ms");
    out.Int(w.training.checkpoint_on_request.count());
  }
  out.EndObject();
  out.EndObject();
}

// A placement: one per workload a pass starts, thousands in a pass over a
// deep backlog, so written without a tree too.
std::string PlaceEntryText(Time at, state::EditOrigin origin, const state::Edit& edit) {
  const auto& place = std::get<state::PlaceEdit>(edit);
  std::string text;
  text.reserve(128 + 32 * place.pods.size());
  JsonWriter out(text);
  out.BeginObject();
  out.Key("at_ms");
  out.Int(ToMillis(at));
  out.Key("borrowed");
  out.Bool(place.borrowed);
  out.Key("edit");
  out.String(kEditNames[edit.index()]);
  out.Key("origin");
  out.String(NameOf(kOrigins, origin));
  out.Key("pods");
  out.BeginArray();
  for (const PodPlacement& p : place.pods) {
    out.BeginObject();
    out.Key("gpus");
    out.BeginArray();
    for (GpuMask mask = p.gpus; mask != 0; mask &= mask - 1) out.Int(std::countr_zero(mask));
    out.EndArray();
    out.Key("node");
    out.Uint(p.node.value());
    out.EndObject();
  }
  out.EndArray();
  out.Key("record");
  out.String("edit");
  out.Key("workload");
  out.Uint(place.workload.value());
  out.EndObject();
  return text;
}

}  // namespace

std::string JournalEntryText(Time at, state::EditOrigin origin, const state::Edit& edit) {
  if (std::holds_alternative<state::PlaceEdit>(edit)) return PlaceEntryText(at, origin, edit);
  const auto* submit = std::get_if<state::SubmitEdit>(&edit);
  if (submit == nullptr) {
    json j = {{"record", "edit"}, {"at_ms", ToMillis(at)}, {"origin", NameOf(kOrigins, origin)}};
    j.update(EditJson(edit));
    return j.dump();
  }
  // A submit carries its whole workload: one record per durable submit, the
  // journal's hottest, written without a tree (same text as the tree's dump).
  std::string text;
  text.reserve(1024);
  JsonWriter out(text);
  out.BeginObject();
  out.Key("at_ms");
  out.Int(ToMillis(at));
  out.Key("edit");
  out.String(kEditNames[edit.index()]);
  out.Key("origin");
  out.String(NameOf(kOrigins, origin));
  out.Key("record");
  out.String("edit");
  out.Key("workload");
  WriteWorkload(out, submit->workload);
  out.EndObject();
  return text;
}

std::string JournalRecordToText(const JournalRecord& record) {
  if (const auto* e = std::get_if<state::JournalEntry>(&record)) return JournalEntryText(e->at, e->origin, e->edit);
  return JournalRecordToJson(record).dump();
}

StatusOr<JournalRecord> JournalRecordFromText(std::string_view text) {
  if (text.size() > kMaxJournalRecordBytes) {
    return InvalidArgument("journal record: longer than " + std::to_string(kMaxJournalRecordBytes) + " bytes");
  }
  if (NestingDepth(text) > kMaxDepth) {
    return InvalidArgument("journal record: nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("journal record: not valid JSON");
  return JournalRecordFromJson(j);
}

// ---- Snapshots (protocol/journal_snapshot.h) ------------------------------

namespace {

json NodeIdsJson(const std::vector<bool>& set) {
  json out = json::array();
  for (size_t i = 0; i < set.size(); ++i) {
    if (set[i]) out.push_back(i);
  }
  return out;
}

json AllocationJson(const Allocation& a, const state::State::AllocationExtras& x) {
  json stop = nullptr;
  if (x.has_stop) {
    stop = {{"cause", NameOf(kCauses, x.stop.cause)},
            {"preemptor", x.stop.preemptor.value()},
            {"notice_time_ms", ToMillis(x.stop.notice_time)},
            {"grace_deadline_ms", TimeJson(x.stop.grace_deadline)},
            {"lost_gpu_seconds", x.stop.lost_gpu_seconds},
            {"requeue", x.stop.requeue}};
  }
  return {{"workload", a.workload.value()},
          {"pods", PodsJson(a.pods)},
          {"start_ms", ToMillis(a.start_time)},
          {"last_checkpoint_ms", ToMillis(a.last_checkpoint)},
          {"terminating", a.terminating},
          {"grace_deadline_ms", TimeJson(a.grace_deadline)},
          {"borrowed", a.borrowed},
          {"leaving", PodsJson(a.leaving)},
          {"leaving_deadline_ms", TimeJson(x.leaving_deadline)},
          {"idle_reclaim_at_ms", TimeJson(x.idle_reclaim_at)},
          {"ready", PodsJson(x.ready)},
          {"stop", std::move(stop)}};
}

// A list field of the snapshot: present, an array, within its bound.
StatusOr<const json*> SnapshotList(const ObjectReader& r, std::string_view key) {
  if (!r.Has(key)) return r.Missing(key);
  const json& v = r.at(key);
  TIDAL_RETURN_IF_ERROR(ExpectArray(v, r.FieldPath(key)));
  TIDAL_RETURN_IF_ERROR(CheckSize(v, r.FieldPath(key), kMaxSnapshotEntries));
  return &v;
}

// A set of node ids, increasing, each below `nodes`.
Status ReadNodeSet(const ObjectReader& r, std::string_view key, size_t nodes, std::vector<bool>* out) {
  TIDAL_ASSIGN_OR_RETURN(const json* v, SnapshotList(r, key));
  out->assign(nodes, false);
  std::vector<int64_t> ids;
  const std::string path = r.FieldPath(key);
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= static_cast<int64_t>(nodes)) {
      return FieldError(IndexPath(path, i), "expected a node id from 0 to " + std::to_string(nodes) +
                                                " (exclusive), got " + Shown(e));
    }
    const auto id = static_cast<size_t>(e.get<int64_t>());
    if ((*out)[id]) return FieldError(IndexPath(path, i), "node " + std::to_string(id) + " is listed twice");
    (*out)[id] = true;
  }
  return Status::Ok();
}

StatusOr<Allocation> ReadAllocation(const json& v, const std::string& path,
                                    state::State::AllocationExtras* x) {
  static const Keys kKeys = {"workload", "pods",      "start_ms", "last_checkpoint_ms", "terminating",
                             "grace_deadline_ms", "borrowed", "leaving", "leaving_deadline_ms",
                             "idle_reclaim_at_ms", "stop", "ready"};
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(v, path, kKeys));
  for (std::string_view k : kKeys) {
    // `ready` came later: a snapshot written before has no ready pods.
    if (!Present(v, k) && k != "ready") return r.Missing(k);
  }
  Allocation a;
  TIDAL_RETURN_IF_ERROR(ReadWorkloadId(r, "workload", &a.workload));
  TIDAL_RETURN_IF_ERROR(ReadPods(r, "pods", &a.pods));
  TIDAL_RETURN_IF_ERROR(ReadAt(r, "start_ms", &a.start_time));
  TIDAL_RETURN_IF_ERROR(ReadAt(r, "last_checkpoint_ms", &a.last_checkpoint));
  TIDAL_RETURN_IF_ERROR(r.Bool("terminating", &a.terminating));
  TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, v, "grace_deadline_ms", &a.grace_deadline));
  TIDAL_RETURN_IF_ERROR(r.Bool("borrowed", &a.borrowed));
  TIDAL_RETURN_IF_ERROR(ReadPods(r, "leaving", &a.leaving));
  TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, v, "leaving_deadline_ms", &x->leaving_deadline));
  TIDAL_RETURN_IF_ERROR(ReadNullableTime(r, v, "idle_reclaim_at_ms", &x->idle_reclaim_at));
  if (Present(v, "ready")) TIDAL_RETURN_IF_ERROR(ReadPods(r, "ready", &x->ready));
  const json& stop = r.at("stop");
  x->has_stop = !stop.is_null();
  if (x->has_stop) {
    static const Keys kStop = {"cause", "preemptor", "notice_time_ms", "grace_deadline_ms", "lost_gpu_seconds",
                               "requeue"};
    TIDAL_ASSIGN_OR_RETURN(ObjectReader sr, Open(stop, r.FieldPath("stop"), kStop));
    for (std::string_view k : kStop) {
      if (!Present(stop, k)) return sr.Missing(k);
    }
    TIDAL_RETURN_IF_ERROR(ReadEnum(sr, "cause", kCauses, &x->stop.cause));
    TIDAL_RETURN_IF_ERROR(ReadWorkloadId(sr, "preemptor", &x->stop.preemptor, 0));
    TIDAL_RETURN_IF_ERROR(ReadAt(sr, "notice_time_ms", &x->stop.notice_time));
    TIDAL_RETURN_IF_ERROR(ReadNullableTime(sr, stop, "grace_deadline_ms", &x->stop.grace_deadline));
    TIDAL_RETURN_IF_ERROR(sr.Double("lost_gpu_seconds", &x->stop.lost_gpu_seconds, 0, 1e18));
    TIDAL_RETURN_IF_ERROR(sr.Bool("requeue", &x->stop.requeue));
  }
  return a;
}

}  // namespace

JournalSnapshot SnapshotOf(int64_t seq, const state::State& st, std::vector<bool> registered) {
  const Snapshot& s = st.snapshot();
  state::State::Extras extras = st.extras();
  JournalSnapshot out;
  out.seq = seq;
  out.at = st.now();
  out.cluster_version = s.cluster_version;
  out.zones = s.cluster.zones;
  out.racks = s.cluster.racks;
  out.nodes = s.cluster.nodes;
  out.lent = s.lent_nodes;
  out.lent.resize(s.cluster.nodes.size(), false);
  registered.resize(s.cluster.nodes.size(), false);
  out.registered = std::move(registered);
  out.lease_until = extras.lease_until;
  out.lease_until.resize(s.cluster.nodes.size(), kInfiniteFuture);
  for (size_t p = 0; p < s.projects.size(); ++p) {
    out.projects.push_back({s.projects[p].used_gpu_hours, extras.project_base_hours[p], extras.project_gpu_s[p]});
  }
  out.workloads = s.workloads;
  out.allocations = s.allocations;
  out.allocation_extras = std::move(extras.allocations);
  out.scale_ups = std::move(extras.scale_ups);
  return out;
}

StatusOr<state::State> RestoreState(const JournalSnapshot& snapshot, const Cluster& configured,
                                    const std::vector<Queue>& queues, const std::vector<Project>& projects) {
  if (snapshot.nodes.size() != configured.nodes.size()) {
    return FailedPrecondition("snapshot: it holds " + std::to_string(snapshot.nodes.size()) +
                              " nodes, the cluster file " + std::to_string(configured.nodes.size()));
  }
  if (snapshot.projects.size() != projects.size()) {
    return FailedPrecondition("snapshot: it holds " + std::to_string(snapshot.projects.size()) +
                              " projects, the cluster file " + std::to_string(projects.size()));
  }
  Snapshot s;
  s.now = snapshot.at;
  s.cluster.pools = configured.pools;
  s.cluster.zones = snapshot.zones;
  s.cluster.racks = snapshot.racks;
  s.cluster.nodes = snapshot.nodes;
  s.queues = queues;
  s.projects = projects;
  state::State::Extras extras;
  for (size_t p = 0; p < projects.size(); ++p) {
    s.projects[p].used_gpu_hours = snapshot.projects[p].used_gpu_hours;
    extras.project_base_hours.push_back(snapshot.projects[p].base_gpu_hours);
    extras.project_gpu_s.push_back(snapshot.projects[p].gpu_seconds);
  }
  s.workloads = snapshot.workloads;
  s.allocations = snapshot.allocations;
  s.lent_nodes = snapshot.lent;
  s.cluster_version = snapshot.cluster_version;
  extras.allocations = snapshot.allocation_extras;
  extras.lease_until = snapshot.lease_until;
  extras.scale_ups = snapshot.scale_ups;
  auto restored = state::State::Restore(s, extras);
  if (!restored.ok()) return restored.status().WithContext("snapshot: ");
  return restored;
}

json JournalSnapshotToJson(const JournalSnapshot& s) {
  json zones = json::array(), racks = json::array(), nodes = json::array(), projects = json::array(),
       workloads = json::array(), allocations = json::array();
  for (const Zone& z : s.zones) zones.push_back({{"id", z.id.value()}, {"name", z.name}});
  for (const Rack& k : s.racks) racks.push_back({{"id", k.id.value()}, {"name", k.name}, {"zone", k.zone.value()}});
  for (const Node& n : s.nodes) nodes.push_back(NodeJson(n));
  for (const ProjectSpend& p : s.projects) {
    projects.push_back({{"used_gpu_hours", p.used_gpu_hours},
                        {"base_gpu_hours", p.base_gpu_hours},
                        {"gpu_seconds", p.gpu_seconds}});
  }
  for (const Workload& w : s.workloads) workloads.push_back(WorkloadJson(w));
  json leases = json::array();
  for (Time t : s.lease_until) leases.push_back(TimeJson(t));
  json scale_ups = json::array();
  for (const state::PendingScaleUp& su : s.scale_ups) {
    scale_ups.push_back({{"workload", su.workload.value()},
                         {"from", su.from},
                         {"to", su.to},
                         {"requested_at_ms", ToMillis(su.requested_at)},
                         {"ready_at_ms", TimeJson(su.ready_at)}});
  }
  for (size_t i = 0; i < s.allocations.size(); ++i) {
    allocations.push_back(AllocationJson(s.allocations[i], i < s.allocation_extras.size()
                                                               ? s.allocation_extras[i]
                                                               : state::State::AllocationExtras{}));
  }
  json j = {{"record", "snapshot"},
            {"seq", s.seq},
            {"at_ms", ToMillis(s.at)},
            {"cluster_version", s.cluster_version},
            {"zones", std::move(zones)},
            {"racks", std::move(racks)},
            {"nodes", std::move(nodes)},
            {"lent", NodeIdsJson(s.lent)},
            {"registered", NodeIdsJson(s.registered)},
            {"leases_until_ms", std::move(leases)},
            {"projects", std::move(projects)},
            {"workloads", std::move(workloads)},
            {"allocations", std::move(allocations)},
            {"scale_ups", std::move(scale_ups)}};
  if (s.colocation) j["colocation"] = ColocationMemoryToJson(*s.colocation);
  return j;
}

StatusOr<JournalSnapshot> JournalSnapshotFromJson(const json& j) {
  static const Keys kKeys = {"record",   "seq",      "at_ms",      "cluster_version", "zones",
                             "racks",    "nodes",    "lent",       "registered",      "leases_until_ms",
                             "projects", "workloads", "allocations", "scale_ups", "colocation"};
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, Open(j, "", kKeys));
  for (std::string_view k : kKeys) {
    // `scale_ups` and `colocation` came later: a snapshot written before has
    // no scale-up open, and its replay starts the controller afresh.
    if (!r.Has(k) && k != "scale_ups" && k != "colocation") return r.Missing(k);
  }
  if (r.at("record") != "snapshot") {
    return FieldError("record", "expected \"snapshot\", got " + Shown(r.at("record")));
  }
  JournalSnapshot s;
  TIDAL_RETURN_IF_ERROR(r.Int64("seq", &s.seq, 1, kMaxMs));
  TIDAL_RETURN_IF_ERROR(ReadAt(r, "at_ms", &s.at));
  int64_t version = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64("cluster_version", &version, 0, std::numeric_limits<int64_t>::max()));
  s.cluster_version = static_cast<uint64_t>(version);
  // Zones and racks are read as a registration's are.
  {
    TIDAL_ASSIGN_OR_RETURN(const json* zones, SnapshotList(r, "zones"));
    for (size_t i = 0; i < zones->size(); ++i) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader zr, Open((*zones)[i], IndexPath(r.FieldPath("zones"), i), {"id", "name"}));
      TIDAL_RETURN_IF_ERROR(Require(zr, {"id", "name"}));
      Zone z;
      TIDAL_RETURN_IF_ERROR(ReadId32(zr, "id", &z.id));
      TIDAL_RETURN_IF_ERROR(ReadString(zr, "name", &z.name));
      s.zones.push_back(std::move(z));
    }
    TIDAL_ASSIGN_OR_RETURN(const json* racks, SnapshotList(r, "racks"));
    for (size_t i = 0; i < racks->size(); ++i) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader kr,
                             Open((*racks)[i], IndexPath(r.FieldPath("racks"), i), {"id", "name", "zone"}));
      TIDAL_RETURN_IF_ERROR(Require(kr, {"id", "name", "zone"}));
      Rack k;
      TIDAL_RETURN_IF_ERROR(ReadId32(kr, "id", &k.id));
      TIDAL_RETURN_IF_ERROR(ReadString(kr, "name", &k.name));
      TIDAL_RETURN_IF_ERROR(ReadId32(kr, "zone", &k.zone));
      s.racks.push_back(std::move(k));
    }
  }
  TIDAL_ASSIGN_OR_RETURN(const json* nodes, SnapshotList(r, "nodes"));
  for (size_t i = 0; i < nodes->size(); ++i) {
    const std::string path = IndexPath(r.FieldPath("nodes"), i);
    TIDAL_ASSIGN_OR_RETURN(Node n, ReadNode((*nodes)[i], path));
    if (n.id.value() != i) return FieldError(path + ".id", "expected " + std::to_string(i) + " (nodes are listed by id)");
    s.nodes.push_back(std::move(n));
  }
  TIDAL_RETURN_IF_ERROR(ReadNodeSet(r, "lent", s.nodes.size(), &s.lent));
  TIDAL_RETURN_IF_ERROR(ReadNodeSet(r, "registered", s.nodes.size(), &s.registered));
  {
    TIDAL_ASSIGN_OR_RETURN(const json* leases, SnapshotList(r, "leases_until_ms"));
    if (leases->size() != s.nodes.size()) {
      return FieldError("leases_until_ms", "expected one per node (" + std::to_string(s.nodes.size()) + "), got " +
                                               std::to_string(leases->size()));
    }
    for (size_t i = 0; i < leases->size(); ++i) {
      const json& e = (*leases)[i];
      if (e.is_null()) {
        s.lease_until.push_back(kInfiniteFuture);
        continue;
      }
      if (!e.is_number_integer() || e.get<int64_t>() < kMinMs || e.get<int64_t>() > kMaxMs) {
        return FieldError(IndexPath("leases_until_ms", i), "expected null or a time in ms, got " + Shown(e));
      }
      s.lease_until.push_back(TimeFromMillis(e.get<int64_t>()));
    }
  }
  TIDAL_ASSIGN_OR_RETURN(const json* projects, SnapshotList(r, "projects"));
  for (size_t i = 0; i < projects->size(); ++i) {
    const std::string path = IndexPath(r.FieldPath("projects"), i);
    TIDAL_ASSIGN_OR_RETURN(ObjectReader pr, Open((*projects)[i], path, {"used_gpu_hours", "base_gpu_hours", "gpu_seconds"}));
    TIDAL_RETURN_IF_ERROR(Require(pr, {"used_gpu_hours", "base_gpu_hours", "gpu_seconds"}));
    ProjectSpend p;
    TIDAL_RETURN_IF_ERROR(pr.Double("used_gpu_hours", &p.used_gpu_hours, 0, 1e18));
    TIDAL_RETURN_IF_ERROR(pr.Double("base_gpu_hours", &p.base_gpu_hours, 0, 1e18));
    TIDAL_RETURN_IF_ERROR(pr.Double("gpu_seconds", &p.gpu_seconds, 0, 1e18));
    s.projects.push_back(p);
  }
  TIDAL_ASSIGN_OR_RETURN(const json* workloads, SnapshotList(r, "workloads"));
  for (size_t i = 0; i < workloads->size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(Workload w, ReadWorkload((*workloads)[i], IndexPath(r.FieldPath("workloads"), i)));
    s.workloads.push_back(std::move(w));
  }
  TIDAL_ASSIGN_OR_RETURN(const json* allocations, SnapshotList(r, "allocations"));
  for (size_t i = 0; i < allocations->size(); ++i) {
    state::State::AllocationExtras x;
    TIDAL_ASSIGN_OR_RETURN(Allocation a,
                           ReadAllocation((*allocations)[i], IndexPath(r.FieldPath("allocations"), i), &x));
    s.allocations.push_back(std::move(a));
    s.allocation_extras.push_back(x);
  }
  if (r.Has("scale_ups")) {
    TIDAL_ASSIGN_OR_RETURN(const json* scale_ups, SnapshotList(r, "scale_ups"));
    static const Keys kScaleUp = {"workload", "from", "to", "requested_at_ms", "ready_at_ms"};
    for (size_t i = 0; i < scale_ups->size(); ++i) {
      const json& v = (*scale_ups)[i];
      TIDAL_ASSIGN_OR_RETURN(ObjectReader sr, Open(v, IndexPath(r.FieldPath("scale_ups"), i), kScaleUp));
      TIDAL_RETURN_IF_ERROR(Require(sr, {"workload", "from", "to", "requested_at_ms"}));
      if (!Present(v, "ready_at_ms")) return sr.Missing("ready_at_ms");  // null = not ready yet
      state::PendingScaleUp su;
      TIDAL_RETURN_IF_ERROR(ReadWorkloadId(sr, "workload", &su.workload));
      TIDAL_RETURN_IF_ERROR(sr.Int("from", &su.from, 0, static_cast<int>(kMaxJournalPods)));
      TIDAL_RETURN_IF_ERROR(sr.Int("to", &su.to, 0, static_cast<int>(kMaxJournalPods)));
      TIDAL_RETURN_IF_ERROR(ReadAt(sr, "requested_at_ms", &su.requested_at));
      TIDAL_RETURN_IF_ERROR(ReadNullableTime(sr, v, "ready_at_ms", &su.ready_at));
      s.scale_ups.push_back(su);
    }
  }
  if (r.Has("colocation")) {
    TIDAL_ASSIGN_OR_RETURN(ColocationMemory memory, ColocationMemoryFromJson(r.at("colocation"), "colocation"));
    s.colocation = std::move(memory);
  }
  return s;
}

std::string JournalSnapshotToText(const JournalSnapshot& snapshot) {
  // The tree's dump() without the tree's bulk: its workloads (~60 values
  // each, tens of thousands of them) are written directly, everything else
  // is a small tree. The server encodes one on its snapshot thread, and the
  // CPU that takes is the request path's on a small machine. Same text as
  // the tree's dump (JournalSnapshotTest.TextIsTheTreeDumpByteForByte).
  JournalSnapshot rest;
  rest.seq = snapshot.seq;
  rest.at = snapshot.at;
  rest.cluster_version = snapshot.cluster_version;
  rest.zones = snapshot.zones;
  rest.racks = snapshot.racks;
  rest.nodes = snapshot.nodes;
  rest.lent = snapshot.lent;
  rest.registered = snapshot.registered;
  rest.lease_until = snapshot.lease_until;
  rest.projects = snapshot.projects;
  rest.scale_ups = snapshot.scale_ups;
  rest.colocation = snapshot.colocation;
  const json tree = JournalSnapshotToJson(rest);
  std::string text;
  text.reserve(1024 * (snapshot.workloads.size() + snapshot.allocations.size()) + 4096);
  JsonWriter out(text);
  out.BeginObject();
  for (const auto& [key, value] : tree.items()) {  // in the order dump() prints them
    out.Key(key);
    if (key == "workloads") {
      out.BeginArray();
      for (const Workload& w : snapshot.workloads) WriteWorkload(out, w);
      out.EndArray();
    } else if (key == "allocations") {
      out.BeginArray();
      for (size_t i = 0; i < snapshot.allocations.size(); ++i) {
        out.Raw(DumpReserved(AllocationJson(snapshot.allocations[i], i < snapshot.allocation_extras.size()
                                                                           ? snapshot.allocation_extras[i]
                                                                           : state::State::AllocationExtras{}),
                             512));
      }
      out.EndArray();
    } else {
      out.Raw(value.dump());
    }
  }
  out.EndObject();
  return text;
}

StatusOr<JournalSnapshot> JournalSnapshotFromText(std::string_view text) {
  if (text.size() > kMaxSnapshotBytes) {
    return InvalidArgument("journal snapshot: longer than " + std::to_string(kMaxSnapshotBytes) + " bytes");
  }
  if (NestingDepth(text) > kMaxDepth) {
    return InvalidArgument("journal snapshot: nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("journal snapshot: not valid JSON (a torn or garbled snapshot?)");
  auto s = JournalSnapshotFromJson(j);
  if (!s.ok()) return s.status().WithContext("journal snapshot: ");
  return s;
}

}  // namespace tidal::protocol
