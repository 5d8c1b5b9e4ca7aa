#include "protocol/pod_assignment.h"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>

#include "core/model/cluster.h"
#include "protocol/object_reader.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;

json EndpointToJson(const std::optional<HttpEndpoint>& e) {
  if (!e) return nullptr;
  return {{"port", e->port}, {"path", e->path}};
}

StatusOr<std::optional<HttpEndpoint>> EndpointFromJson(const ObjectReader& pod, std::string_view field) {
  if (!pod.Has(field)) return std::optional<HttpEndpoint>();
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(pod.at(field), pod.FieldPath(field), std::nullopt));
  HttpEndpoint endpoint;
  TIDAL_RETURN_IF_ERROR(r.Int("port", &endpoint.port, 0, 65535));
  TIDAL_RETURN_IF_ERROR(r.String("path", &endpoint.path));
  if (endpoint.path.empty() || endpoint.path[0] != '/') {
    return FieldError(r.FieldPath("path"), "must start with '/'");
  }
  return std::optional<HttpEndpoint>(endpoint);
}

}  // namespace

StatusOr<int> ParseSignal(const std::string& name) {
  if (!name.empty() && name.size() < 4 && std::all_of(name.begin(), name.end(), ::isdigit)) {
    const int sig = std::stoi(name);
    if (sig > 0 && sig < NSIG) return sig;
  }
  const std::string bare = name.starts_with("SIG") ? name.substr(3) : name;
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && bare == abbrev) return sig;
  }
  return InvalidArgument("unknown signal '" + name + "'");
}

std::string SignalName(int signal) {
  const char* abbrev = signal > 0 && signal < NSIG ? sigabbrev_np(signal) : nullptr;
  return abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(signal);
}

json PodAssignmentToJson(const PodAssignment& p) {
  json pod = {{"workload", p.key.workload},
              {"rank", p.key.rank},
              {"attempt", p.key.attempt},
              {"name", p.name},
              {"kind", p.kind},
              {"world_size", p.world_size},
              {"gpus", p.gpus},
              {"master_addr", p.master_addr},
              {"master_port", p.master_port},
              {"command", p.command},
              {"env", p.env},
              {"image", p.image},
              {"checkpoint_dir_key", p.checkpoint_dir_key},
              {"readiness", EndpointToJson(p.readiness)},
              {"load_endpoint", EndpointToJson(p.load_endpoint)},
              {"desired", p.desired_run ? "run" : "stop"}};
  if (p.notice) {
    json& n = pod["notice"] = json{{"cause", p.notice->cause},
                                   {"notice_time_ms", p.notice->notice_time_ms},
                                   {"grace_deadline_ms", p.notice->grace_deadline_ms},
                                   {"signal", SignalName(p.notice->signal)}};
    if (p.notice->checkpoint) n["checkpoint"] = true;
  } else {
    pod["notice"] = nullptr;
  }
  return pod;
}

