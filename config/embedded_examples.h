// The YAML texts of examples/basic/, compiled in so that `tidal demo` and
// DefaultPolicy() work from any directory. examples/basic/ is the source of
// truth: config/embedded_examples.cc is generated from it by
// examples/basic/embed.sh, and a test fails when the two differ.
#ifndef TIDAL_CONFIG_EMBEDDED_EXAMPLES_H_
#define TIDAL_CONFIG_EMBEDDED_EXAMPLES_H_

#include <string_view>

namespace tidal::config {

extern const std::string_view kBasicClusterYaml;    // examples/basic/cluster.yaml
extern const std::string_view kBasicPolicyYaml;     // examples/basic/policy.yaml
extern const std::string_view kBasicWorkloadsYaml;  // examples/basic/workloads.yaml

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_EMBEDDED_EXAMPLES_H_
