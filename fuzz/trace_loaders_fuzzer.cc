// Every trace loader (Philly, openb, Azure LLM, GenAI QPS) on the same
// bytes. They read files, so the input goes to one temp file per process.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz/fuzz_input.h"
#include "sim/trace_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/tidal-fuzz-trace-" + std::to_string(getpid()) + ".csv";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  tidal::sim::TraceOptions options;
  (void)tidal::sim::LoadPhillyTrace(path, options);
  (void)tidal::sim::LoadOpenbPods(path, options);
  (void)tidal::sim::LoadAzureLlmTrace(path, options);
  (void)tidal::sim::LoadGenaiQps(path, options);
  return 0;
}
