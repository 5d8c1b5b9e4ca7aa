#include "agent/pod_spec.h"

#include <signal.h>
#include <string.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/model/cluster.h"

namespace tidal::agent {
namespace {

using nlohmann::json;

Status Field(std::string_view field, std::string_view what) {
  return InvalidArgument(fmt::format("pods[].{}: {}", field, what));
}

StatusOr<std::optional<HttpEndpoint>> ParseEndpoint(const json& pod, const char* field) {
  if (!pod.contains(field) || pod[field].is_null()) return std::optional<HttpEndpoint>();
  const json& e = pod[field];
  if (!e.is_object()) return Field(field, "expected an object {port, path}");
  HttpEndpoint endpoint;
  if (e.contains("port")) {
    if (!e["port"].is_number_integer()) return Field(fmt::format("{}.port", field), "expected an integer");
    endpoint.port = e["port"].get<int>();
    if (endpoint.port < 0 || endpoint.port > 65535) {
      return Field(fmt::format("{}.port", field), "expected 0..65535");
    }
  }
  endpoint.path = e.value("path", std::string("/"));
  if (endpoint.path.empty() || endpoint.path[0] != '/') {
    return Field(fmt::format("{}.path", field), "must start with '/'");
  }
  return std::optional<HttpEndpoint>(endpoint);
}

}  // namespace

StatusOr<int> ParseSignal(const std::string& name) {
  if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
    int sig = std::stoi(name);
    if (sig > 0 && sig < NSIG) return sig;
  }
  std::string bare = name.starts_with("SIG") ? name.substr(3) : name;
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr && bare == abbrev) return sig;
  }
  return InvalidArgument(fmt::format("signal: unknown signal '{}'", name));
}

StatusOr<PodSpec> ParsePodSpec(const json& pod) {
  if (!pod.is_object()) return InvalidArgument("pods[]: expected an object");
  PodSpec spec;
  try {
    if (!pod.contains("workload") || !pod["workload"].is_number_integer() ||
        pod["workload"].get<int64_t>() <= 0) {
      return Field("workload", "expected a positive integer");
    }
    spec.key.workload = pod["workload"].get<uint64_t>();
    spec.key.rank = pod.value("rank", 0);
    // Without an explicit attempt, the allocation's start time tells a
    // restarted pod from its earlier run.
    spec.key.attempt = pod.value("attempt", pod.value("start_time_ms", int64_t{0}));
    spec.name = pod.value("name", fmt::format("w{}", spec.key.workload));
    spec.kind = pod.value("kind", std::string("training"));
    spec.world_size = pod.value("world_size", 1);
    if (spec.world_size < 1) return Field("world_size", "expected >= 1");
    if (spec.key.rank < 0 || spec.key.rank >= spec.world_size) {
      return Field("rank", fmt::format("expected 0..{}", spec.world_size - 1));
    }
    if (pod.contains("gpus")) {
      for (const json& g : pod["gpus"]) {
        int gpu = g.get<int>();
        if (gpu < 0 || gpu >= kMaxGpusPerNode) return Field("gpus", fmt::format("GPU {} out of range", gpu));
        spec.gpus.push_back(gpu);
      }
    }
    spec.master_addr = pod.value("master_addr", std::string("127.0.0.1"));
    spec.master_port = pod.value("master_port", 0);
    if (pod.contains("command") && !pod["command"].is_null()) {
      spec.command = pod["command"].get<std::vector<std::string>>();
    }
    if (pod.contains("env") && !pod["env"].is_null()) {
      spec.env = pod["env"].get<std::map<std::string, std::string>>();
    }
    spec.checkpoint_dir_key = pod.value("checkpoint_dir_key", fmt::format("w{}", spec.key.workload));
    if (spec.checkpoint_dir_key.find('/') != std::string::npos ||
        spec.checkpoint_dir_key.starts_with(".")) {
      return Field("checkpoint_dir_key", "must be a plain name (no '/', no leading '.')");
    }
    TIDAL_ASSIGN_OR_RETURN(spec.readiness, ParseEndpoint(pod, "readiness"));
    TIDAL_ASSIGN_OR_RETURN(spec.load_endpoint, ParseEndpoint(pod, "load_endpoint"));
    const std::string desired = pod.value("desired", std::string("run"));
    if (desired != "run" && desired != "stop") return Field("desired", "expected run or stop");
    spec.desired_run = desired == "run";
    if (pod.contains("notice") && !pod["notice"].is_null()) {
      const json& n = pod["notice"];
      StopNotice notice;
      notice.cause = n.value("cause", std::string("stop"));
      notice.notice_time_ms = n.value("notice_time_ms", int64_t{0});
      notice.grace_deadline_ms = n.value("grace_deadline_ms", int64_t{0});
      auto sig = ParseSignal(n.value("signal", std::string("SIGTERM")));
      if (!sig.ok()) return Field("notice.signal", sig.status().message());
      notice.signal = *sig;
      spec.notice = notice;
    }
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("pods[] of workload {}: {}", spec.key.workload, e.what()));
  }
  if (spec.desired_run && spec.command.empty()) return Field("command", "empty for a pod to run");
  return spec;
}

json PodSpecToJson(const PodSpec& spec) {
  json pod = {{"workload", spec.key.workload}, {"rank", spec.key.rank},
              {"attempt", spec.key.attempt}, {"name", spec.name},
              {"kind", spec.kind}, {"world_size", spec.world_size},
              {"gpus", spec.gpus}, {"master_addr", spec.master_addr},
              {"master_port", spec.master_port}, {"command", spec.command},
              {"env", spec.env}, {"checkpoint_dir_key", spec.checkpoint_dir_key}};
  if (spec.readiness) pod["readiness"] = {{"port", spec.readiness->port}, {"path", spec.readiness->path}};
  if (spec.load_endpoint) {
    pod["load_endpoint"] = {{"port", spec.load_endpoint->port}, {"path", spec.load_endpoint->path}};
  }
  return pod;
}

StatusOr<std::vector<PodSpec>> ParsePodList(const json& body) {
  if (!body.is_object() || !body.contains("pods") || !body["pods"].is_array()) {
    return InvalidArgument("pods: expected {\"pods\": [...]}");
  }
  std::vector<PodSpec> pods;
  for (const json& p : body["pods"]) {
    TIDAL_ASSIGN_OR_RETURN(PodSpec spec, ParsePodSpec(p));
    pods.push_back(std::move(spec));
  }
  return pods;
}

}  // namespace tidal::agent
