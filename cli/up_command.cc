// `tidal up`: a whole cluster on this machine (agent/local_cluster.h) with an
// example mix of real processes, until Ctrl-C / SIGTERM, or for a set time
// (`--for 60s`) after which it prints a summary (what ran, what completed,
// preemptions) and stops everything it started.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "agent/local_cluster.h"
#include "agent/pod_process.h"
#include "agent/stop_signals.h"
#include "cli/cli_config.h"
#include "cli/command_registry.h"

namespace tidal::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct UpFlags {
  int nodes = 3;
  int gpus_per_node = 4;
  int port = 0;
  std::string work_dir;
  bool no_mix = false;
  double duration_s = 0;
  std::string run_for;  // --for: "90s", "2m", "500ms", "1h" or plain seconds
  // Well inside the load 3 chat replicas serve (1.3 to 3.5 req/s, the
  // latency model's bounds for 10 req/s replicas): at 4, next to the edge,
  // its noise crossed it, and the 20 s scale-down window made chat go
  // 4 -> 3 -> 4 every 22 s.
  double load_rps = 2;
  double surge_rps = 40;
  double surge_at_s = 60;
  double surge_for_s = 60;
  bool surge_set = false;  // --surge-at-s or --surge-for-s given
  bool no_context = false;
  int ha = 0;  // --ha N: N etcd members and N server replicas
};

// The CLI context `tidal up` makes current while it runs (cli/cli_config.h).
constexpr char kUpContext[] = "up";

// Points the CLI config at this cluster, so that a plain `tidal list` in
// another terminal talks to it; returns the file written, or "" (with a
// warning) when there is none to write or it cannot be read.
std::string WriteContext(const CliContext& context) {
  const std::string path = CliConfig::DefaultPath();
  if (path.empty()) return "";
  auto config = CliConfig::Load(path);
  if (!config.ok()) {
    std::cerr << "tidal up: not writing a CLI context: " << config.status().message() << "\n";
    return "";
  }
  config->SetContext(kUpContext, context);
  config->UseContext(kUpContext);
  if (Status s = config->Save(path); !s.ok()) {
    std::cerr << "tidal up: not writing a CLI context: " << s.message() << "\n";
    return "";
  }
  return path;
}

// Undoes WriteContext, unless someone (another `tidal up`) has pointed the
// context elsewhere since.
void RemoveContext(const std::string& path, const CliContext& context) {
  auto config = CliConfig::Load(path);
  if (!config.ok() || !config->RemoveContextIf(kUpContext, context)) return;
  if (Status s = config->Save(path); !s.ok()) {
    std::cerr << "tidal up: could not remove the CLI context: " << s.message() << "\n";
  }
}

std::string SelfPath() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

// The example mix: an inference service with a load generator, a training
// gang that checkpoints, a long and a short batch job and a debug session
// that sits idle.
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
      // Short, so that even a brief `--for` run shows a completion.
      {{"name", "smoke-test"}, {"kind", "batch_inference"}, {"project", "llm"},
       {"gpus_per_replica", 1}, {"replicas", 1}, {"duration_s", 10},
       {"command", {examples + "/trainer", "--steps", "30", "--step-ms", "100"}}},
      {{"name", "notebook"}, {"kind", "debug"}, {"project", "sandbox"}, {"gpus_per_replica", 1},
       {"max_runtime_s", 3600},
       {"command", {examples + "/trainer", "--idle", "--steps", "100000000"}}},
  };
}

// "90s", "2m", "1h", "500ms", or a plain number of seconds.
StatusOr<double> ParseDurationSeconds(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return InvalidArgument(fmt::format("--for '{}': expected e.g. 60s, 2m, 500ms", text));
  }
  const std::string unit = text.substr(used);
  static const std::map<std::string, double> kScale = {
      {"", 1}, {"s", 1}, {"ms", 0.001}, {"m", 60}, {"min", 60}, {"h", 3600}};
  auto it = kScale.find(unit);
  if (it == kScale.end() || value <= 0) {
    return InvalidArgument(fmt::format("--for '{}': expected a positive duration like 60s, 2m, 500ms", text));
  }
  return value * it->second;
}

