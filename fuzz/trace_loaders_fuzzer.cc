// Every trace loader on the same bytes: the job traces (Philly, openb pods,
// Tiresias, Pollux, Helios, DLRM instances), the load traces (Azure LLM,
// GenAI QPS, GenAI LoRA, also through a model and request-type filter), the
// openb node list and the load CSV that --load and --load-history read. They
// read files, so the input goes to one temp file per process. An input whose
// first line starts with '#' carries the key=value options of a genai_lora
// --load-trace spec there (`#model=A|B,request_type=T`) and the file after
// it; the options are parsed (errors are fine) and, when they parse, the
// file is loaded with them.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz/fuzz_input.h"
#include "sim/dlrm_trace_loader.h"
#include "sim/helios_trace_loader.h"
#include "sim/load_profile.h"
#include "sim/lora_trace_loader.h"
#include "sim/openb_cluster_loader.h"
#include "sim/sim_setup.h"
#include "sim/tiresias_trace_loader.h"
#include "sim/trace_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/tidal-fuzz-trace-" + std::to_string(getpid()) + ".csv";
  const std::string_view input = tidal::fuzz::AsText(data, size);
  std::string_view spec_options;
  std::string_view file = input;
  if (!input.empty() && input[0] == '#') {
    const size_t eol = std::min(input.find('\n'), input.size());
    spec_options = input.substr(1, eol - 1);
    file = input.substr(std::min(eol + 1, input.size()));
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(file.data(), 1, file.size(), f);
  std::fclose(f);
  using namespace tidal::sim;
  TraceOptions options;
  (void)LoadPhillyTrace(path, options);
  (void)LoadOpenbPods(path, options);
  (void)LoadTiresiasTrace(path, options);
  (void)LoadHeliosTrace(path, options);
  (void)LoadDlrmInstances(path, options);
  (void)LoadAzureLlmTrace(path, options);
  (void)LoadGenaiQps(path, options);
  (void)LoadGenaiLoraTrace(path, options);
  (void)LoadGenaiLoraTrace(path, options, LoraRequestFilter{{"M0000", "M0001"}, {"TXT_2_IMG"}});
  auto spec = ParseTraceSpec("sd=genai_lora:" + path +
                             (spec_options.empty() ? "" : ",") + std::string(spec_options));
  if (spec.ok()) {
    // The moving average costs windows x smooth; the loaders' bounds are
    // what is fuzzed here, not that product.
    spec->smooth_windows = 1;
    (void)ReadLoadTrace(*spec);
  }
  TraceOptions pollux = options;
  pollux.job_duration_s = 600;  // the files carry no run time
  (void)LoadPolluxWorkload(path, pollux);
  (void)LoadOpenbCluster(path, OpenbClusterOptions{});
  (void)ParseLoadCsv(file, "fuzz");
  std::remove(path.c_str());  // one input's file; a run leaves none behind
  return 0;
}
