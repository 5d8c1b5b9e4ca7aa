#include "server/workload_codec.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "config/field_reader.h"
#include "config/input_limits.h"
#include "protocol/json_writer.h"

namespace tidal::server {
namespace {

using config::ObjectReader;
using nlohmann::json;

// The config codec's workload fields (config::WorkloadFromJson), which a
// record's JSON hands to it; every other key is the server's.
constexpr std::array<std::string_view, 29> kWorkloadKeys = {
    "kind", "name", "tenant", "project", "queue", "gpus_per_replica", "replicas", "min_replicas",
    "max_replicas", "duration_s", "preemptible", "submit_at_s", "gpu_models", "node_selector",
    "tolerations", "topology", "checkpoint_interval_s", "checkpoint_on_request_s", "deadline_s",
    "target_p99_ms", "cold_start_s", "replica_capacity_rps", "model_size_gib", "model_source", "max_runtime_s",
    "id", "state", "submit_time_ms", "priority"};

// What a submit adds to the workload fields: the run spec.
constexpr std::array<std::string_view, 8> kRunKeys = {
    "image", "dataset", "model_version", "command", "env", "readiness", "load_endpoint", "labels"};

bool IsWorkloadKey(std::string_view key) {
  return std::find(kWorkloadKeys.begin(), kWorkloadKeys.end(), key) != kWorkloadKeys.end();
}

config::NameScope ScopeOf(const Catalog& catalog) {
  return config::NameScope{&catalog.cluster, &catalog.queues, &catalog.projects, nullptr};
}

// Port 0 is allowed: no fixed port; the agent picks a free one, hands it to
// the pod as $PORT and probes that (docs/api.md).
Status ReadEndpoint(const ObjectReader& parent, std::string_view key, std::optional<Endpoint>* out) {
  if (!parent.Has(key)) return Status::Ok();
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r,
                         ObjectReader::Open(parent.at(key), parent.FieldPath(key), {"port", "path"}));
  Endpoint e;
  TIDAL_RETURN_IF_ERROR(r.Int("port", &e.port, 0, 65535, /*required=*/true));
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

// A pod's rank: the record's for a pod of its allocation (a leaving pod
// too), else its place in `pods`.
int RankIn(const WorkloadRecord& r, const std::vector<PodPlacement>& pods, size_t i) {
  if (r.allocation && &pods != &r.allocation->pods) {
    const auto& all = r.allocation->pods;
    const size_t at = std::find(all.begin(), all.end(), pods[i]) - all.begin();
    if (at < all.size()) return r.RankOf(at);
  }
  return r.RankOf(i);
}

json PodsToJson(const WorkloadRecord& r, const std::vector<PodPlacement>& pods, const Catalog& catalog) {
  json out = json::array();
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodPlacement& p = pods[i];
    out.push_back({{"rank", RankIn(r, pods, i)},
                   {"node", p.node.value() < catalog.cluster.nodes.size()
                                ? catalog.cluster.nodes[p.node.value()].name
                                : ""},
                   {"gpus", MaskToIndices(p.gpus)}});
  }
  return out;
}

// The pods, and their ranks into `ranks` when given (-1 where none is).
StatusOr<std::vector<PodPlacement>> PodsFromJson(const json& j, const Catalog& catalog,
                                                 std::vector<int>* ranks = nullptr) {
  std::vector<PodPlacement> pods;
  for (const json& p : j) {
    auto node = catalog.FindNode(p.at("node").get<std::string>());
    if (!node) return NotFound(fmt::format("allocation node \"{}\" is unknown", p.at("node").dump()));
    GpuMask mask = 0;
    for (int g : p.at("gpus")) mask |= GpuMask{1} << g;
    pods.push_back({*node, mask});
    if (ranks) {
      const json& rank = p.value("rank", json());
      ranks->push_back(rank.is_number_integer() && rank.get<int64_t>() >= 0 && rank.get<int64_t>() < protocol::kMaxPodRank
                           ? rank.get<int>()
                           : -1);
    }
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

json AllocationToJson(const WorkloadRecord& r, const Catalog& catalog) {
  const Allocation& a = *r.allocation;
  json j = {{"pods", PodsToJson(r, a.pods, catalog)},
            {"start_time_ms", ToMillis(a.start_time)},
            {"last_checkpoint_ms", ToMillis(a.last_checkpoint)},
            {"borrowed", a.borrowed},
            {"terminating", a.terminating},
            {"grace_deadline_ms",
             a.grace_deadline == kInfiniteFuture ? json(nullptr) : json(ToMillis(a.grace_deadline))}};
  j["leaving"] = PodsToJson(r, a.leaving, catalog);
  return j;
}

json PreemptionToJson(const PreemptionRecord& p) {
  return {{"time_ms", p.time_ms}, {"audit_seq", p.audit_seq}, {"cause", p.cause},
          {"preemptor", p.preemptor}, {"lost_gpu_seconds", p.lost_gpu_seconds},
          {"recovery_s", p.recovery_s}, {"agent_notice_time_ms", p.agent_notice_ms},
          {"exit_time_ms", p.exit_ms}, {"killed_at_deadline", p.killed_at_deadline},
          {"checkpointed_in_time", p.checkpointed_in_time}, {"exited_pods", p.exited_pods}};
}

// Everything the server keeps besides the workload fields. `compact` drops
// what equals its default (the store's form: smaller rows, faster commits).
void AddServerFields(const WorkloadRecord& r, const Catalog& catalog, const WaitDecision* wait, bool compact,
                     json& j) {
  auto put = [&](const char* key, json value, bool is_default) {
    if (!compact || !is_default) j[key] = std::move(value);
  };
  const Workload& w = r.w;
  put("submitted_by", r.submitted_by, r.submitted_by.empty());
  // Kept for the store only: it checks retries and is nobody's business.
  if (compact && !r.request_digest.empty()) j["request_digest"] = r.request_digest;
  // Absolute: submit_time moves on a requeue, deadline_s is relative to it.
  put("deadline_ms", w.batch.deadline == kInfiniteFuture ? json(nullptr) : json(ToMillis(w.batch.deadline)),
      w.batch.deadline == kInfiniteFuture);
  put("image", r.run.image, r.run.image.empty());
  put("dataset", r.run.dataset, r.run.dataset.empty());
  put("model_version", r.run.model_version, r.run.model_version.empty());
  put("command", r.run.command, r.run.command.empty());
  put("env", r.run.env, r.run.env.empty());
  put("labels", r.run.labels, r.run.labels.empty());
  put("readiness", EndpointToJson(r.run.readiness), !r.run.readiness);
  put("load_endpoint", EndpointToJson(r.run.load_endpoint), !r.run.load_endpoint);
  put("budget_gpu_hours", r.run.budget_gpu_hours, r.run.budget_gpu_hours == 0);
  put("approved", r.w.top_tier_approved, !r.w.top_tier_approved);
  put("requeues", r.w.requeues, r.w.requeues == 0);
  put("spare_pods", r.w.spare_pods, r.w.spare_pods == 0);
  put("allocation", r.allocation ? AllocationToJson(r, catalog) : json(nullptr), !r.allocation);
  put("stop", NoticeToJson(r.stop), !r.stop);
  put("shrink", NoticeToJson(r.shrink_notice), !r.shrink_notice);
  put("exited_ranks", r.exited_ranks, r.exited_ranks.empty());
  put("ready_ranks", r.ready_ranks, r.ready_ranks.empty());
  put("pod_started_ms", r.pod_started_ms, r.pod_started_ms == 0);
  put("attempt", r.attempt, r.attempt == 0);
  put("next_rank", r.next_rank, r.next_rank == 0);
  // The last pass's wait is an explanation, not history: not stored.
  if (!compact) j["wait"] = wait ? WaitToJson(*wait) : json(nullptr);
  put("rejected",
      r.rejected ? json{{"reason", ReasonCodeName(r.rejected->reason)}, {"detail", r.rejected->detail}}
                 : json(nullptr),
      !r.rejected);
  json runs = json::array();
  for (const RunInterval& run : r.runs) {
    runs.push_back({{"start_ms", run.start_ms}, {"end_ms", run.end_ms}, {"gpus", run.gpus},
                    {"borrowed", run.borrowed}, {"end_reason", run.end_reason},
                    {"gpu_model", run.gpu_model}});
  }
  put("runs", std::move(runs), r.runs.empty());
  json preemptions = json::array();
  for (const PreemptionRecord& p : r.preemptions) preemptions.push_back(PreemptionToJson(p));
  put("preemptions", std::move(preemptions), r.preemptions.empty());
  json scale_ups = json::array();
  for (const ScaleUp& s : r.scale_ups) {
    scale_ups.push_back({{"requested_ms", s.requested_ms}, {"from", s.from_pods},
                         {"to", s.to_pods}, {"placed_ms", s.placed_ms},
                         {"ready_ms", s.ready_ms}, {"victims_grace_s", s.victims_grace_s},
                         {"failed", s.failed}});
    if (!s.cause.empty()) {
      scale_ups.back()["cause"] = s.cause;
      scale_ups.back()["detail"] = s.detail;
      scale_ups.back()["slow"] = s.slow;
    }
  }
  put("scale_ups", std::move(scale_ups), r.scale_ups.empty());
  put("finish_time_ms", r.finish_time_ms, r.finish_time_ms == 0);
  put("first_start_ms", r.first_start_ms, r.first_start_ms == 0);
  put("queued_ms", r.queued_ms, r.queued_ms == 0);
  put("utilization", r.utilization, r.utilization < 0);
  const bool no_load = r.load_rps == 0 && r.p95_ms == 0 && r.p99_ms == 0 && r.slo_samples == 0;
  put("load",
      {{"rps", r.load_rps}, {"p95_ms", r.p95_ms}, {"p99_ms", r.p99_ms},
       {"slo_samples", r.slo_samples}, {"slo_met", r.slo_met}},
      no_load);
  json missed = json::object();
  for (diagnosis::MissCause c : diagnosis::AllMissCauses()) {
    const double s = r.slo_miss_s_by_cause[static_cast<int>(c)];
    if (s > 0) missed[std::string(diagnosis::MissCauseName(c))] = s;
  }
  put("slo_miss_s_by_cause", missed, missed.empty());
  put("gang_start_failures", r.gang_start_failures, r.gang_start_failures == 0);
}


// RecordToJson / RecordToStoredJson's text written directly: the same keys,
// in the sorted order dump() prints a tree's keys in (the workload's fields
// and the server's interleaved), so the text is byte for byte the tree's.
// A placement rewrites a record under the state lock, so this is on every
// pass's and every submit's path; the tree costs an allocation per key.
class RecordWriter {
 public:
  RecordWriter(std::string& text, const Catalog& catalog, bool compact)
      : out_(text), catalog_(catalog), compact_(compact) {}

  void Write(const WorkloadRecord& r, const WaitDecision* wait) {
    const Workload& w = r.w;
    const bool training = w.kind == WorkloadKind::kTraining;
    const bool inference = w.kind == WorkloadKind::kInference;
    const bool model = inference || w.kind == WorkloadKind::kBatchInference;
    const PlacementConstraints& c = w.constraints;
    out_.BeginObject();
    if (Put("allocation", !r.allocation)) {
      if (r.allocation) {
        Allocation(r);
      } else {
        out_.Null();
      }
    }
    if (Put("approved", !w.top_tier_approved)) out_.Bool(w.top_tier_approved);
    if (Put("attempt", r.attempt == 0)) out_.Int(r.attempt);
    if (Put("budget_gpu_hours", r.run.budget_gpu_hours == 0)) out_.Double(r.run.budget_gpu_hours);
    if (training) {
      Always("checkpoint_interval_s");
      out_.Double(ToSeconds(w.training.checkpoint_interval));
      if (w.training.checkpoint_on_request.count() > 0) {
        Always("checkpoint_on_request_s");
        out_.Double(ToSeconds(w.training.checkpoint_on_request));
      }
    }
    if (model) {
      Always("cold_start_s");
      out_.Double(ToSeconds(w.inference.cold_start));
    }
    if (Put("command", r.run.command.empty())) out_.StringArray(r.run.command);
    if (Put("dataset", r.run.dataset.empty())) out_.String(r.run.dataset);
    if (Put("deadline_ms", w.batch.deadline == kInfiniteFuture)) TimeOrNull(w.batch.deadline);
    if ((training || w.kind == WorkloadKind::kBatchInference) && w.batch.deadline != kInfiniteFuture) {
      Always("deadline_s");
      out_.Double(ToSeconds(w.batch.deadline - w.submit_time));
    }
    Always("duration_s");
    out_.Double(ToSeconds(w.expected_duration));
    if (Put("env", r.run.env.empty())) out_.StringMap(r.run.env);
    if (Put("exited_ranks", r.exited_ranks.empty())) IntArray(r.exited_ranks);
    if (Put("finish_time_ms", r.finish_time_ms == 0)) out_.Int(r.finish_time_ms);
    if (Put("first_start_ms", r.first_start_ms == 0)) out_.Int(r.first_start_ms);
    if (Put("gang_start_failures", r.gang_start_failures == 0)) out_.Int(r.gang_start_failures);
    if (!c.required_gpu_models.empty() || !c.preferred_gpu_models.empty()) {
      Always("gpu_models");
      out_.BeginObject();
      out_.Key("preferred");
      out_.StringArray(c.preferred_gpu_models);
      out_.Key("required");
      out_.StringArray(c.required_gpu_models);
      out_.EndObject();
    }
    Always("gpus_per_replica");
    out_.Int(w.gpus_per_pod);
    Always("id");
    out_.Uint(w.id.value());
    if (Put("image", r.run.image.empty())) out_.String(r.run.image);
    Always("kind");
    out_.String(WorkloadKindName(w.kind));
    if (Put("labels", r.run.labels.empty())) out_.StringMap(r.run.labels);
    const bool no_load = r.load_rps == 0 && r.p95_ms == 0 && r.p99_ms == 0 && r.slo_samples == 0;
    if (Put("load", no_load)) {
      out_.BeginObject();
      out_.Key("p95_ms");
      out_.Double(r.p95_ms);
      out_.Key("p99_ms");
      out_.Double(r.p99_ms);
      out_.Key("rps");
      out_.Double(r.load_rps);
      out_.Key("slo_met");
      out_.Int(r.slo_met);
      out_.Key("slo_samples");
      out_.Int(r.slo_samples);
      out_.EndObject();
    }
    if (Put("load_endpoint", !r.run.load_endpoint)) EndpointOrNull(r.run.load_endpoint);
    Always("max_replicas");
    out_.Int(w.max_pods);
    if (w.kind == WorkloadKind::kDebug) {
      Always("max_runtime_s");
      out_.Double(ToSeconds(w.debug.max_runtime));
    }
    Always("min_replicas");
    out_.Int(w.min_pods);
    if (model) {
      Always("model_size_gib");
      out_.Double(w.inference.model_size_gib);
      Always("model_source");
      out_.String(config::ModelSourceName(w.inference.model_source));
    }
    if (Put("model_version", r.run.model_version.empty())) out_.String(r.run.model_version);
    Always("name");
    out_.String(w.name);
    if (Put("next_rank", r.next_rank == 0)) out_.Int(r.next_rank);
    if (!c.node_selector.empty()) {
      Always("node_selector");
      out_.StringMap(c.node_selector);
    }
    if (Put("pod_started_ms", r.pod_started_ms == 0)) out_.Int(r.pod_started_ms);
    Always("preemptible");
    out_.Bool(w.preemptible);
    if (Put("preemptions", r.preemptions.empty())) {
      out_.BeginArray();
      for (const PreemptionRecord& p : r.preemptions) Preemption(p);
      out_.EndArray();
    }
    Always("priority");
    protocol::WritePriority(out_, w.priority);
    Always("project");
    out_.String(ScopeOf(catalog_).ProjectName(w.project));
    Always("queue");
    out_.String(ScopeOf(catalog_).QueueName(w.queue));
    if (Put("queued_ms", r.queued_ms == 0)) out_.Int(r.queued_ms);
    if (Put("readiness", !r.run.readiness)) EndpointOrNull(r.run.readiness);
    if (Put("ready_ranks", r.ready_ranks.empty())) IntArray(r.ready_ranks);
    if (Put("rejected", !r.rejected)) {
      if (r.rejected) {
        out_.BeginObject();
        out_.Key("detail");
        out_.String(r.rejected->detail);
        out_.Key("reason");
        out_.String(ReasonCodeName(r.rejected->reason));
        out_.EndObject();
      } else {
        out_.Null();
      }
    }
    if (inference) {
      Always("replica_capacity_rps");
      out_.Double(w.inference.replica_capacity_rps);
    }
    Always("replicas");
    out_.Int(w.pods);
    // Kept for the store only: it checks retries and is nobody's business.
    if (compact_ && !r.request_digest.empty()) {
      Always("request_digest");
      out_.String(r.request_digest);
    }
    if (Put("requeues", w.requeues == 0)) out_.Int(w.requeues);
    if (Put("runs", r.runs.empty())) {
      out_.BeginArray();
      for (const RunInterval& run : r.runs) Run(run);
      out_.EndArray();
    }
    if (Put("scale_ups", r.scale_ups.empty())) {
      out_.BeginArray();
      for (const ScaleUp& up : r.scale_ups) ScaleUpEntry(up);
      out_.EndArray();
    }
    if (Put("shrink", !r.shrink_notice)) NoticeOrNull(r.shrink_notice);
    SloMisses(r);
    if (Put("spare_pods", w.spare_pods == 0)) out_.Int(w.spare_pods);
    Always("state");
    out_.String(WorkloadStateName(w.state));
    if (Put("stop", !r.stop)) NoticeOrNull(r.stop);
    Always("submit_time_ms");
    out_.Int(ToMillis(w.submit_time));
    if (Put("submitted_by", r.submitted_by.empty())) out_.String(r.submitted_by);
    if (inference) {
      Always("target_p99_ms");
      out_.Int(w.inference.target_p99.count());
    }
    Always("tenant");
    out_.String(w.tenant);
    if (!c.tolerations.empty()) {
      Always("tolerations");
      protocol::WriteTaints(out_, c.tolerations);
    }
    if (c.topology.level != TopologyLevel::kNone) {
      Always("topology");
      out_.BeginObject();
      out_.Key("level");
      out_.String(TopologyLevelName(c.topology.level));
      out_.Key("required");
      out_.Bool(c.topology.required);
      out_.EndObject();
    }
    if (Put("utilization", r.utilization < 0)) out_.Double(r.utilization);
    // The last pass's wait is an explanation, not history: not stored.
    if (!compact_) {
      Always("wait");
      if (wait) {
        out_.BeginObject();
        out_.Key("detail");
        out_.String(wait->detail);
        out_.Key("estimated_start_ms");
        if (wait->estimated_start) {
          out_.Int(ToMillis(*wait->estimated_start));
        } else {
          out_.Null();
        }
        out_.Key("reason");
        out_.String(ReasonCodeName(wait->reason));
        out_.EndObject();
      } else {
        out_.Null();
      }
    }
    out_.EndObject();
  }

 private:
  // A server field: written unless the compact form drops it as a default.
  bool Put(std::string_view key, bool is_default) {
    if (compact_ && is_default) return false;
    out_.Key(key);
    return true;
  }
  void Always(std::string_view key) { out_.Key(key); }

  void TimeOrNull(Time t) {
    if (t == kInfiniteFuture) {
      out_.Null();
    } else {
      out_.Int(ToMillis(t));
    }
  }
  void IntArray(const std::set<int>& values) {
    out_.BeginArray();
    for (int v : values) out_.Int(v);
    out_.EndArray();
  }
  void EndpointOrNull(const std::optional<Endpoint>& e) {
    if (!e) return out_.Null();
    out_.BeginObject();
    out_.Key("path");
    out_.String(e->path);
    out_.Key("port");
    out_.Int(e->port);
    out_.EndObject();
  }
  void NoticeOrNull(const std::optional<StopNotice>& n) {
    if (!n) return out_.Null();
    out_.BeginObject();
    out_.Key("cause");
    out_.String(n->cause);
    out_.Key("grace_deadline_ms");
    out_.Int(n->grace_deadline_ms);
    out_.Key("notice_time_ms");
    out_.Int(n->notice_ms);
    out_.Key("requeue");
    out_.Bool(n->requeue);
    out_.EndObject();
  }
  void Pods(const WorkloadRecord& r, const std::vector<PodPlacement>& pods) {
    out_.BeginArray();
    for (size_t i = 0; i < pods.size(); ++i) {
      const PodPlacement& p = pods[i];
      out_.BeginObject();
      out_.Key("gpus");
      out_.BeginArray();
      for (int g : MaskToIndices(p.gpus)) out_.Int(g);
      out_.EndArray();
      out_.Key("node");
      out_.String(p.node.value() < catalog_.cluster.nodes.size() ? catalog_.cluster.nodes[p.node.value()].name
                                                                 : std::string_view());
      out_.Key("rank");
      out_.Int(RankIn(r, pods, i));
      out_.EndObject();
    }
    out_.EndArray();
  }
  void Allocation(const WorkloadRecord& r) {
    const tidal::Allocation& a = *r.allocation;
    out_.BeginObject();
    out_.Key("borrowed");
    out_.Bool(a.borrowed);
    out_.Key("grace_deadline_ms");
    TimeOrNull(a.grace_deadline);
    out_.Key("last_checkpoint_ms");
    out_.Int(ToMillis(a.last_checkpoint));
    out_.Key("leaving");
    Pods(r, a.leaving);
    out_.Key("pods");
    Pods(r, a.pods);
    out_.Key("start_time_ms");
    out_.Int(ToMillis(a.start_time));
    out_.Key("terminating");
    out_.Bool(a.terminating);
    out_.EndObject();
  }
  void Preemption(const PreemptionRecord& p) {
    out_.BeginObject();
    out_.Key("agent_notice_time_ms");
    out_.Int(p.agent_notice_ms);
    out_.Key("audit_seq");
    out_.Int(p.audit_seq);
    out_.Key("cause");
    out_.String(p.cause);
    out_.Key("checkpointed_in_time");
    out_.Bool(p.checkpointed_in_time);
    out_.Key("exit_time_ms");
    out_.Int(p.exit_ms);
    out_.Key("exited_pods");
    out_.Int(p.exited_pods);
    out_.Key("killed_at_deadline");
    out_.Bool(p.killed_at_deadline);
    out_.Key("lost_gpu_seconds");
    out_.Double(p.lost_gpu_seconds);
    out_.Key("preemptor");
    out_.Uint(p.preemptor);
    out_.Key("recovery_s");
    out_.Double(p.recovery_s);
    out_.Key("time_ms");
    out_.Int(p.time_ms);
    out_.EndObject();
  }
  void Run(const RunInterval& run) {
    out_.BeginObject();
    out_.Key("borrowed");
    out_.Bool(run.borrowed);
    out_.Key("end_ms");
    out_.Int(run.end_ms);
    out_.Key("end_reason");
    out_.String(run.end_reason);
    out_.Key("gpu_model");
    out_.String(run.gpu_model);
    out_.Key("gpus");
    out_.Int(run.gpus);
    out_.Key("start_ms");
    out_.Int(run.start_ms);
    out_.EndObject();
  }
  void ScaleUpEntry(const ScaleUp& s) {
    const bool judged = !s.cause.empty();
    out_.BeginObject();
    if (judged) {
      out_.Key("cause");
      out_.String(s.cause);
      out_.Key("detail");
      out_.String(s.detail);
    }
    out_.Key("failed");
    out_.Bool(s.failed);
    out_.Key("from");
    out_.Int(s.from_pods);
    out_.Key("placed_ms");
    out_.Int(s.placed_ms);
    out_.Key("ready_ms");
    out_.Int(s.ready_ms);
    out_.Key("requested_ms");
    out_.Int(s.requested_ms);
    if (judged) {
      out_.Key("slow");
      out_.Bool(s.slow);
    }
    out_.Key("to");
    out_.Int(s.to_pods);
    out_.Key("victims_grace_s");
    out_.Double(s.victims_grace_s);
    out_.EndObject();
  }
  // By cause name, as a tree's keys print.
  void SloMisses(const WorkloadRecord& r) {
    std::vector<std::pair<std::string_view, double>> missed;
    for (diagnosis::MissCause c : diagnosis::AllMissCauses()) {
      const double s = r.slo_miss_s_by_cause[static_cast<int>(c)];
      if (s > 0) missed.emplace_back(diagnosis::MissCauseName(c), s);
    }
    if (!Put("slo_miss_s_by_cause", missed.empty())) return;
    std::sort(missed.begin(), missed.end());
    out_.BeginObject();
    for (const auto& [cause, seconds] : missed) {
      out_.Key(cause);
      out_.Double(seconds);
    }
    out_.EndObject();
  }

  protocol::JsonWriter out_;
  const Catalog& catalog_;
  const bool compact_;
};

}  // namespace

std::optional<WorkloadKind> ParseKind(std::string_view name) {
  for (WorkloadKind k : {WorkloadKind::kTraining, WorkloadKind::kInference,
                         WorkloadKind::kBatchInference, WorkloadKind::kDebug}) {
    if (WorkloadKindName(k) == name) return k;
  }
  return std::nullopt;
}

std::optional<WorkloadState> ParseState(std::string_view name) {
  for (WorkloadState s : {WorkloadState::kAwaitingApproval, WorkloadState::kPending,
                          WorkloadState::kRunning, WorkloadState::kTerminating,
                          WorkloadState::kSucceeded, WorkloadState::kFailed,
                          WorkloadState::kCancelled}) {
    if (WorkloadStateName(s) == name) return s;
  }
  return std::nullopt;
}

StatusOr<SubmitNames> ReadSubmitNames(const json& body) {
  std::vector<std::string_view> allowed;
  for (std::string_view k : kWorkloadKeys) {
    // The server assigns these; a simulation offset means nothing here.
    if (k != "id" && k != "state" && k != "submit_time_ms" && k != "priority" && k != "submit_at_s") {
      allowed.push_back(k);
    }
  }
  allowed.insert(allowed.end(), kRunKeys.begin(), kRunKeys.end());
  if (body.is_object()) {
    for (std::string_view key : {"id", "state", "submit_time_ms"}) {
      if (body.contains(key)) {
        return config::FieldError(key, "is set by the server; remove field '" + std::string(key) + "'");
      }
    }
  }
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(body, "", allowed));
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
  SubmitNames names;
  TIDAL_RETURN_IF_ERROR(r.String("kind", &names.kind));
  TIDAL_RETURN_IF_ERROR(r.String("tenant", &names.tenant));
  TIDAL_RETURN_IF_ERROR(r.String("project", &names.project));
  TIDAL_RETURN_IF_ERROR(r.String("queue", &names.queue));
  return names;
}

StatusOr<ResizeRequest> ParseResize(const json& body) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader rd, ObjectReader::Open(body, "", {"replicas", "min_replicas", "max_replicas"}));
  auto count = [&rd](const char* key, std::optional<int>* out) -> Status {
    if (!rd.Has(key)) return Status::Ok();
    int n = 0;
    TIDAL_RETURN_IF_ERROR(rd.Int(key, &n, 1, kMaxTotalGpus));
    *out = n;
    return Status::Ok();
  };
  ResizeRequest req;
  TIDAL_RETURN_IF_ERROR(count("min_replicas", &req.min_replicas));
  TIDAL_RETURN_IF_ERROR(count("max_replicas", &req.max_replicas));
  TIDAL_RETURN_IF_ERROR(count("replicas", &req.replicas));
  return req;
}

