// Helpers for the agent load tools in bench/: start `tidal server` /
// `tidal agent` as child processes and read a process's CPU time and memory
// from /proc. (The bench binaries do not link the agent library.)
#ifndef TIDAL_BENCH_AGENT_BENCH_UTIL_H_
#define TIDAL_BENCH_AGENT_BENCH_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <httplib.h>

extern char** environ;

namespace tidal::bench {

// The value of an unlabelled metric on the server's /metrics (0 if absent).
inline double Scrape(int port, const std::string& metric) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r) return 0;
  const size_t at = r->body.find("\n" + metric + " ");
  return at == std::string::npos ? 0 : std::atof(r->body.c_str() + at + metric.size() + 2);
}

inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Starts argv with stdout+stderr appended to `log`; extra env on top of ours.
inline pid_t Spawn(const std::vector<std::string>& args, const std::string& log,
                   const std::vector<std::string>& extra_env = {}) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

inline void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 300; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

inline bool WaitReady(int port, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/readyz");
    if (res && res->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// User + system CPU seconds of a live process.
inline double CpuSeconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i >= 14) ticks += std::stod(f);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A field of /proc/PID/status in KiB ("VmRSS", "VmHWM").
inline long StatusKib(pid_t pid, const std::string& key) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// A server config with one admin and one agent token, on `port`.
inline void WriteServerConfig(const std::string& dir, int port, const std::string& admin,
                              const std::string& agent_token, double lease_s,
                              double heartbeat_s) {
  std::ofstream(dir + "/server.yaml")
      << fmt::format("listen: 127.0.0.1:{}\nstore: sqlite:{}/tidal.db\nnode_lease_s: {}\n"
                     "heartbeat_interval_s: {}\nhttp_threads: 64\ntokens:\n"
                     "  - {{name: admin, role: admin, token: \"{}\"}}\n"
                     "  - {{name: agents, role: agent, token: \"{}\"}}\n",
                     port, dir, lease_s, heartbeat_s, admin, agent_token);
}

// The build directory: bench binaries live in BUILD/bench/, `tidal` in BUILD/.
inline std::filesystem::path BuildDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path();
}

struct BenchServer {
  pid_t pid = -1;
  int port = 0;
  std::filesystem::path dir;  // config, store and logs
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port); }
};

// Starts `tidal server` in a fresh TMPDIR/<name>_<pid> with tokens
// "admin-token" and "agent-token", the given lease and heartbeat period,
// `extra_yaml` appended to server.yaml and `cluster_yaml` as its cluster
// file; waits until it is ready. nullopt (with a message) if it is not.
inline std::optional<BenchServer> StartBenchServer(const std::string& tidal,
                                                   const std::string& name, double lease_s,
                                                   double heartbeat_s,
                                                   const std::string& extra_yaml,
                                                   const std::string& cluster_yaml) {
  BenchServer s;
  s.dir = std::filesystem::temp_directory_path() / fmt::format("{}_{}", name, getpid());
  std::filesystem::create_directories(s.dir);
  s.port = FreePort();
  WriteServerConfig(s.dir.string(), s.port, "admin-token", "agent-token", lease_s, heartbeat_s);
  std::ofstream(s.dir / "server.yaml", std::ios::app) << "cluster_file: cluster.yaml\n" << extra_yaml;
  std::ofstream(s.dir / "cluster.yaml") << cluster_yaml;
  s.pid = Spawn({tidal, "server", "--config", (s.dir / "server.yaml").string()},
                (s.dir / "server.log").string());
  if (!WaitReady(s.port, 30)) {
    fmt::print(stderr, "server did not start; see {}\n", (s.dir / "server.log").string());
    Stop(s.pid);
    return std::nullopt;
  }
  return s;
}

}  // namespace tidal::bench

#endif  // TIDAL_BENCH_AGENT_BENCH_UTIL_H_
