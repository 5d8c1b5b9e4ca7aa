#include "sim/sim_setup.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "config/workload_loader.h"
#include "sim/dlrm_trace_loader.h"
#include "sim/helios_trace_loader.h"
#include "sim/lora_trace_loader.h"
#include "sim/openb_cluster_loader.h"
#include "sim/text_reader.h"
#include "sim/tiresias_trace_loader.h"

namespace tidal::sim {
namespace {

Status BadKey(std::string_view spec, std::string_view key, std::string_view what,
              std::string_view value) {
  return InvalidArgument(
      fmt::format("trace \"{}\": key '{}': {} (got \"{}\")", spec, key, what, value));
}

Status Positive(std::string_view spec, std::string_view key, std::string_view value, double& out,
                bool allow_zero = false) {
  auto v = ParseDouble(value);
  if (!v || (allow_zero ? *v < 0 : *v <= 0))
    return BadKey(spec, key, allow_zero ? "expected a number >= 0" : "expected a number > 0", value);
  out = *v;
  return Status::Ok();
}

StatusOr<const Project*> ResolveProject(const config::ClusterConfig& cluster,
                                        const std::string& name, const TraceSpec& spec) {
  if (name.empty()) {
    if (cluster.projects.size() == 1) return &cluster.projects.front();
    return InvalidArgument(fmt::format(
        "trace {}: set project=NAME (the cluster has {} projects)", spec.path, cluster.projects.size()));
  }
  const Project* p = cluster.FindProject(name);
  if (p == nullptr)
    return NotFound(fmt::format("trace {}: project '{}' is not in the cluster file", spec.path, name));
  return p;
}

constexpr char kWorkloadFormats[] = "philly, openb, tiresias, pollux, helios, dlrm";
constexpr char kLoadFormats[] = "azure_llm, genai_qps, genai_lora";

bool IsWorkloadFormat(std::string_view f) {
  return f == "philly" || f == "openb" || f == "tiresias" || f == "pollux" || f == "helios" ||
         f == "dlrm";
}
bool IsLoadFormat(std::string_view f) {
  return f == "azure_llm" || f == "genai_qps" || f == "genai_lora";
}

// A bound on the values of one filter key (the GenAI trace has 87 models).
constexpr size_t kMaxFilterValues = 256;

// The values of a filter key: VALUE[|VALUE...], each 1..64 characters of
// letters, digits, '_', '-' and '.', none twice.
Status ParseFilterValues(std::string_view spec, std::string_view key, std::string_view value,
                         std::vector<std::string>& out) {
  if (!out.empty()) return BadKey(spec, key, "given twice (list the values as A|B)", value);
  size_t begin = 0;
  while (true) {
    const size_t bar = value.find('|', begin);
    const std::string_view v =
        value.substr(begin, bar == std::string_view::npos ? std::string_view::npos : bar - begin);
    if (v.empty() || v.size() > 64)
      return BadKey(spec, key, "expected VALUE[|VALUE...], each of 1..64 characters", value);
    for (char c : v) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.';
      if (!ok)
        return BadKey(spec, key,
                      fmt::format("'{}' is not a value: expected letters, digits, '_', '-' or '.'", v),
                      value);
    }
    if (std::find(out.begin(), out.end(), v) != out.end())
      return BadKey(spec, key, fmt::format("'{}' is listed twice", v), value);
    if (out.size() >= kMaxFilterValues)
      return BadKey(spec, key, fmt::format("more than {} values", kMaxFilterValues), value);
    out.emplace_back(v);
    if (bar == std::string_view::npos) break;
    begin = bar + 1;
  }
  return Status::Ok();
}

// A bound on how many VC queues one trace may create (Philly has 15).
constexpr size_t kMaxVcQueues = 256;

// queue=vc with vc_nodes: the queues of the VCs that the cluster file lacks,
// as children of `project`'s default queue (see TraceSpec::vc_nodes).
Status AddVcQueues(const TraceSpec& spec, const std::vector<TraceJob>& jobs,
                   const Project& project, config::ClusterConfig& cluster) {
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(spec.vc_nodes));
  TIDAL_RETURN_IF_ERROR(ReadHeader(*in, {"vc", "node num"}));
  std::vector<std::pair<std::string, long long>> vcs;  // file order
  long long total_nodes = 0;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 2)
      return FieldError(spec.vc_nodes, n, "row", fmt::format("expected 2 columns, found {}", f.size()), line);
    if (f[0].empty() || f[0].size() > 64)
      return FieldError(spec.vc_nodes, n, "vc", "expected a VC name of 1..64 characters", f[0]);
    auto nodes = ParseInt(f[1]);
    if (!nodes || *nodes < 0 || *nodes > 100000)
      return FieldError(spec.vc_nodes, n, "node num", "expected an integer in 0..100000", f[1]);
    for (const auto& v : vcs)
      if (v.first == f[0]) return FieldError(spec.vc_nodes, n, "vc", "listed twice", f[0]);
    vcs.emplace_back(std::string(f[0]), *nodes);
    total_nodes += *nodes;
    if (vcs.size() > kMaxVcQueues)
      return FieldError(spec.vc_nodes, n, "row", fmt::format("more than {} VCs", kMaxVcQueues), line);
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  // VCs of the trace that the file does not list, in order of first use.
  for (const TraceJob& j : jobs) {
    bool listed = false;
    for (const auto& v : vcs) listed = listed || v.first == j.group;
    if (listed) continue;
    vcs.emplace_back(j.group, 0);
    if (vcs.size() > kMaxVcQueues)
      return InvalidArgument(fmt::format("trace {}: more than {} VCs", spec.path, kMaxVcQueues));
  }
  if (!project.default_queue.valid())
    return InvalidArgument(fmt::format("trace {}: project '{}' has no default queue for the VC queues",
                                       spec.path, project.name));
  const QueueId parent = project.default_queue;
  const int parent_gpus = cluster.queues[parent.value()].guaranteed_gpus;
  Project& owner = cluster.projects[project.id.value()];
  for (const auto& [name, nodes] : vcs) {
    if (const Queue* q = cluster.FindQueue(name); q != nullptr) {
      if (!owner.MayUseQueue(q->id)) owner.allowed_queues.push_back(q->id);
      continue;  // the cluster file's own queue wins
    }
    Queue q;
    q.id = QueueId(static_cast<uint32_t>(cluster.queues.size()));
    q.name = name;
    q.parent = parent;
    q.pools = cluster.queues[parent.value()].pools;  // empty would mean any pool: no wider than the parent
    // Rounded down, so the children never guarantee more than the parent.
    q.guaranteed_gpus = total_nodes > 0 ? static_cast<int>(parent_gpus * nodes / total_nodes) : 0;
    cluster.queues.push_back(q);
    owner.allowed_queues.push_back(q.id);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TraceSpec> ParseTraceSpec(std::string_view text) {
  TraceSpec spec;
  std::string_view rest = text;
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos)
    return InvalidArgument(fmt::format("trace \"{}\": expected FORMAT:PATH[,key=value...]", text));
  std::string_view head = rest.substr(0, colon);
  if (const size_t eq = head.find('='); eq != std::string_view::npos) {
    spec.service = std::string(head.substr(0, eq));
    head = head.substr(eq + 1);
    if (spec.service.empty())
      return InvalidArgument(fmt::format("trace \"{}\": empty service name before '='", text));
  }
  spec.format = std::string(head);
  if (!IsWorkloadFormat(spec.format) && !IsLoadFormat(spec.format))
    return InvalidArgument(fmt::format(
        "trace \"{}\": unknown format '{}' (workload traces: {}; load traces: {})", text,
        spec.format, kWorkloadFormats, kLoadFormats));
  rest = rest.substr(colon + 1);
  std::vector<std::string_view> parts;
  SplitCsv(rest, parts);
  spec.path = std::string(parts[0]);
  if (spec.path.empty()) return InvalidArgument(fmt::format("trace \"{}\": empty path", text));
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string_view::npos)
      return InvalidArgument(fmt::format("trace \"{}\": expected key=value, got \"{}\"", text, parts[i]));
    const std::string_view key = parts[i].substr(0, eq);
    const std::string_view value = parts[i].substr(eq + 1);
    TraceOptions& o = spec.options;
    if (key == "time_scale") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.time_scale));
    } else if (key == "duration_scale") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.duration_scale));
    } else if (key == "load_scale") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.load_scale, true));
    } else if (key == "start_s") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.start_s, true));
    } else if (key == "span_s") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.span_s, true));
    } else if (key == "window_s") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.window_s));
    } else if (key == "limit") {
      auto v = ParseInt(value);
      if (!v || *v < 0) return BadKey(text, key, "expected an integer >= 0", value);
      o.limit = static_cast<size_t>(*v);
    } else if (key == "node_gpus") {
      auto v = ParseInt(value);
      if (!v || *v < 1 || *v > 64) return BadKey(text, key, "expected an integer in 1..64", value);
      o.node_gpus = static_cast<int>(*v);
    } else if (key == "project") {
      spec.project = std::string(value);
    } else if (key == "queue") {
      spec.queue = std::string(value);
    } else if (key == "vc_nodes") {
      if (value.empty()) return BadKey(text, key, "expected a path", value);
      spec.vc_nodes = std::string(value);
    } else if (key == "duration_s") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, o.job_duration_s));
    } else if (key == "inference_project") {
      spec.inference_project = std::string(value);
    } else if (key == "checkpoint_interval_s") {
      double s = 0;
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, s, true));
      spec.checkpoint_interval = SecondsF(s);
    } else if (key == "checkpoint_on_request_s") {
      double s = 0;
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, s, true));
      if (s > 3600) return BadKey(text, key, "expected seconds in 0..3600", value);
      spec.checkpoint_on_request = SecondsF(s);
    } else if (key == "replica_capacity_rps") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, spec.replica_capacity_rps));
    } else if (key == "diurnal_trough") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, spec.diurnal_trough, true));
      if (spec.diurnal_trough > 1) return BadKey(text, key, "expected a factor in 0..1", value);
    } else if (key == "diurnal_peak_h") {
      TIDAL_RETURN_IF_ERROR(Positive(text, key, value, spec.diurnal_peak_h, true));
    } else if (key == "smooth") {
      auto v = ParseInt(value);
      if (!v || *v < 1 || *v > 1000) return BadKey(text, key, "expected an integer in 1..1000", value);
      spec.smooth_windows = static_cast<int>(*v);
    } else if (key == "model") {
      TIDAL_RETURN_IF_ERROR(ParseFilterValues(text, key, value, spec.lora_filter.models));
    } else if (key == "request_type") {
      TIDAL_RETURN_IF_ERROR(ParseFilterValues(text, key, value, spec.lora_filter.request_types));
    } else {
      return InvalidArgument(fmt::format("trace \"{}\": unknown key '{}'", text, key));
    }
  }
  if (!spec.vc_nodes.empty() && spec.queue != "vc")
    return InvalidArgument(fmt::format("trace \"{}\": vc_nodes needs queue=vc", text));
  if (spec.format != "genai_lora" &&
      (!spec.lora_filter.models.empty() || !spec.lora_filter.request_types.empty()))
    return InvalidArgument(fmt::format(
        "trace \"{}\": key '{}' applies only to genai_lora traces (not {})", text,
        spec.lora_filter.models.empty() ? "request_type" : "model", spec.format));
  const bool load_format = IsLoadFormat(spec.format);
  if (load_format && spec.service.empty())
    return InvalidArgument(
        fmt::format("trace \"{}\": a load trace needs its service: SERVICE={}:PATH", text, spec.format));
  if (!load_format && !spec.service.empty())
    return InvalidArgument(fmt::format("trace \"{}\": a {} trace takes no service name", text, spec.format));
  return spec;
}