StatusOr<SubmitSpec> ParseSubmit(const json& body, const Catalog& catalog, const std::string& project,
                                 Time now) {
  TIDAL_RETURN_IF_ERROR(ReadSubmitNames(body).status());
  SubmitSpec spec;
  WorkloadRecord& rec = spec.record;
  // The workload fields go to the config codec, with what admission
  // resolved (the project; the tenant was checked against it) and the
  // server's defaults: kind training, and min_replicas alone sets replicas.
  json fields = json::object();
  json run = json::object();
  for (const auto& [key, value] : body.items()) {
    if (IsWorkloadKey(key)) {
      if (key != "tenant") fields[key] = value;
    } else {
      run[key] = value;
    }
  }
  fields["project"] = project;
  if (!fields.contains("kind")) fields["kind"] = "training";
  if (fields.contains("min_replicas") && !fields.contains("replicas")) {
    fields["replicas"] = fields["min_replicas"];
  }
  config::WorkloadJsonOptions options;
  options.mode = config::WorkloadJsonMode::kSubmit;
  options.submit_base = now;
  // Admission applies the project's default, then requires one.
  options.caller_defaults_gpus_per_replica = true;
  TIDAL_ASSIGN_OR_RETURN(config::WorkloadSpec parsed, config::WorkloadFromJson(fields, ScopeOf(catalog), options));
  Workload& w = rec.w;
  w = std::move(parsed.workload);
  if (w.kind == WorkloadKind::kInference && body.contains("replica_capacity_rps") &&
      w.inference.replica_capacity_rps <= 0) {
    return config::FieldError("replica_capacity_rps", "expected a positive number for inference");
  }
  spec.has_checkpoint = body.contains("checkpoint_interval_s");
  spec.has_max_runtime = body.contains("max_runtime_s");
  spec.has_gpus_per_replica = body.contains("gpus_per_replica");
  spec.has_image = body.contains("image");
  spec.has_dataset = body.contains("dataset");
  spec.has_model_version = body.contains("model_version");
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(run, "", {kRunKeys.begin(), kRunKeys.end()}));
  TIDAL_RETURN_IF_ERROR(r.String("image", &rec.run.image));
  TIDAL_RETURN_IF_ERROR(r.String("dataset", &rec.run.dataset));
  TIDAL_RETURN_IF_ERROR(r.String("model_version", &rec.run.model_version));
  TIDAL_RETURN_IF_ERROR(r.StringList("command", &rec.run.command));
  TIDAL_RETURN_IF_ERROR(r.StringMap("env", &rec.run.env));
  TIDAL_RETURN_IF_ERROR(r.StringMap("labels", &rec.run.labels));
  // What reaches the agent's execve and the pod's environment is bounded and
  // NUL-free; labels are shown and matched, so they are printable.
  TIDAL_RETURN_IF_ERROR(config::CheckCount("command", rec.run.command.size(), config::kMaxCommandArgs));
  for (size_t i = 0; i < rec.run.command.size(); ++i) {
    TIDAL_RETURN_IF_ERROR(config::CheckProcessText(config::IndexPath("command", i), rec.run.command[i],
                                                   config::kMaxArgLength));
  }
  TIDAL_RETURN_IF_ERROR(config::CheckCount("env", rec.run.env.size(), config::kMaxEnvEntries));
  for (const auto& [k, v] : rec.run.env) {
    const std::string path = config::JoinPath("env", k.size() <= config::kMaxEnvNameLength ? k : "<name>");
    TIDAL_RETURN_IF_ERROR(config::CheckEnvName(path, k));
    TIDAL_RETURN_IF_ERROR(config::CheckProcessText(path, v, config::kMaxEnvValueLength));
  }
  TIDAL_RETURN_IF_ERROR(config::CheckLabelMap("labels", rec.run.labels));
  for (const char* key : {"image", "dataset", "model_version"}) {
    const std::string& v = key == std::string_view("image")     ? rec.run.image
                           : key == std::string_view("dataset") ? rec.run.dataset
                                                                : rec.run.model_version;
    TIDAL_RETURN_IF_ERROR(config::CheckProcessText(key, v, config::kMaxArgLength));
  }
  TIDAL_RETURN_IF_ERROR(ReadEndpoint(r, "readiness", &rec.run.readiness));
  TIDAL_RETURN_IF_ERROR(ReadEndpoint(r, "load_endpoint", &rec.run.load_endpoint));
  return spec;
}

