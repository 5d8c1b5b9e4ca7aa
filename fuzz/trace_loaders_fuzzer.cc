// Every trace loader on the same bytes: the job traces (Philly, openb pods,
// Tiresias, Pollux, Helios, DLRM instances), the load traces (Azure LLM,
// GenAI QPS, GenAI LoRA), the openb node list and the load CSV that
// --load and --load-history read. They read files, so the input goes to one
// temp file per process.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz/fuzz_input.h"
#include "sim/dlrm_trace_loader.h"
#include "sim/helios_trace_loader.h"
#include "sim/load_profile.h"
#include "sim/lora_trace_loader.h"
#include "sim/openb_cluster_loader.h"
#include "sim/tiresias_trace_loader.h"
#include "sim/trace_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/tidal-fuzz-trace-" + std::to_string(getpid()) + ".csv";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
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
  TraceOptions pollux = options;
  pollux.job_duration_s = 600;  // the files carry no run time
  (void)LoadPolluxWorkload(path, pollux);
  (void)LoadOpenbCluster(path, OpenbClusterOptions{});
  (void)ParseLoadCsv(tidal::fuzz::AsText(data, size), "fuzz");
  return 0;
}