Status AddWorkloadTrace(const TraceSpec& spec, config::ClusterConfig& cluster,
                        std::vector<SimWorkload>& workloads, Summary::Traces* counts) {
  TraceJobs loaded;
  const TraceOptions& o = spec.options;
  if (spec.format == "philly") {
    TIDAL_ASSIGN_OR_RETURN(loaded.jobs, LoadPhillyTrace(spec.path, o));
  } else if (spec.format == "openb") {
    TIDAL_ASSIGN_OR_RETURN(loaded, LoadOpenbPods(spec.path, o));
  } else if (spec.format == "tiresias") {
    TIDAL_ASSIGN_OR_RETURN(loaded.jobs, LoadTiresiasTrace(spec.path, o));
  } else if (spec.format == "pollux") {
    TIDAL_ASSIGN_OR_RETURN(loaded.jobs, LoadPolluxWorkload(spec.path, o));
  } else if (spec.format == "helios") {
    TIDAL_ASSIGN_OR_RETURN(loaded, LoadHeliosTrace(spec.path, o));
  } else if (spec.format == "dlrm") {
    TIDAL_ASSIGN_OR_RETURN(loaded, LoadDlrmInstances(spec.path, o));
  } else {
    return InvalidArgument(fmt::format("trace {}: {} is a load trace; use --load-trace",
                                       spec.path, spec.format));
  }
  const std::vector<TraceJob>& jobs = loaded.jobs;
  TIDAL_ASSIGN_OR_RETURN(const Project* project, ResolveProject(cluster, spec.project, spec));
  if (spec.queue == "vc" && !spec.vc_nodes.empty()) {
    TIDAL_RETURN_IF_ERROR(AddVcQueues(spec, jobs, *project, cluster));
  }
  const Project* inference_project = project;
  if (!spec.inference_project.empty()) {
    TIDAL_ASSIGN_OR_RETURN(inference_project,
                           ResolveProject(cluster, spec.inference_project, spec));
  }
  const Queue* fixed_queue = nullptr;
  if (!spec.queue.empty() && spec.queue != "vc") {
    fixed_queue = cluster.FindQueue(spec.queue);
    if (fixed_queue == nullptr)
      return NotFound(fmt::format("trace {}: queue '{}' is not in the cluster file", spec.path, spec.queue));
  }
  for (const TraceJob& t : jobs) {
    const Project* p = t.kind == WorkloadKind::kInference ? inference_project : project;
    QueueId queue = p->default_queue;
    if (fixed_queue != nullptr) {
      queue = fixed_queue->id;
    } else if (spec.queue == "vc") {
      const Queue* q = cluster.FindQueue(t.group);
      if (q == nullptr)
        return NotFound(fmt::format(
            "{}:{}: field '{}': no queue named '{}' in the cluster file (vc_nodes=PATH creates "
            "the VC queues)",
            spec.path, t.line, spec.format == "helios" ? "vc" : "cluster", t.group));
      queue = q->id;
    }
    if (!queue.valid())
      return InvalidArgument(fmt::format("trace {}: project '{}' has no default queue; set queue=NAME",
                                         spec.path, p->name));
    SimWorkload sw;
    Workload& w = sw.workload;
    w.name = t.name;
    w.kind = t.kind;
    w.tenant = p->tenant;
    w.project = p->id;
    w.queue = queue;
    w.gpus_per_pod = t.gpus_per_pod;
    w.pods = w.min_pods = w.max_pods = t.pods;
    w.preemptible = t.kind != WorkloadKind::kInference;
    w.expected_duration = SecondsF(std::max(t.duration_s, 1.0));
    if (t.kind == WorkloadKind::kTraining) {
      w.training.checkpoint_interval = spec.checkpoint_interval;
      w.training.checkpoint_on_request = spec.checkpoint_on_request;
    } else {
      w.inference.replica_capacity_rps = spec.replica_capacity_rps;
      w.inference.cold_start = seconds(60);
    }
    sw.submit_s = t.submit_s;
    workloads.push_back(std::move(sw));
  }
  if (counts != nullptr) {
    counts->jobs += static_cast<int>(jobs.size());
    counts->skipped_cpu_only += static_cast<int>(loaded.skipped_cpu_only);
    counts->skipped_never_ran += static_cast<int>(loaded.skipped_never_ran);
  }
  return Status::Ok();
}

