// Assembles a simulation's input from files: the cluster, policy and
// workload files (config/), workload traces (Philly, openb) and load
// (a LOAD CSV and/or load traces: Azure LLM, GenAI QPS).
//
// A trace is named on the command line as FORMAT:PATH[,key=value...], e.g.
//   philly:philly.csv,limit=500,time_scale=0.1,project=research
//   chat=azure_llm:AzureLLMInferenceTrace_conv.csv,time_scale=24,diurnal_trough=0.3
// (docs/simulator.md lists every key).
#ifndef TIDAL_SIM_SIM_SETUP_H_
#define TIDAL_SIM_SIM_SETUP_H_

#include <string>
#include <string_view>
#include <vector>

#include "config/cluster_config.h"
#include "core/common/status.h"
#include "sim/load_profile.h"
#include "sim/lora_trace_loader.h"
#include "sim/simulator.h"
#include "sim/trace_loader.h"

namespace tidal::sim {

struct TraceSpec {
  // Workload traces: philly | openb | tiresias | pollux | helios | dlrm;
  // load traces: azure_llm | genai_qps | genai_lora.
  std::string format;
  std::string path;
  std::string service;  // load traces: the inference workload it drives
  TraceOptions options;
  // Workload traces.
  std::string project;   // project of every job; may be omitted if the cluster has one
  std::string queue;     // queue of every job ("vc": the trace's group column, Philly's
                         // cluster or Helios's vc); default: the project's default queue
  // With queue=vc: a "vc,node num" CSV (philly-pollux/philly_vc_nodes.csv).
  // Each VC missing from the cluster file becomes a child queue of the
  // project's default queue, guaranteed the VC's share of that queue's
  // guarantee by node count; VCs of the trace missing from the CSV get 0
  // (they borrow only).
  std::string vc_nodes;
  std::string inference_project;  // openb LS pods; default: project
  Duration checkpoint_interval = minutes(30);
  Duration checkpoint_on_request{0};  // 0 = the jobs save only at their interval
  double replica_capacity_rps = 10;  // openb LS pods
  // Load traces: a daily cycle (trough 1 = none) and when it peaks.
  double diurnal_trough = 1.0;
  double diurnal_peak_h = 14;
  int smooth_windows = 1;  // moving average over this many windows
  // genai_lora only: model=ID[|ID...] and request_type=TYPE[|TYPE...] keep
  // the requests of those checkpoint_model_version_ids / predict_types.
  LoraRequestFilter lora_filter;
};

// Parses "[SERVICE=]FORMAT:PATH[,key=value...]". Unknown keys are errors.
StatusOr<TraceSpec> ParseTraceSpec(std::string_view text);

// Appends the trace's jobs (after `workloads`, submit times from 0).
// `counts` (may be null) adds what the loader kept and skipped. With
// queue=vc and vc_nodes, the VC queues are added to `cluster`.
Status AddWorkloadTrace(const TraceSpec& spec, config::ClusterConfig& cluster,
                        std::vector<SimWorkload>& workloads, Summary::Traces* counts = nullptr);
// Sets the curve of spec.service from the trace.
Status AddLoadTrace(const TraceSpec& spec, LoadProfile& load);
// The series the load trace gives (after diurnal shaping and smoothing).
StatusOr<LoadSeries> ReadLoadTrace(const TraceSpec& spec);

struct SimFiles {
  std::string cluster;   // a cluster file, or openb:PATH[,inference_share=F] (a node list)
  std::string policy;    // empty = the compiled-in default policy
  std::string workload;  // may be empty when traces give the work
  std::string load;      // LOAD CSV; may be empty
  std::vector<std::string> traces;       // workload traces
  std::vector<std::string> load_traces;  // load traces
  double load_period_s = 0;
  // LOAD CSV of load before the run (--load-history), fed to the forecaster
  // so that day one is not reactive; may be empty.
  std::string load_history;
};

StatusOr<SimInput> LoadSimInput(const SimFiles& files);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_SIM_SETUP_H_
