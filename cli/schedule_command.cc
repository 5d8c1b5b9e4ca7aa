// `tidal schedule`: one engine pass over a cluster, policy and workload file,
// printed as tables or JSON. `tidal demo`: the same over the compiled-in
// examples/basic files, so it runs from any directory.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_registry.h"
#include "config/cluster_loader.h"
#include "config/embedded_examples.h"
#include "config/policy_loader.h"
#include "config/schedule_pass.h"
#include "config/workload_loader.h"

namespace tidal::cli {
namespace {

struct ScheduleOptions {
  std::string cluster;
  std::string policy;
  std::string workload;
  std::string output = "text";
};

void Print(const StatusOr<config::SchedulePassResult>& result, const std::string& output) {
  if (!result.ok()) {
    std::cerr << "tidal: " << result.status().message() << "\n";
    ExitCode() = 1;
    return;
  }
  if (output == "json") {
    std::cout << config::ScheduleToJson(*result).dump(2) << "\n";
  } else {
    std::cout << config::RenderScheduleText(*result);
  }
}

StatusOr<config::SchedulePassResult> RunFromFiles(const ScheduleOptions& o) {
  TIDAL_ASSIGN_OR_RETURN(config::ClusterConfig cluster, config::LoadClusterFile(o.cluster));
  PolicyConfig policy = config::DefaultPolicy();
  if (!o.policy.empty()) {
    TIDAL_ASSIGN_OR_RETURN(policy, config::LoadPolicyFile(o.policy));
  }
  TIDAL_ASSIGN_OR_RETURN(std::vector<config::WorkloadSpec> workloads,
                         config::LoadWorkloadFile(o.workload, cluster));
  return config::RunSchedulePass(cluster, policy, workloads);
}

StatusOr<config::SchedulePassResult> RunDemo() {
  TIDAL_ASSIGN_OR_RETURN(config::ClusterConfig cluster,
                         config::ParseClusterYaml(config::kBasicClusterYaml, "examples/basic/cluster.yaml"));
  TIDAL_ASSIGN_OR_RETURN(PolicyConfig policy,
                         config::ParsePolicyYaml(config::kBasicPolicyYaml, "examples/basic/policy.yaml"));
  TIDAL_ASSIGN_OR_RETURN(
      std::vector<config::WorkloadSpec> workloads,
      config::ParseWorkloadYaml(config::kBasicWorkloadsYaml, cluster, "examples/basic/workloads.yaml"));
  return config::RunSchedulePass(cluster, policy, workloads);
}

RegisterCommand reg([](CLI::App& root) {
  auto options = std::make_shared<ScheduleOptions>();
  CLI::App* schedule = root.add_subcommand(
      "schedule", "Run one scheduling pass over files and print the decisions and wait reasons");
  schedule->add_option("--cluster", options->cluster, "Cluster file (YAML or JSON)")->required()->check(CLI::ExistingFile);
  schedule->add_option("--policy", options->policy, "Policy file (default: the built-in policy)")->check(CLI::ExistingFile);
  schedule->add_option("--workload", options->workload, "Workload file")->required()->check(CLI::ExistingFile);
  schedule->add_option("-o,--output", options->output, "Output format")->check(CLI::IsMember({"text", "json"}));
  schedule->callback([options] { Print(RunFromFiles(*options), options->output); });

  auto demo_output = std::make_shared<std::string>("text");
  CLI::App* demo = root.add_subcommand(
      "demo", "Run one scheduling pass over the built-in example (examples/basic)");
  demo->add_option("-o,--output", *demo_output, "Output format")->check(CLI::IsMember({"text", "json"}));
  demo->callback([demo_output] { Print(RunDemo(), *demo_output); });
});

}  // namespace
}  // namespace tidal::cli
