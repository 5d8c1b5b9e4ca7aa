// Measures what one node agent costs its node: a real `tidal agent` with 8
// fake GPUs runs 8 one-GPU pods (the example trainer) against a real
// `tidal server`; after a warm-up, the agent's CPU time and memory are read
// from /proc over a measurement window. Target: < 1% of a core, < 30 MiB RSS.
//
//   build/bench/agent_overhead_benchmark [--seconds 60] [--pods 8]
// (expects build/tidal and build/examples/trainer next to build/bench/)
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench/agent_bench_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace tidal::bench;

int main(int argc, char** argv) {
  double seconds = 60;
  int pods = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (arg == "--pods") pods = std::atoi(argv[i + 1]);
  }
  const fs::path build = BuildDir();
  const std::string tidal = (build / "tidal").string();
  const std::string trainer = (build / "examples/trainer").string();
  if (access(tidal.c_str(), X_OK) != 0 || access(trainer.c_str(), X_OK) != 0) {
    std::cerr << "agent_overhead_benchmark: build the tidal and example_trainer targets first\n";
    return 2;
  }
  auto started = StartBenchServer(
      tidal, "tidal_agent_overhead", 30, 5, "",
      "pools: [training]\n"
      "nodes:\n  - {name: bench-node, gpus: 8, gpu_model: H100-80GB, gpu_memory_gib: 80, nvlink: 2x4}\n"
      "queues:\n  - {name: research, guaranteed_gpus: 8}\n"
      "projects:\n  - {name: llm, tenant: research, tier: standard, queue: research}\n");
  if (!started) return 1;
  const fs::path dir = started->dir;
  const pid_t server = started->pid;
  fs::create_directories(dir / "node");
  const std::string url = started->url();
  // The agent at its defaults: 100 ms loop, heartbeat and GPU sample every 5 s.
  std::vector<std::string> agent_args = {tidal, "agent", "--server", url, "--name", "bench-node", "--gpus",
                                         "fake:8xH100-80GB,nvlink=2x4", "--work-dir", (dir / "node").string()};
  // Run as root (a container), the agent refuses root pods unless told.
  if (geteuid() == 0) agent_args.push_back("--allow-root-pods");
  const pid_t agent = Spawn(agent_args, (dir / "agent.log").string(), {"TIDAL_TOKEN=agent-token"});
  httplib::Client client(url);
  client.set_default_headers({{"Authorization", "Bearer admin-token"}});
  for (int i = 0; i < pods; ++i) {
    json w = {{"name", fmt::format("job-{}", i)}, {"kind", "training"}, {"project", "llm"},
              {"gpus_per_replica", 1}, {"replicas", 1},
              {"command", {trainer, "--steps", "100000000", "--step-ms", "1000",
                           "--checkpoint-every", "10"}}};
    auto res = client.Post("/v1/workloads", w.dump(), "application/json");
    if (!res || res->status >= 300) {
      std::cerr << "submit failed: " << (res ? res->body : "no reply") << "\n";
    }
  }
  // Wait until every pod runs, then warm up.
  for (int i = 0; i < 300; ++i) {
    std::ifstream in(dir / "node/pods.json");
    json j = json::parse(in, nullptr, false);
    int running = 0;
    if (j.is_object()) {
      for (const json& p : j["pods"]) running += p["phase"] == "running" ? 1 : 0;
    }
    if (running == pods) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const double cpu0 = CpuSeconds(agent);
  const auto t0 = std::chrono::steady_clock::now();
  long rss_max = 0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(seconds)) {
    rss_max = std::max(rss_max, StatusKib(agent, "VmRSS"));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const double cpu1 = CpuSeconds(agent);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const long hwm = StatusKib(agent, "VmHWM");
  std::ifstream in(dir / "node/pods.json");
  json j = json::parse(in, nullptr, false);
  const size_t live = j.is_object() ? j["pods"].size() : 0;
  Stop(agent);
  Stop(server);
  fmt::print("agent overhead: {} pods on 8 fake GPUs, {:.0f} s window\n", live, wall);
  fmt::print("  CPU: {:.3f} s = {:.3f}% of one core\n", cpu1 - cpu0, 100.0 * (cpu1 - cpu0) / wall);
  fmt::print("  RSS: max {:.1f} MiB, high-water {:.1f} MiB\n", rss_max / 1024.0, hwm / 1024.0);
  fmt::print("  CPU model: {}\n", CpuModel());
  fs::remove_all(dir);
  return 0;
}
