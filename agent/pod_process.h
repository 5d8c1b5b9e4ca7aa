// One pod as one process: started with fork + execve (argv as given, never
// through a shell), leader of its own process group so that a signal reaches
// everything it started, stdout and stderr copied by a pump thread into
// size-rotated log files at a capped rate (a token bucket per pod; output
// beyond the cap is dropped and the drop is noted in the log, so a chatty pod
// cannot fill the node's disk or starve its neighbours' I/O).
#ifndef TIDAL_AGENT_POD_PROCESS_H_
#define TIDAL_AGENT_POD_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/common/status.h"

namespace tidal::agent {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] without '/' is looked up in PATH
  std::vector<std::string> env;   // the whole environment, "KEY=VALUE"
  std::string work_dir;           // "" = the agent's
  std::string stdout_path;
  std::string stderr_path;
  int64_t log_max_bytes = 16 << 20;  // per file before rotation
  int log_max_files = 3;             // rotated files kept per stream
  double log_rate_bytes_per_s = 1 << 20;  // <= 0: unlimited
  double log_burst_bytes = 4 << 20;
  // SIGKILL the pod when the agent dies: a node whose agent is gone is
  // declared lost and its pods are restarted elsewhere, and a survivor here
  // would be a duplicate gang rank.
  bool die_with_agent = true;
};

struct ExitStatus {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // the signal that killed it, or 0
  bool success() const { return term_signal == 0 && exit_code == 0; }
  std::string Describe() const;  // "exited with code 3", "killed by SIGKILL"
};

class PodProcess {
 public:
  static StatusOr<std::unique_ptr<PodProcess>> Start(const ProcessSpec& spec);
  // Kills the whole process group if it still runs, reaps it and stops the
  // log pump.
  ~PodProcess();
  PodProcess(const PodProcess&) = delete;
  PodProcess& operator=(const PodProcess&) = delete;

  pid_t pid() const { return pid_; }  // also the process group id
  // The exit status once the leader has exited; never blocks.
  std::optional<ExitStatus> Poll();
  ExitStatus Wait();
  // Signals every process in the group; false once the group is gone.
  bool SignalGroup(int sig);
  // Whether any process of the group is still alive (the leader may have
  // exited while children it started run on).
  bool GroupAlive() const;
  // User + system CPU seconds of the leader and its reaped children.
  double CpuSeconds() const;
  int64_t dropped_log_bytes() const { return dropped_bytes_.load(); }

 private:
  PodProcess() = default;
  void Pump(int out_fd, int err_fd, const ProcessSpec& spec);

  pid_t pid_ = -1;
  std::optional<ExitStatus> exit_;
  int stop_fd_[2] = {-1, -1};  // closing [1] stops the pump
  std::thread pump_;
  std::atomic<int64_t> dropped_bytes_{0};
};

// Whether any process of group `pgid` is alive (zombies do not count).
bool ProcessGroupAlive(pid_t pgid);

// "/usr/bin/sleep" for "sleep" under PATH; absolute/relative paths unchanged.
StatusOr<std::string> ResolveExecutable(const std::string& name, const std::string& path_var);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_PROCESS_H_
