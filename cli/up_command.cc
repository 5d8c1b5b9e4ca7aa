// `tidal up`: a whole cluster on this machine (agent/local_cluster.h) with an
// example mix of real processes, until Ctrl-C.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "agent/local_cluster.h"
#include "agent/pod_process.h"
#include "cli/command_registry.h"

namespace tidal::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct UpFlags {
  int nodes = 3;
  int gpus_per_node = 4;
  int port = 0;
  std::string work_dir;
  bool no_mix = false;
  double duration_s = 0;
  double load_rps = 4;
  double surge_rps = 40;
  double surge_at_s = 60;
  double surge_for_s = 60;
};

std::string SelfPath() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

// The example mix: an inference service with a load generator, a training
// gang that checkpoints, a batch job and a debug session that sits idle.
std::vector<json> ExampleMix(const std::string& examples, int gpus_per_node, int serving_gpus) {
  const int gang_gpus = std::max(1, gpus_per_node / 2);
  return {
      {{"name", "chat"}, {"kind", "inference"}, {"project", "chat-serving"},
       {"gpus_per_replica", 1}, {"replicas", 1}, {"min_replicas", 1},
       {"max_replicas", std::max(1, serving_gpus)}, {"target_p99_ms", 250},
       {"replica_capacity_rps", 10}, {"cold_start_s", 2},
       {"command", {examples + "/server", "--load-ms", "2000", "--capacity-rps", "10"}},
       {"readiness", {{"port", 18080}, {"path", "/ready"}}},
       {"load_endpoint", {{"port", 18080}, {"path", "/load"}}}},
      {{"name", "llm-train"}, {"kind", "training"}, {"project", "llm"},
       {"gpus_per_replica", gang_gpus}, {"replicas", 2}, {"checkpoint_interval_s", 5},
       {"command", {examples + "/trainer", "--steps", "100000", "--step-ms", "200",
                    "--checkpoint-every", "25"}}},
      {{"name", "nightly-eval"}, {"kind", "batch_inference"}, {"project", "llm"},
       {"gpus_per_replica", 1}, {"replicas", 1}, {"duration_s", 60},
       {"command", {examples + "/trainer", "--steps", "600", "--step-ms", "100"}}},
      {{"name", "notebook"}, {"kind", "debug"}, {"project", "sandbox"}, {"gpus_per_replica", 1},
       {"max_runtime_s", 3600},
       {"command", {examples + "/trainer", "--idle", "--steps", "100000000"}}},
  };
}

void PrintStatus(const agent::LocalCluster& cluster) {
  auto list = cluster.Get("/v1/workloads");
  if (!list.ok()) return;
  std::map<std::string, std::vector<std::string>> by_state;
  for (const json& w : (*list)["workloads"]) {
    std::string name = w.value("name", "?");
    if (w.contains("allocation") && w["allocation"].is_object()) {
      name += fmt::format("({} pods)", w["allocation"].value("pods", json::array()).size());
    }
    by_state[w.value("state", "?")].push_back(name);
  }
  std::string line;
  for (const auto& [state, names] : by_state) {
    line += fmt::format("  {}: {}", state, fmt::join(names, " "));
  }
  fmt::print("tidal up:{}\n", line);
  std::fflush(stdout);
}

