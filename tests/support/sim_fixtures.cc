#include "tests/support/sim_fixtures.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

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

}  // namespace tidal::testing
