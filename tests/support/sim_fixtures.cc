#include "tests/support/sim_fixtures.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"

namespace tidal::testing {

std::string MakeScratchDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tidal-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string WriteScratchFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SourceDir() {
  const char* dir = std::getenv("TIDAL_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

std::string SmallClusterYaml(int reserved_nodes, int shared_nodes, int training_nodes) {
  std::string y = "zones: [z]\nracks:\n  - {name: r1, zone: z}\npools:\n  - inference-reserved\n"
                  "  - shared\n  - training\nnodes:\n";
  auto group = [&](const char* name, int count, const char* pool) {
    if (count <= 0) return;
    y += std::string("  - name: ") + name + "-{i}\n    count: " + std::to_string(count) +
         "\n    racks: [r1]\n    pool: " + pool +
         "\n    gpus: 8\n    gpu_model: H100\n    gpu_memory_gib: 80\n    nvlink: all\n";
  };
  group("inf", reserved_nodes, "inference-reserved");
  group("shr", shared_nodes, "shared");
  group("trn", training_nodes, "training");
  const int serving = 8 * (reserved_nodes + shared_nodes);
  const int research = 8 * training_nodes;
  y += "queues:\n  - name: serving\n    guaranteed_gpus: " + std::to_string(serving) +
       "\n    pools: [inference-reserved, shared]\n  - name: research\n    guaranteed_gpus: " +
       std::to_string(research) + "\n    pools: [training, shared]\n";
  y += "projects:\n  - {name: online, tenant: product, tier: critical, queue: serving, "
       "top_tier_approved: true}\n  - {name: research, tenant: research, tier: standard, queue: research}\n";
  return y;
}

sim::SimInput SmallSimInput(int reserved_nodes, int shared_nodes, int training_nodes) {
  sim::SimInput in;
  auto cluster = config::ParseClusterYaml(SmallClusterYaml(reserved_nodes, shared_nodes, training_nodes));
  EXPECT_TRUE(cluster.ok()) << cluster.status().ToString();
  if (cluster.ok()) in.cluster = *cluster;
  in.policy = config::DefaultPolicy();
  return in;
}

namespace {

// A workload of `project`'s tenant and default queue; fails the test (and
// leaves the rest default) when the cluster has no such project.
sim::SimWorkload ForProject(const sim::SimInput& in, const std::string& project,
                            const std::string& name, WorkloadKind kind) {
  sim::SimWorkload s;
  Workload& w = s.workload;
  w.name = name;
  w.kind = kind;
  const Project* p = in.cluster.FindProject(project);
  EXPECT_NE(p, nullptr) << "the cluster has no project '" << project << "'";
  if (p == nullptr) return s;
  w.project = p->id;
  w.tenant = p->tenant;
  w.queue = p->default_queue;
  return s;
}

}  // namespace

sim::SimWorkload SimTraining(const sim::SimInput& in, const std::string& name, int pods,
                             int gpus_per_pod, double duration_s, double submit_s,
                             Duration checkpoint_interval) {
  sim::SimWorkload s = ForProject(in, "research", name, WorkloadKind::kTraining);
  Workload& w = s.workload;
  w.pods = w.min_pods = w.max_pods = pods;
  w.gpus_per_pod = gpus_per_pod;
  w.expected_duration = SecondsF(duration_s);
  w.training.checkpoint_interval = checkpoint_interval;
  s.submit_s = submit_s;
  return s;
}

sim::SimWorkload SimService(const sim::SimInput& in, const std::string& name, double capacity_rps,
                            int max_pods, Duration target_p99, Duration cold_start) {
  sim::SimWorkload s = ForProject(in, "online", name, WorkloadKind::kInference);
  Workload& w = s.workload;
  w.pods = w.min_pods = 1;
  w.max_pods = max_pods;
  w.gpus_per_pod = 1;
  w.preemptible = false;
  w.inference.replica_capacity_rps = capacity_rps;
  w.inference.target_p99 = target_p99;
  w.inference.cold_start = cold_start;
  s.submit_s = 0;
  return s;
}

}  // namespace tidal::testing
