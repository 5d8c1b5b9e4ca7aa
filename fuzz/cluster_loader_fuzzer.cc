// The cluster file (YAML, and JSON through the YAML parser).
#include "config/cluster_loader.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tidal::config::ParseClusterYaml(tidal::fuzz::AsText(data, size), "fuzz.yaml");
  if (auto j = tidal::fuzz::AsJson(data, size)) (void)tidal::config::ParseClusterJson(*j);
  return 0;
}