StatusOr<LoadSeries> ReadLoadTrace(const TraceSpec& spec) {
  LoadSeries series;
  if (spec.format == "azure_llm") {
    TIDAL_ASSIGN_OR_RETURN(series, LoadAzureLlmTrace(spec.path, spec.options));
  } else if (spec.format == "genai_qps") {
    TIDAL_ASSIGN_OR_RETURN(series, LoadGenaiQps(spec.path, spec.options));
  } else if (spec.format == "genai_lora") {
    TIDAL_ASSIGN_OR_RETURN(series, LoadGenaiLoraTrace(spec.path, spec.options, spec.lora_filter));
  } else {
    return InvalidArgument(
        fmt::format("trace {}: {} is a workload trace; use --trace", spec.path, spec.format));
  }
  if (spec.smooth_windows > 1 && !series.rps.empty()) {
    // Centred moving average: bursts shorter than the window are flattened.
    const int half = spec.smooth_windows / 2;
    std::vector<double> out(series.rps.size());
    for (size_t i = 0; i < series.rps.size(); ++i) {
      double sum = 0;
      int n = 0;
      for (long k = static_cast<long>(i) - half; k <= static_cast<long>(i) + half; ++k) {
        if (k < 0 || k >= static_cast<long>(series.rps.size())) continue;
        sum += series.rps[static_cast<size_t>(k)];
        ++n;
      }
      out[i] = sum / n;
    }
    series.rps = std::move(out);
  }
  if (spec.diurnal_trough < 1)
    ApplyDiurnal(series, spec.diurnal_trough, spec.diurnal_peak_h * 3600, 86400);
  return series;
}

