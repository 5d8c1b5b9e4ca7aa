// One pod as one process group: started with fork + execve (argv as given,
// never through a shell), stdout and stderr copied by a pump thread into
// size-rotated log files at a capped rate (a token bucket per pod; output
// beyond the cap is dropped and the drop is noted in the log, so a chatty pod
// cannot fill the node's disk or starve its neighbours' I/O).
//
// So that a pod can outlive its agent and be adopted by the next one (same
// work dir), nothing the pod needs lives in the agent process:
//  - a small keeper process (forked from the agent, never exec'd, only
//    async-signal-safe calls) leads the group, forks the workload, waits for
//    it and writes its exit status to a file: a restarted agent is not the
//    workload's parent and could not learn the status otherwise. The keeper
//    blocks every signal, so a group signal reaches the workload only;
//  - stdout and stderr are named pipes (FIFOs) next to the logs; the workload
//    holds them open read-write, so while no agent reads, it blocks on a full
//    pipe instead of dying of SIGPIPE, and a new agent's pump continues;
//  - a pod must not run on without any agent (its node is declared lost and
//    its gang restarted elsewhere: it would be a duplicate rank). The keeper
//    SIGKILLs the group when the agent's lease file has not been touched for
//    `orphan_timeout_ms`, or, without a lease file, as soon as the process
//    that started it dies.
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
  // false: the pod runs on whatever happens to its agent (tests only).
  bool die_with_agent = true;
  // "": the pod dies with the process that started it. Else a file the agent
  // touches while it lives; the pod dies once it is older than the timeout.
  std::string lease_path;
  int64_t orphan_timeout_ms = 15000;
  // >= 0: the workload (not its keeper) drops to this user before execve:
  // setgroups, setgid, setuid, in that order; a failure fails the start.
  int run_as_uid = -1;
  int run_as_gid = -1;
  std::vector<gid_t> run_as_groups;
};

// Files next to the logs that let a process be adopted: the FIFOs it writes
// to and the exit status its keeper leaves.
struct ProcessFiles {
  std::string stdout_fifo, stderr_fifo, exit_status;
};
ProcessFiles ProcessFilesFor(const ProcessSpec& spec);

struct ExitStatus {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // the signal that killed it, or 0
  bool success() const { return term_signal == 0 && exit_code == 0; }
  std::string Describe() const;  // "exited with code 3", "killed by SIGKILL"
};

class PodProcess {
 public:
  static StatusOr<std::unique_ptr<PodProcess>> Start(const ProcessSpec& spec);
  // Takes over a process group an earlier agent started from `spec` (its log
  // files and limits): resumes pumping its logs. A group that has gone (or
  // whose pid now names another process: its start time differs) is
  // adopted as exited.
  static StatusOr<std::unique_ptr<PodProcess>> Adopt(const ProcessSpec& spec, pid_t pgid,
                                                     pid_t workload_pid, uint64_t start_ticks);
  // Kills the whole process group if it still runs (unless detached), reaps
  // it and stops the log pump.
  ~PodProcess();
  PodProcess(const PodProcess&) = delete;
  PodProcess& operator=(const PodProcess&) = delete;

  pid_t pid() const { return pid_; }  // the keeper: the process group id
  pid_t workload_pid() const { return workload_pid_; }
  // The keeper's start time (clock ticks since boot): with the pid, it names
  // the process even after the pid is reused.
  uint64_t start_ticks() const { return start_ticks_; }
  // Leaves the group running for a later agent to adopt; stops the pump.
  void Detach() { detached_ = true; }
  // The exit status once the leader has exited; never blocks.
  std::optional<ExitStatus> Poll();
  ExitStatus Wait();
  // Signals every process in the group; false once the group is gone.
  bool SignalGroup(int sig);
  // Whether any process of the group is still alive (the leader may have
  // exited while children it started run on).
  bool GroupAlive() const;
  // User + system CPU seconds of the workload and its reaped children.
  double CpuSeconds() const;
  int64_t dropped_log_bytes() const { return dropped_bytes_.load(); }

 private:
  PodProcess() = default;
  void StartPump(int out_fd, int err_fd, const ProcessSpec& spec);
  void Pump(int out_fd, int err_fd, const ProcessSpec& spec);
  // Reaps the keeper (blocking or not) or, for an adopted group, sees that
  // it is gone; the status is what the keeper wrote.
  std::optional<ExitStatus> Reap(bool block);

  pid_t pid_ = -1;
  pid_t workload_pid_ = -1;
  uint64_t start_ticks_ = 0;
  std::string exit_status_path_;
  bool detached_ = false;
  std::optional<ExitStatus> exit_;
  int stop_fd_[2] = {-1, -1};  // closing [1] stops the pump
  std::thread pump_;
  std::atomic<int64_t> dropped_bytes_{0};
};

// Whether any process of group `pgid` is alive (zombies do not count).
bool ProcessGroupAlive(pid_t pgid);
// Field 22 of /proc/PID/stat (start time in clock ticks); 0 if `pid` is gone
// or a zombie.
uint64_t ProcessStartTicks(pid_t pid);

// "/usr/bin/sleep" for "sleep" under PATH; absolute/relative paths unchanged.
StatusOr<std::string> ResolveExecutable(const std::string& name, const std::string& path_var);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_PROCESS_H_
