// Workload files (`tidal schedule`, `tidal submit -f`), against the embedded
// example cluster.
#include "config/cluster_loader.h"
#include "config/embedded_examples.h"
#include "config/workload_loader.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tidal::config::ClusterConfig* cluster = [] {
    auto c = tidal::config::ParseClusterYaml(tidal::config::kBasicClusterYaml, "cluster.yaml");
    return c.ok() ? new tidal::config::ClusterConfig(*c) : nullptr;
  }();
  if (cluster == nullptr) __builtin_trap();
  (void)tidal::config::ParseWorkloadYaml(tidal::fuzz::AsText(data, size), *cluster, "fuzz.yaml");
  if (auto j = tidal::fuzz::AsJson(data, size)) (void)tidal::config::ParseWorkloadJson(*j, *cluster);
  return 0;
}