Status AddLoadTrace(const TraceSpec& spec, LoadProfile& load) {
  TIDAL_ASSIGN_OR_RETURN(LoadSeries series, ReadLoadTrace(spec));
  load.SetSeries(spec.service, series);
  return Status::Ok();
}

StatusOr<SimInput> LoadSimInput(const SimFiles& files) {
  SimInput in;
  if (files.cluster.empty()) return InvalidArgument("--cluster is required");
  if (IsOpenbClusterSpec(files.cluster)) {
    TIDAL_ASSIGN_OR_RETURN(OpenbCluster openb, LoadOpenbClusterSpec(files.cluster));
    in.cluster = std::move(openb.config);
  } else {
    TIDAL_ASSIGN_OR_RETURN(in.cluster, config::LoadClusterFile(files.cluster));
  }
  if (files.policy.empty()) {
    in.policy = config::DefaultPolicy();
  } else {
    TIDAL_ASSIGN_OR_RETURN(in.policy, config::LoadPolicyFile(files.policy));
  }
  if (!files.workload.empty()) {
    TIDAL_ASSIGN_OR_RETURN(std::vector<config::WorkloadSpec> specs,
                           config::LoadWorkloadFile(files.workload, in.cluster));
    for (config::WorkloadSpec& s : specs)
      in.workloads.push_back(SimWorkload{std::move(s.workload), ToSeconds(s.submit_offset)});
  }
  for (const std::string& t : files.traces) {
    TIDAL_ASSIGN_OR_RETURN(TraceSpec spec, ParseTraceSpec(t));
    TIDAL_RETURN_IF_ERROR(AddWorkloadTrace(spec, in.cluster, in.workloads, &in.traces));
  }
  // Ids are assigned in arrival order, so the snapshot stays in id order as
  // workloads arrive.
  std::stable_sort(in.workloads.begin(), in.workloads.end(),
                   [](const SimWorkload& a, const SimWorkload& b) { return a.submit_s < b.submit_s; });
  if (!files.load.empty()) {
    TIDAL_ASSIGN_OR_RETURN(in.load, LoadLoadFile(files.load));
  }
  for (const std::string& t : files.load_traces) {
    TIDAL_ASSIGN_OR_RETURN(TraceSpec spec, ParseTraceSpec(t));
    TIDAL_RETURN_IF_ERROR(AddLoadTrace(spec, in.load));
  }
  in.load.set_period_s(files.load_period_s);
  if (!files.load_history.empty()) {
    TIDAL_ASSIGN_OR_RETURN(in.load_history, LoadLoadFile(files.load_history));
  }
  for (const std::string& service : in.load_history.services()) {
    if (!in.load.Has(service))
      return InvalidArgument(fmt::format(
          "load history: service '{}' has no load curve (--load or --load-trace); only scored services "
          "are forecast",
          service));
  }
  for (const std::string& service : in.load.services()) {
    const bool known = std::any_of(in.workloads.begin(), in.workloads.end(), [&](const SimWorkload& w) {
      return w.workload.kind == WorkloadKind::kInference && w.workload.name == service;
    });
    if (!known)
      return InvalidArgument(fmt::format(
          "load: service '{}' is not an inference workload of the workload file", service));
  }
  return in;
}

}  // namespace tidal::sim
