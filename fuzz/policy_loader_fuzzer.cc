// The policy file.
#include "config/policy_loader.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tidal::config::ParsePolicyYaml(tidal::fuzz::AsText(data, size), "fuzz.yaml");
  if (auto j = tidal::fuzz::AsJson(data, size)) (void)tidal::config::ParsePolicyJson(*j);
  return 0;
}
