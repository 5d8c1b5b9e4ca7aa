// Loads the policy file (format: docs/formats.md "Policy file"): priority
// templates, preemption, co-location and backfill settings. DefaultPolicy()
// is compiled in, so tidal runs without a policy file.
#ifndef TIDAL_CONFIG_POLICY_LOADER_H_
#define TIDAL_CONFIG_POLICY_LOADER_H_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/model/policy.h"

namespace tidal::config {

StatusOr<PolicyConfig> LoadPolicyFile(const std::string& path);
StatusOr<PolicyConfig> ParsePolicyYaml(std::string_view text,
                                       std::string source_name = "policy.yaml");
StatusOr<PolicyConfig> ParsePolicyJson(const nlohmann::json& root);

// One template for every kind and tenant with tiers critical (base 1000,
// never preempted, requires approval; falls back to standard), standard (500,
// preemptible) and experiment (100, reclaimable); kind bonuses inference +500,
// batch_inference -50, debug +100; budget borrowing -200, over budget -400;
// preemptible training must checkpoint to borrow. The text of this policy is
// kDefaultPolicyYaml (config/embedded_examples.h).
PolicyConfig DefaultPolicy();

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_POLICY_LOADER_H_
