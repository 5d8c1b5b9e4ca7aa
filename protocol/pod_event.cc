#include "protocol/pod_event.h"

#include "protocol/object_reader.h"

namespace tidal::protocol {

using nlohmann::json;

json PodEventToJson(const PodEvent& e) {
  json j = {{"workload", e.key.workload}, {"rank", e.key.rank}};
  if (e.key.attempt > 0) j["attempt"] = e.key.attempt;
  if (!e.phase.empty()) j["phase"] = e.phase;
  if (e.time_ms > 0) j["time_ms"] = e.time_ms;
  if (e.phase == "exited" || e.exit_code != 0) j["exit_code"] = e.exit_code;
  if (e.phase == "exited" || e.signal != 0) j["signal"] = e.signal;
  if (e.phase == "exited" || !e.reason.empty()) j["reason"] = e.reason;
  if (e.checkpoint_time_ms > 0) j["checkpoint_time_ms"] = e.checkpoint_time_ms;
  if (e.cold_start_ms >= 0) j["cold_start_ms"] = e.cold_start_ms;
  if (e.stop) {
    j["notice_time_ms"] = e.stop->notice_time_ms;
    j["killed_at_deadline"] = e.stop->killed_at_deadline;
    j["checkpointed_in_time"] = e.stop->checkpointed_in_time;
  }
  if (e.load) {
    json load = json::object();
    if (e.load->rps >= 0) load["rps"] = e.load->rps;
    if (e.load->p95_ms >= 0) load["p95_ms"] = e.load->p95_ms;
    if (e.load->p99_ms >= 0) load["p99_ms"] = e.load->p99_ms;
    j["load"] = std::move(load);
  }
  if (e.utilization) j["utilization"] = *e.utilization;
  return j;
}

namespace {

// The bounds of a load figure, wherever it is read: a replica's reply and
// the agent's pod event must agree, or one pod's report fails the batch.
Status ReadLoadFigures(const ObjectReader& r, LoadReport* load) {
  TIDAL_RETURN_IF_ERROR(r.Double("rps", &load->rps, 0, 1e9));
  TIDAL_RETURN_IF_ERROR(r.Double("p95_ms", &load->p95_ms, 0, 1e9));
  return r.Double("p99_ms", &load->p99_ms, 0, 1e9);
}

// A reason is text for people (the audit, `tidal events`). It may come from
// a hostile node, or quote a tenant's command line (a failed start names
// the command), so it could carry terminal escapes or be huge: control
// characters become '?' and it is cut at kMaxPodReasonBytes, on a UTF-8
// character boundary. Nothing is refused: the exit it reports must not be
// lost.
std::string ShownReason(std::string reason) {
  if (reason.size() > kMaxPodReasonBytes) {
    size_t cut = kMaxPodReasonBytes;
    while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) --cut;
    reason.resize(cut);
  }
  for (char& c : reason) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return reason;
}

}  // namespace

StatusOr<PodEvent> PodEventFromJson(const json& j, std::string_view path) {
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(j, std::string(path),
                         std::vector<std::string_view>{
                             "workload", "rank", "attempt", "phase", "time_ms", "exit_code", "signal",
                             "reason", "checkpoint_time_ms", "cold_start_ms", "load", "utilization",
                             "notice_time_ms", "killed_at_deadline", "checkpointed_in_time"}));
  PodEvent e;
  if (!r.Has("workload")) return r.Missing("workload");
  int64_t workload = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64("workload", &workload, 1));
  e.key.workload = static_cast<uint64_t>(workload);
  if (!r.Has("rank")) return r.Missing("rank");
  TIDAL_RETURN_IF_ERROR(r.Int("rank", &e.key.rank, 0));
  TIDAL_RETURN_IF_ERROR(r.Int64("attempt", &e.key.attempt, 0));
  TIDAL_RETURN_IF_ERROR(r.String("phase", &e.phase));
  if (!e.phase.empty() && e.phase != "running" && e.phase != "ready" && e.phase != "exited") {
    return FieldError(r.FieldPath("phase"), "expected one of running|ready|exited, got \"" + e.phase + "\"");
  }
  TIDAL_RETURN_IF_ERROR(r.Int64("time_ms", &e.time_ms, 0));
  TIDAL_RETURN_IF_ERROR(r.Int("exit_code", &e.exit_code, -255, 255));
  TIDAL_RETURN_IF_ERROR(r.Int("signal", &e.signal, 0, 128));
  TIDAL_RETURN_IF_ERROR(r.String("reason", &e.reason));
  e.reason = ShownReason(std::move(e.reason));
  TIDAL_RETURN_IF_ERROR(r.Int64("checkpoint_time_ms", &e.checkpoint_time_ms, 0));
  TIDAL_RETURN_IF_ERROR(r.Int64("cold_start_ms", &e.cold_start_ms, 0));
  if (r.Has("notice_time_ms") || r.Has("killed_at_deadline") || r.Has("checkpointed_in_time")) {
    StopOutcome stop;
    TIDAL_RETURN_IF_ERROR(r.Int64("notice_time_ms", &stop.notice_time_ms, 0));
    TIDAL_RETURN_IF_ERROR(r.Bool("killed_at_deadline", &stop.killed_at_deadline));
    TIDAL_RETURN_IF_ERROR(r.Bool("checkpointed_in_time", &stop.checkpointed_in_time));
    e.stop = stop;
  }
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::Double, "utilization", &e.utilization, 0.0, 1.0));
  if (r.Has("load")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader lr, ObjectReader::Open(r.at("load"), r.FieldPath("load"),
                                                               std::vector<std::string_view>{"rps", "p95_ms", "p99_ms"}));
    LoadReport load;
    TIDAL_RETURN_IF_ERROR(ReadLoadFigures(lr, &load));
    e.load = load;
  }
  return e;
}

json PodEventBatchToJson(const PodEventBatch& batch) {
  json events = json::array();
  for (const PodEvent& e : batch.events) events.push_back(PodEventToJson(e));
  return {{"events", std::move(events)}};
}

StatusOr<PodEventBatch> PodEventBatchFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::vector<std::string_view>{"events"}));
  if (!r.Has("events")) return r.Missing("events");
  TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("events"), "events"));
  PodEventBatch batch;
  size_t i = 0;
  for (const json& e : r.at("events")) {
    TIDAL_ASSIGN_OR_RETURN(PodEvent event, PodEventFromJson(e, IndexPath("events", i++)));
    batch.events.push_back(std::move(event));
  }
  return batch;
}

StatusOr<LoadReport> LoadReplyFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "load", std::nullopt));
  LoadReport load{0, 0, 0};
  TIDAL_RETURN_IF_ERROR(ReadLoadFigures(r, &load));
  return load;
}

}  // namespace tidal::protocol