// The end of a timed run: which workloads were placed (ran), which finished
// and how, every preemption with its cause and preemptor, and what still
// ran when the time was up.
void PrintSummary(const agent::LocalCluster& cluster, double elapsed_s) {
  auto list = cluster.Get("/v1/workloads");
  auto audit = cluster.Get("/v1/audit?limit=10000");
  if (!list.ok() || !audit.ok()) {
    fmt::print("tidal up: summary unavailable: {}\n",
               (!list.ok() ? list.status() : audit.status()).message());
    return;
  }
  std::map<uint64_t, json> workloads;
  for (const json& w : (*list)["workloads"]) workloads[w.value("id", uint64_t{0})] = w;
  auto name = [&](uint64_t id) {
    auto it = workloads.find(id);
    return it == workloads.end() ? fmt::format("w{}", id) : it->second.value("name", "?");
  };
  std::set<uint64_t> placed;
  std::vector<std::string> preemptions;
  for (const json& row : (*audit)["audit"]) {
    const std::string action = row.value("action", "");
    const uint64_t id = row.contains("workload") && row["workload"].is_number() ? row["workload"].get<uint64_t>() : 0;
    if (action == "place") placed.insert(id);
    if (action == "preempt" || action == "reclaim") {
      const json detail = row.value("detail", json::object());
      std::string line = fmt::format("{} (cause {}", name(id), detail.value("cause", "?"));
      if (detail.contains("preemptor") && detail["preemptor"].is_number()) {
        line += fmt::format(", for {}", name(detail["preemptor"].get<uint64_t>()));
      }
      preemptions.push_back(line + ")");
    }
  }
  std::vector<std::string> ran, finished, running;
  for (const auto& [id, w] : workloads) {
    const std::string state = w.value("state", "?");
    if (placed.count(id)) ran.push_back(fmt::format("{} ({})", name(id), w.value("kind", "?")));
    if (state == "succeeded" || state == "failed" || state == "cancelled") {
      finished.push_back(fmt::format("{} {}", name(id), state));
    }
    if (state == "running") running.push_back(name(id));
  }
  auto join = [](const std::vector<std::string>& items) {
    return items.empty() ? std::string("none") : fmt::format("{}", fmt::join(items, ", "));
  };
  fmt::print("tidal up: summary after {:.0f} s\n"
             "  ran:        {}\n"
             "  completed:  {}\n"
             "  preempted:  {}\n"
             "  running:    {}\n",
             elapsed_s, join(ran), join(finished), join(preemptions), join(running));
  std::fflush(stdout);
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
  double run_for_s = f.duration_s;
  if (!f.run_for.empty()) {
    auto parsed = ParseDurationSeconds(f.run_for);
    if (!parsed.ok()) {
      std::cerr << parsed.status().message() << "\n";
      return 2;
    }
    run_for_s = *parsed;
  }
  UpFlags load = f;
  if (run_for_s > 0 && !f.surge_set) {
    // A timed run is a demonstration: surge after a quarter of it and hold
    // to the end, so that the summary shows the service taking GPUs back.
    load.surge_at_s = run_for_s / 4;
    load.surge_for_s = run_for_s;
  }
  agent::LocalClusterOptions options;
  options.tidal_binary = SelfPath();
  options.work_dir = f.work_dir.empty() ? fmt::format("/tmp/tidal-up-{}", getpid()) : f.work_dir;
  options.nodes = agent::DefaultLocalNodes(f.nodes, f.gpus_per_node);
  options.server_port = f.port;
  options.debug_idle_limit_s = 60;
  options.ha_replicas = f.ha;
  const std::atomic<bool>& stop = agent::InstallStopSignals();

  fmt::print("tidal up: starting {} and {} agents with {} fake GPUs each in {}\n",
             f.ha > 0 ? fmt::format("{} etcd members, {} server replicas", f.ha, f.ha) : "a server", f.nodes,
             f.gpus_per_node, options.work_dir);
  std::fflush(stdout);
  auto cluster = agent::LocalCluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "tidal up: " << cluster.status().message() << "\n";
    return 1;
  }
  const std::string url = (*cluster)->url();
  // What a browser opens: the leader's address (with HA, one of the list).
  const int leader = (*cluster)->leader();
  const std::string one_url = f.ha > 0 && leader >= 0 ? (*cluster)->replica_urls()[leader] : url;
  const CliContext context{url, (*cluster)->admin_token()};
  const std::string config_path = f.no_context ? "" : WriteContext(context);
  fmt::print("tidal up: cluster ready\n"
             "  server:   {}  (what --server and TIDAL_SERVER take; the API is under /v1)\n"
             "  token:    {}  (admin)\n"
             "  dashboard: {}/  (log in with the token above)\n",
             url, context.token, one_url);
  if (!config_path.empty()) {
    fmt::print("  context:  '{}' in {} (removed on exit)\n"
               "  try:      {} list\n",
               kUpContext, config_path, options.tidal_binary);
  } else {
    fmt::print("  try:      TIDAL_SERVER={} TIDAL_TOKEN={} {} list\n", url, context.token,
               options.tidal_binary);
  }
  fmt::print("  metrics:  {}/metrics\n"
             "  logs:     {}/{}, {}/node-*/agent.log, node-*/pods/*/stdout.log\n"
             "Ctrl-C stops everything.\n",
             one_url, options.work_dir, f.ha > 0 ? "server-*.log, etcd/e*/etcd.log" : "server.log", options.work_dir);
  if (f.ha > 0) {
    for (int i = 0; i < f.ha; ++i) {
      fmt::print("  replica {}: {} pid {}{}  (log {}/server-{}.log)\n", i, (*cluster)->replica_urls()[i],
                 (*cluster)->replica_pid(i), i == leader ? " leads" : " follows", options.work_dir, i);
    }
    fmt::print("  failover: kill -9 {} (the leader); another replica leads within seconds, and the agents and\n"
               "            the CLI follow it. Every replica serves the dashboard and `tidal --stale` reads from its\n"
               "            copy of the store\n",
               leader >= 0 ? (*cluster)->replica_pid(leader) : -1);
  }
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
                   fmt::format("{}", fmt::join(dirs, ",")), "--rps", fmt::format("{}", load.load_rps),
                   "--surge-at-s", fmt::format("{}", load.surge_at_s), "--surge-rps",
                   fmt::format("{}", load.surge_rps), "--surge-for-s",
                   fmt::format("{}", load.surge_for_s)};
      spec.env = {"PATH=/usr/bin:/bin"};
      spec.stdout_path = spec.stderr_path = options.work_dir + "/loadgen.log";
      auto started = agent::PodProcess::Start(spec);
      if (started.ok()) {
        loadgen = std::move(started).value();
        fmt::print("tidal up: load generator: {} req/s, surging to {} req/s at t={}s for {}s "
                   "(log {}/loadgen.log)\n",
                   load.load_rps, load.surge_rps, load.surge_at_s, load.surge_for_s,
                   options.work_dir);
      } else {
        std::cerr << "tidal up: load generator: " << started.status().message() << "\n";
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto next_status = start;
  bool timed_out = false;
  while (!stop) {
    const auto now = std::chrono::steady_clock::now();
    if (run_for_s > 0 && now - start >= std::chrono::duration<double>(run_for_s)) {
      timed_out = true;
      break;
    }
    if (now >= next_status) {
      PrintStatus(**cluster);
      next_status = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (timed_out) {
    PrintSummary(**cluster, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  fmt::print("tidal up: stopping\n");
  std::fflush(stdout);
  // Every process group started here, directly or by an agent, to check
  // that none outlives the stop.
  std::set<pid_t> groups = {(*cluster)->server_pid()};
  for (int i = 0; i < f.ha; ++i) groups.insert((*cluster)->replica_pid(i));
  for (size_t i = 0; i < options.nodes.size(); ++i) groups.insert((*cluster)->agent_pid(i));
  for (const json& pod : (*cluster)->LocalPods()) groups.insert(pod.value("pid", -1));
  if (loadgen) {
    groups.insert(loadgen->pid());
    loadgen->SignalGroup(SIGTERM);
    loadgen.reset();
  }
  if (!config_path.empty()) RemoveContext(config_path, context);
  (*cluster)->Stop();
  std::vector<pid_t> left;
  for (pid_t g : groups) {
    if (g <= 0) continue;
    for (int i = 0; i < 100 && agent::ProcessGroupAlive(g); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (agent::ProcessGroupAlive(g)) left.push_back(g);
  }
  if (!left.empty()) {
    fmt::print("tidal up: stopped, but process groups {} are still alive\n", fmt::join(left, ", "));
    return 1;
  }
  fmt::print("tidal up: stopped; none of the {} process groups it started is left\n",
             groups.size() - groups.count(-1));
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
  cmd->add_option("--ha", flags->ha,
                  "High availability: start N etcd members and N server replicas on them (2 to 7; needs "
                  "Debian's etcd-server), so that killing the leader shows a failover")
      ->check(CLI::Range(2, 7));
  cmd->add_flag("--no-context", flags->no_context,
                "Leave the CLI config alone (by default a context 'up' points plain `tidal` commands "
                "at this cluster while it runs)");
  cmd->add_option("--for", flags->run_for,
                  "Run this long (60s, 2m, 500ms), print a summary and stop (default: until Ctrl-C)");
  cmd->add_option("--duration-s", flags->duration_s, "Like --for, in seconds, no summary")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--load-rps", flags->load_rps, "Inference load")->capture_default_str();
  cmd->add_option("--surge-rps", flags->surge_rps, "Inference load during the surge")
      ->capture_default_str();
  cmd->add_option("--surge-at-s", flags->surge_at_s,
                  "When the surge starts (with --for: a quarter into the run)")
      ->capture_default_str();
  cmd->add_option("--surge-for-s", flags->surge_for_s, "How long it lasts")->capture_default_str();
  cmd->callback([flags, cmd] {
    flags->surge_set = cmd->count("--surge-at-s") + cmd->count("--surge-for-s") > 0;
    ExitCode() = RunUp(*flags);
  });
});

}  // namespace
}  // namespace tidal::cli