StatusOr<PodAssignment> PodAssignmentFromJson(const json& j, std::string_view path) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, std::string(path), std::nullopt));
  PodAssignment p;
  if (!r.Has("workload")) return r.Missing("workload");
  int64_t workload = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64("workload", &workload, 1));
  p.key.workload = static_cast<uint64_t>(workload);
  const std::string default_key = "w" + std::to_string(p.key.workload);
  p.name = default_key;
  p.checkpoint_dir_key = default_key;
  TIDAL_RETURN_IF_ERROR(r.Int64("attempt", &p.key.attempt, 0));
  TIDAL_RETURN_IF_ERROR(r.String("name", &p.name));
  TIDAL_RETURN_IF_ERROR(r.String("kind", &p.kind));
  TIDAL_RETURN_IF_ERROR(r.Int("world_size", &p.world_size, 1));
  TIDAL_RETURN_IF_ERROR(r.Int("rank", &p.key.rank, 0, kMaxPodRank - 1));
  TIDAL_RETURN_IF_ERROR(r.IntList("gpus", &p.gpus, 0, kMaxGpusPerNode - 1));
  TIDAL_RETURN_IF_ERROR(r.String("master_addr", &p.master_addr));
  TIDAL_RETURN_IF_ERROR(r.Int("master_port", &p.master_port, 0, 65535));
  TIDAL_RETURN_IF_ERROR(r.StringList("command", &p.command));
  TIDAL_RETURN_IF_ERROR(r.StringMap("env", &p.env));
  TIDAL_RETURN_IF_ERROR(r.String("image", &p.image));
  TIDAL_RETURN_IF_ERROR(r.String("checkpoint_dir_key", &p.checkpoint_dir_key));
  // It names a directory under the agent's checkpoint root.
  if (p.checkpoint_dir_key.empty() || p.checkpoint_dir_key.find('/') != std::string::npos ||
      p.checkpoint_dir_key.starts_with(".")) {
    return FieldError(r.FieldPath("checkpoint_dir_key"), "must be a plain name (no '/', no leading '.')");
  }
  TIDAL_ASSIGN_OR_RETURN(p.readiness, EndpointFromJson(r, "readiness"));
  TIDAL_ASSIGN_OR_RETURN(p.load_endpoint, EndpointFromJson(r, "load_endpoint"));
  std::string desired = "run";
  TIDAL_RETURN_IF_ERROR(r.String("desired", &desired));
  if (desired != "run" && desired != "stop") {
    return FieldError(r.FieldPath("desired"), "expected run or stop, got \"" + desired + "\"");
  }
  p.desired_run = desired == "run";
  if (r.Has("notice")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader n, ObjectReader::Open(r.at("notice"), r.FieldPath("notice"), std::nullopt));
    StopNotice notice;
    notice.cause = "stop";
    TIDAL_RETURN_IF_ERROR(n.String("cause", &notice.cause));
    TIDAL_RETURN_IF_ERROR(n.Int64("notice_time_ms", &notice.notice_time_ms, 0));
    TIDAL_RETURN_IF_ERROR(n.Int64("grace_deadline_ms", &notice.grace_deadline_ms, 0));
    std::string signal = "SIGTERM";
    TIDAL_RETURN_IF_ERROR(n.String("signal", &signal));
    auto sig = ParseSignal(signal);
    if (!sig.ok()) return FieldError(n.FieldPath("signal"), sig.status().message());
    notice.signal = *sig;
    TIDAL_RETURN_IF_ERROR(n.Bool("checkpoint", &notice.checkpoint));
    p.notice = notice;
  }
  return p;
}

json PodAssignmentListToJson(const PodAssignmentList& list) {
  json pods = json::array();
  for (const PodAssignment& p : list.pods) pods.push_back(PodAssignmentToJson(p));
  json j = {{"pods", std::move(pods)}};
  if (!list.version.empty()) j["version"] = list.version;
  return j;
}

StatusOr<std::vector<PodAssignment>> PodAssignmentsFromJson(const json& pods, std::string_view path) {
  TIDAL_RETURN_IF_ERROR(ExpectArray(pods, path));
  std::vector<PodAssignment> out;
  for (size_t i = 0; i < pods.size(); ++i) {
    TIDAL_ASSIGN_OR_RETURN(PodAssignment p, PodAssignmentFromJson(pods[i], IndexPath(path, i)));
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<PodAssignmentList> PodAssignmentListFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::nullopt));
  if (!r.Has("pods")) return r.Missing("pods");
  PodAssignmentList list;
  TIDAL_ASSIGN_OR_RETURN(list.pods, PodAssignmentsFromJson(r.at("pods")));
  TIDAL_RETURN_IF_ERROR(r.String("version", &list.version));
  if (list.version.size() > kMaxVersionLength) {
    return FieldError("version", "longer than " + std::to_string(kMaxVersionLength) + " characters");
  }
  return list;
}

}  // namespace tidal::protocol