std::string RequestDigest(const json& body) {
  // dump() of a parsed body is canonical (object keys sorted, one spelling
  // per number), so whitespace and key order do not make a body different.
  // FNV-1a, 64 bits: keys are per principal, so a collision only ever
  // confuses the client that made it.
  const std::string text = body.dump();
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

json WaitToJson(const WaitDecision& w) {
  json j = {{"reason", ReasonCodeName(w.reason)}, {"detail", w.detail}};
  j["estimated_start_ms"] = w.estimated_start ? json(ToMillis(*w.estimated_start)) : json(nullptr);
  return j;
}

json RecordToJson(const WorkloadRecord& r, const Catalog& catalog, const WaitDecision* wait) {
  json j = config::WorkloadToJson(r.w, ScopeOf(catalog));
  AddServerFields(r, catalog, wait, /*compact=*/false, j);
  return j;
}

std::string RecordToText(const WorkloadRecord& r, const Catalog& catalog, const WaitDecision* wait) {
  std::string text;
  text.reserve(2048);
  RecordWriter(text, catalog, /*compact=*/false).Write(r, wait);
  return text;
}

std::string RecordToStoredText(const WorkloadRecord& r, const Catalog& catalog) {
  std::string text;
  text.reserve(1024);
  RecordWriter(text, catalog, /*compact=*/true).Write(r, /*wait=*/nullptr);
  return text;
}

json RecordToStoredJson(const WorkloadRecord& r, const Catalog& catalog) {
  json j = config::WorkloadToJson(r.w, ScopeOf(catalog));
  AddServerFields(r, catalog, /*wait=*/nullptr, /*compact=*/true, j);
  return j;
}

StatusOr<WorkloadRecord> RecordFromJson(const json& j, const Catalog& catalog) {
  if (!j.is_object()) return Internal("stored workload record is not an object");
  try {
    WorkloadRecord r;
    json fields = json::object();
    for (const auto& [key, value] : j.items()) {
      if (IsWorkloadKey(key)) fields[key] = value;
    }
    config::WorkloadJsonOptions options;
    options.mode = config::WorkloadJsonMode::kStored;
    auto parsed = config::WorkloadFromJson(fields, ScopeOf(catalog), options);
    if (!parsed.ok()) {
      return NotFound(fmt::format("workload {}: {}", j.value("id", uint64_t{0}), parsed.status().message()));
    }
    r.w = std::move(parsed->workload);
    Workload& w = r.w;
    r.submitted_by = j.value("submitted_by", "");
    r.request_digest = j.value("request_digest", "");
    const json deadline = j.value("deadline_ms", json());
    if (deadline.is_number()) w.batch.deadline = TimeFromMillis(deadline.get<int64_t>());
    r.run.image = j.value("image", "");
    r.run.dataset = j.value("dataset", "");
    r.run.model_version = j.value("model_version", "");
    r.run.command = j.value("command", std::vector<std::string>{});
    r.run.env = j.value("env", std::map<std::string, std::string>{});
    r.run.labels = j.value("labels", std::map<std::string, std::string>{});
    r.run.readiness = EndpointFromJson(j.value("readiness", json()));
    r.run.load_endpoint = EndpointFromJson(j.value("load_endpoint", json()));
    r.run.budget_gpu_hours = j.value("budget_gpu_hours", 0.0);
    r.w.top_tier_approved = j.value("approved", false);
    r.w.requeues = j.value("requeues", 0);
    r.w.spare_pods = std::clamp(j.value("spare_pods", 0), 0, r.w.pods);
    const json alloc_json = j.value("allocation", json());
    if (alloc_json.is_object()) {
      const json& a = alloc_json;
      Allocation alloc;
      alloc.workload = w.id;
      std::vector<int> ranks;
      TIDAL_ASSIGN_OR_RETURN(alloc.pods, PodsFromJson(a.at("pods"), catalog, &ranks));
      TIDAL_ASSIGN_OR_RETURN(alloc.leaving, PodsFromJson(a.value("leaving", json::array()), catalog));
      alloc.start_time = TimeFromMillis(a.at("start_time_ms"));
      alloc.last_checkpoint = TimeFromMillis(a.at("last_checkpoint_ms"));
      alloc.borrowed = a.at("borrowed");
      alloc.terminating = a.at("terminating");
      alloc.grace_deadline = a.at("grace_deadline_ms").is_null()
                                 ? kInfiniteFuture
                                 : TimeFromMillis(a.at("grace_deadline_ms"));
      // Records from before `leaving`: shrunk pods were kept apart.
      TIDAL_ASSIGN_OR_RETURN(std::vector<PodPlacement> stopping,
                             PodsFromJson(j.value("stopping_pods", json::array()), catalog));
      for (const PodPlacement& p : stopping) {
        alloc.pods.push_back(p);
        alloc.leaving.push_back(p);
      }
      r.allocation = alloc;
      // A service's replicas keep the ranks the record gives them; ranks
      // that do not hold together (twice the same, one missing) are not
      // used, and the pods are numbered by place.
      if (KeepsRanks(r.w.kind) && !ranks.empty() && RanksHoldTogether(r.w.kind, ranks, alloc.pods.size())) {
        r.pod_ranks = std::move(ranks);
        const int above = *std::max_element(r.pod_ranks.begin(), r.pod_ranks.end()) + 1;
        r.next_rank = std::clamp(j.value("next_rank", above), above, protocol::kMaxPodRank);
      }
    }
    r.stop = NoticeFromJson(j.value("stop", json()));
    r.shrink_notice = NoticeFromJson(j.value("shrink", json()));
    r.exited_ranks = j.value("exited_ranks", std::set<int>{});
    r.ready_ranks = j.value("ready_ranks", std::set<int>{});
    r.pod_started_ms = j.value("pod_started_ms", int64_t{0});
    r.attempt = j.value("attempt", int64_t{0});
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
      PreemptionRecord p;
      p.time_ms = pr.at("time_ms");
      p.audit_seq = pr.at("audit_seq");
      p.cause = pr.at("cause");
      p.preemptor = pr.at("preemptor");
      p.lost_gpu_seconds = pr.at("lost_gpu_seconds");
      p.recovery_s = pr.at("recovery_s");
      p.agent_notice_ms = pr.value("agent_notice_time_ms", int64_t{0});
      p.exit_ms = pr.value("exit_time_ms", int64_t{0});
      p.killed_at_deadline = pr.value("killed_at_deadline", false);
      p.checkpointed_in_time = pr.value("checkpointed_in_time", false);
      p.exited_pods = pr.value("exited_pods", 0);
      r.preemptions.push_back(p);
    }
    for (const json& s : j.value("scale_ups", json::array())) {
      r.scale_ups.push_back({s.at("requested_ms"), s.at("from"), s.at("to"), s.at("placed_ms"),
                             s.at("ready_ms"), s.at("victims_grace_s"), s.at("failed"),
                             s.value("cause", std::string()), s.value("detail", std::string()),
                             s.value("slow", false)});
    }
    r.finish_time_ms = j.value("finish_time_ms", int64_t{0});
    r.first_start_ms = j.value("first_start_ms", int64_t{0});
    r.queued_ms = j.value("queued_ms", ToMillis(r.w.submit_time));
    r.utilization = j.value("utilization", -1.0);
    const json load = j.value("load", json::object());
    r.load_rps = load.value("rps", 0.0);
    r.p95_ms = load.value("p95_ms", 0.0);
    r.p99_ms = load.value("p99_ms", 0.0);
    r.slo_samples = load.value("slo_samples", int64_t{0});
    r.slo_met = load.value("slo_met", int64_t{0});
    const json missed = j.value("slo_miss_s_by_cause", json::object());
    for (diagnosis::MissCause c : diagnosis::AllMissCauses()) {
      r.slo_miss_s_by_cause[static_cast<int>(c)] = missed.value(std::string(diagnosis::MissCauseName(c)), 0.0);
    }
    r.gang_start_failures = j.value("gang_start_failures", 0);
    return r;
  } catch (const json::exception& e) {
    return Internal(fmt::format("stored workload record is malformed: {}", e.what()));
  }
}

}  // namespace tidal::server