int RunUp(const UpFlags& f) {
  agent::LocalClusterOptions options;
  options.tidal_binary = SelfPath();
  options.work_dir = f.work_dir.empty() ? fmt::format("/tmp/tidal-up-{}", getpid()) : f.work_dir;
  options.nodes = agent::DefaultLocalNodes(f.nodes, f.gpus_per_node);
  options.server_port = f.port;
  options.debug_idle_limit_s = 60;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  fmt::print("tidal up: starting a server and {} agents with {} fake GPUs each in {}\n", f.nodes,
             f.gpus_per_node, options.work_dir);
  std::fflush(stdout);
  auto cluster = agent::LocalCluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "tidal up: " << cluster.status().message() << "\n";
    return 1;
  }
  const std::string url = (*cluster)->url();
  fmt::print("tidal up: cluster ready\n"
             "  API:      {}/v1  (admin token {})\n"
             "  metrics:  {}/metrics\n"
             "  nodes:    {}/v1/nodes\n"
             "  logs:     {}/server.log, {}/node-*/agent.log, node-*/pods/*/stdout.log\n"
             "  try:      TIDAL_SERVER={} TIDAL_TOKEN={} {} list\n"
             "Ctrl-C stops everything.\n",
             url, (*cluster)->admin_token(), url, url, options.work_dir, options.work_dir, url,
             (*cluster)->admin_token(), options.tidal_binary);
  std::fflush(stdout);

  std::unique_ptr<agent::PodProcess> loadgen;
  const std::string examples = fs::path(options.tidal_binary).parent_path().string() + "/examples";
  if (!f.no_mix) {
    if (access((examples + "/trainer").c_str(), X_OK) != 0) {
      std::cerr << "tidal up: no example workloads in " << examples
                << " (build the example_* targets); running without the mix\n";
    } else {
      int serving_gpus = 0;
      for (const auto& n : options.nodes) serving_gpus += n.pool == "training" ? 0 : n.gpus;
      for (const json& w : ExampleMix(examples, f.gpus_per_node, serving_gpus)) {
        auto reply = (*cluster)->Post("/v1/workloads", w);
        if (reply.ok()) {
          fmt::print("tidal up: submitted {} '{}' as workload {}\n", w["kind"].get<std::string>(),
                     w["name"].get<std::string>(), (*reply).value("id", 0));
        } else {
          std::cerr << "tidal up: submit " << w["name"] << ": " << reply.status().message() << "\n";
        }
      }
      std::vector<std::string> dirs;
      for (size_t i = 0; i < options.nodes.size(); ++i) dirs.push_back((*cluster)->node_dir(i));
      agent::ProcessSpec spec;
      spec.argv = {examples + "/loadgen", "--service", "chat", "--discover",
                   fmt::format("{}", fmt::join(dirs, ",")), "--rps", fmt::format("{}", f.load_rps),
                   "--surge-at-s", fmt::format("{}", f.surge_at_s), "--surge-rps",
                   fmt::format("{}", f.surge_rps), "--surge-for-s", fmt::format("{}", f.surge_for_s)};
      spec.env = {"PATH=/usr/bin:/bin"};
      spec.stdout_path = spec.stderr_path = options.work_dir + "/loadgen.log";
      auto started = agent::PodProcess::Start(spec);
      if (started.ok()) {
        loadgen = std::move(started).value();
        fmt::print("tidal up: load generator: {} req/s, surging to {} req/s at t={}s for {}s "
                   "(log {}/loadgen.log)\n",
                   f.load_rps, f.surge_rps, f.surge_at_s, f.surge_for_s, options.work_dir);
      } else {
        std::cerr << "tidal up: load generator: " << started.status().message() << "\n";
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto next_status = start;
  while (!g_stop) {
    const auto now = std::chrono::steady_clock::now();
    if (f.duration_s > 0 && now - start >= std::chrono::duration<double>(f.duration_s)) break;
    if (now >= next_status) {
      PrintStatus(**cluster);
      next_status = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  fmt::print("tidal up: stopping\n");
  std::fflush(stdout);
  if (loadgen) {
    loadgen->SignalGroup(SIGTERM);
    loadgen.reset();
  }
  (*cluster)->Stop();
  fmt::print("tidal up: stopped\n");
  return 0;
}

RegisterCommand reg([](CLI::App& root) {
  auto flags = std::make_shared<UpFlags>();
  CLI::App* cmd = root.add_subcommand(
      "up", "Run a server and N agents with fake GPUs on this machine, with an example mix");
  cmd->add_option("--nodes", flags->nodes, "Agents (nodes)")->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--gpus-per-node", flags->gpus_per_node, "Fake GPUs per node")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--port", flags->port, "Server port (0 = a free one)")->capture_default_str();
  cmd->add_option("--work-dir", flags->work_dir, "Where state and logs go (default /tmp/tidal-up-PID)");
  cmd->add_flag("--no-mix", flags->no_mix, "Start the cluster only; submit nothing");
  cmd->add_option("--duration-s", flags->duration_s, "Stop after this long (0 = at Ctrl-C)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--load-rps", flags->load_rps, "Inference load")->capture_default_str();
  cmd->add_option("--surge-rps", flags->surge_rps, "Inference load during the surge")
      ->capture_default_str();
  cmd->add_option("--surge-at-s", flags->surge_at_s, "When the surge starts")->capture_default_str();
  cmd->add_option("--surge-for-s", flags->surge_for_s, "How long it lasts")->capture_default_str();
  cmd->callback([flags] { ExitCode() = RunUp(*flags); });
});

}  // namespace
}  // namespace tidal::cli
