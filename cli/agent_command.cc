// `tidal agent`: the node agent (agent/agent.h), or with --probe a one-shot
// GPU inventory.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "agent/agent.h"
#include "agent/control_plane.h"
#include "agent/gpu_probe.h"
#include "agent/pod_user.h"
#include "agent/stop_signals.h"
#include "agent/token_source.h"
#include "cli/command_registry.h"

namespace tidal::cli {
namespace {

struct AgentFlags {
  agent::AgentConfig config;
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  std::string token_file;
  std::string ca_file;
  std::string run_as;
  bool allow_root_pods = false;
  std::string gpus = "nvml";
  bool probe = false;
  std::vector<std::string> labels;
  std::vector<std::string> taints;
  int tick_ms = 100;
  int sync_interval_ms = 0;
  int sample_interval_ms = 5000;
  double log_max_mib = 16;
  double log_rate_kib = 1024;
  double default_grace_s = 10;
  double shutdown_grace_s = 10;
  double orphan_timeout_s = 0;
  bool keep_pods = false;
};

bool SplitKeyValue(const std::string& text, std::string& key, std::string& value) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  key = text.substr(0, eq);
  value = text.substr(eq + 1);
  return true;
}

int RunAgent(AgentFlags& f) {
  auto probe = agent::MakeGpuProbe(f.gpus, f.config.work_dir);
  if (!probe.ok()) {
    std::cerr << probe.status().message() << "\n";
    return 1;
  }
  if (f.probe) {
    auto inventory = (*probe)->Inventory();
    if (!inventory.ok()) {
      std::cerr << inventory.status().message() << "\n";
      return 1;
    }
    std::cout << agent::FormatInventory(*inventory);
    for (const agent::GpuFault& fault : (*probe)->PollFaults()) {
      std::cout << fmt::format("  fault: gpu {} {} {}\n", fault.gpu_index,
                               agent::GpuFaultKindName(fault.kind), fault.code);
    }
    return 0;
  }
  // Taken out of the environment whatever else gives the token: pods run
  // as the agent's user could read it from /proc/PID/environ.
  std::optional<std::string> env_token = agent::TakeEnvToken("TIDAL_TOKEN");
  if (!f.token_file.empty()) {
    auto token = agent::ReadTokenFile(f.token_file);
    if (!token.ok()) {
      std::cerr << token.status().message() << "\n";
      return 2;
    }
    f.token = *token;
  } else if (f.token.empty() && env_token) {
    f.token = *env_token;
  }
  if (f.token.empty()) {
    std::cerr << "--token-file: required (or --token, or TIDAL_TOKEN)\n";
    return 2;
  }
  auto pod_user = agent::ChoosePodUser(geteuid(), f.run_as, f.allow_root_pods);
  if (!pod_user.ok()) {
    std::cerr << pod_user.status().message() << "\n";
    return 2;
  }
  f.config.pod_user = *pod_user;
  for (const std::string& l : f.labels) {
    std::string k, v;
    if (!SplitKeyValue(l, k, v)) {
      std::cerr << fmt::format("--label '{}': expected KEY=VALUE\n", l);
      return 2;
    }
    f.config.labels[k] = v;
  }
  for (const std::string& t : f.taints) {
    std::string k, v;
    if (!SplitKeyValue(t, k, v)) {
      std::cerr << fmt::format("--taint '{}': expected KEY=VALUE\n", t);
      return 2;
    }
    f.config.taints.push_back({k, v});
  }
  f.config.sync_interval = milliseconds(f.sync_interval_ms);
  f.config.sample_interval = milliseconds(f.sample_interval_ms);
  f.config.log_max_bytes = static_cast<int64_t>(f.log_max_mib * (1 << 20));
  f.config.log_rate_bytes_per_s = f.log_rate_kib * 1024;
  f.config.log_burst_bytes = std::max(f.config.log_rate_bytes_per_s * 4, 64.0 * 1024);
  f.config.default_grace = SecondsF(f.default_grace_s);
  f.config.orphan_timeout = SecondsF(f.orphan_timeout_s);
  auto server = agent::MakeHttpControlPlane(f.server, f.token, seconds(5), f.config.work_dir + "/node.credential",
                                            f.ca_file);
  if (!server.ok()) {
    std::cerr << server.status().message() << "\n";
    return 2;
  }

  const std::atomic<bool>& stop = agent::InstallStopSignals();
  agent::Agent node(f.config, **probe, **server);
  // An unreachable server (tidal up starts both at once) is retried by the
  // sync loop; pods left by an earlier agent are adopted here.
  Status started = node.Start(agent::WallClockMs());
  if (!started.ok()) {
    std::cerr << fmt::format("agent {}: {}\n", f.config.name, started.message());
    node.Detach();  // adopted pods wait (orphan timeout) for a correctly started agent
    return 1;
  }
  fmt::print(stderr, "agent {}: started against {} ({} GPUs), work dir {}\n", f.config.name,
             f.server, node.inventory().gpus.size(), f.config.work_dir);
  node.Run([&stop] { return stop.load(); }, std::chrono::milliseconds(f.tick_ms));
  if (f.keep_pods) {
    fmt::print(stderr, "agent {}: leaving pods to the next agent\n", f.config.name);
    node.Detach();
    return 0;
  }
  fmt::print(stderr, "agent {}: stopping pods\n", f.config.name);
  node.Shutdown(SecondsF(f.shutdown_grace_s));
  return 0;
}

RegisterCommand reg([](CLI::App& root) {
  auto flags = std::make_shared<AgentFlags>();
  CLI::App* cmd = root.add_subcommand("agent", "Run the node agent (or --probe the GPUs)");
  cmd->add_option("--server", flags->server,
                  "Control plane URL, or a comma-separated list of the replicas' URLs (the agent follows "
                  "the leader)")
      ->capture_default_str();
  cmd->add_option("--ca-file", flags->ca_file,
                  "PEM CA certificate(s) every https:// --server's certificate must chain to "
                  "(default: the system's CAs)");
  cmd->add_option("--token-file", flags->token_file,
                  "File holding the bootstrap (agent) token; mode 0600 (default: $TIDAL_TOKEN)");
  cmd->add_option("--token", flags->token,
                  "Bootstrap token on the command line (ps shows it: prefer --token-file)");
  cmd->add_option("--run-as", flags->run_as,
                  "Unprivileged user pods run as (required when the agent runs as root)");
  cmd->add_flag("--allow-root-pods", flags->allow_root_pods,
                "Let an agent running as root run pods as root (they can read its credential)");
  cmd->add_option("--name", flags->config.name, "Node name (default: host name)");
  cmd->add_option("--gpus", flags->gpus, "nvml, or fake:SPEC (e.g. fake:4xH100-80GB,nvlink=2x2)")
      ->capture_default_str();
  cmd->add_option("--work-dir", flags->config.work_dir, "Pod logs, notice files, pods.json");
  cmd->add_option("--checkpoint-root", flags->config.checkpoint_root,
                  "Shared checkpoint storage (default: WORK_DIR/checkpoints)");
  cmd->add_flag("--probe", flags->probe, "Print the GPU inventory and exit");
  cmd->add_option("--address", flags->config.address, "Address peers use (MASTER_ADDR)")
      ->capture_default_str();
  cmd->add_option("--pool", flags->config.pool, "Pool; must match the cluster file (checked by the server)");
  cmd->add_option("--rack", flags->config.rack, "Rack");
  cmd->add_option("--zone", flags->config.zone, "Zone");
  cmd->add_option("--label", flags->labels, "Node label KEY=VALUE (repeatable; must match the cluster file)");
  cmd->add_option("--taint", flags->taints, "Node taint KEY=VALUE (repeatable; must match the cluster file)");
  cmd->add_option("--max-concurrent-starts", flags->config.max_concurrent_starts,
                  "Pods in a start phase (model load) at once")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--log-max-mib", flags->log_max_mib, "Log file size before rotation")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--log-max-files", flags->config.log_max_files, "Rotated log files kept")
      ->capture_default_str()->check(CLI::Range(0, 100));
  cmd->add_option("--log-rate-kib", flags->log_rate_kib, "Per-pod log write cap, KiB/s (0 = none)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--tick-ms", flags->tick_ms, "Agent loop period")
      ->capture_default_str()->check(CLI::Range(10, 10000));
  cmd->add_option("--sync-interval-ms", flags->sync_interval_ms,
                  "Heartbeat period (0 = the server's)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--sample-interval-ms", flags->sample_interval_ms, "GPU sampling period")
      ->capture_default_str()->check(CLI::Range(100, 600000));
  cmd->add_option("--default-grace-s", flags->default_grace_s,
                  "Grace for pods the server stopped listing")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--shutdown-grace-s", flags->shutdown_grace_s, "Grace for pods at agent exit")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--keep-pods", flags->keep_pods,
                "On SIGTERM/SIGINT leave pods running for a restarted agent to adopt");
  cmd->add_option("--orphan-timeout-s", flags->orphan_timeout_s,
                  "How long pods outlive a dead agent (0 = half the server's lease)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->callback([flags] {
    if (flags->config.name.empty()) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      // Node names are DNS-1123 subdomains (lowercase); host names are not
      // case-sensitive, so "GPU-Node1" registers as "gpu-node1".
      std::string name = host;
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      flags->config.name = name;
    }
    if (flags->config.work_dir.empty()) {
      flags->config.work_dir = fmt::format("/tmp/tidal-agent-{}", flags->config.name);
    }
    ExitCode() = RunAgent(*flags);
  });
});

}  // namespace
}  // namespace tidal::cli
