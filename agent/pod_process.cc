#include "agent/pod_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <cstring>
#include <chrono>
#include <thread>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "agent/rotating_log.h"
#include "agent/token_bucket.h"

namespace tidal::agent {
namespace {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::string ExitStatus::Describe() const {
  if (term_signal != 0) return fmt::format("killed by {}", SignalName(term_signal));
  return fmt::format("exited with code {}", exit_code);
}

StatusOr<std::string> ResolveExecutable(const std::string& name, const std::string& path_var) {
  if (name.empty()) return InvalidArgument("command: argv[0] is empty");
  if (name.find('/') != std::string::npos) return name;
  std::stringstream dirs(path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFound(fmt::format("command: '{}' not found in PATH", name));
}

ProcessFiles ProcessFilesFor(const ProcessSpec& spec) {
  // Both streams into one file (stderr_path == stdout_path) share one FIFO.
  return {spec.stdout_path + ".fifo", spec.stderr_path + ".fifo", spec.stdout_path + ".exit"};
}

namespace {

// What the keeper and the workload tell the agent through the start pipe;
// one write each, atomic on a pipe.
struct StartMessage {
  enum Kind : int32_t { kWorkloadPid = 1, kExecErrno = 2 };
  int32_t kind;
  int32_t value;
};

// Async-signal-safe: the keeper runs in a fork of a threaded process.
void KeeperWriteExit(const char* path, const char* tmp_path, int wait_status) {
  char text[32];
  const char* word = WIFSIGNALED(wait_status) ? "signal " : "exit ";
  int value = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
  size_t n = 0;
  for (const char* w = word; *w != '\0'; ++w) text[n++] = *w;
  char digits[12];
  size_t d = 0;
  do {
    digits[d++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  while (d > 0) text[n++] = digits[--d];
  text[n++] = '\n';
  const int fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t ignored = write(fd, text, n);
  (void)ignored;
  close(fd);
  rename(tmp_path, path);
}

int64_t RealtimeMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

std::optional<ExitStatus> ReadExitFile(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  int value = 0;
  if (!(in >> word >> value)) return std::nullopt;
  ExitStatus s;
  if (word == "signal") {
    s.term_signal = value;
  } else {
    s.exit_code = value;
  }
  return s;
}

// Opens a FIFO for reading without waiting for a writer, then makes reads
// blocking again (the pump polls first).
int OpenFifoForReading(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<PodProcess>> PodProcess::Start(const ProcessSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("command: argv is empty");
  std::string path_var;
  for (const std::string& kv : spec.env) {
    if (kv.starts_with("PATH=")) path_var = kv.substr(5);
  }
  TIDAL_ASSIGN_OR_RETURN(std::string exe, ResolveExecutable(spec.argv[0], path_var));

  // Everything the keeper and the workload touch is built before fork:
  // between fork and execve only async-signal-safe calls are allowed (the
  // agent has threads).
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const ProcessFiles files = ProcessFilesFor(spec);
  const std::string exit_tmp = files.exit_status + ".tmp";
  for (const std::string& f : {files.stdout_fifo, files.stderr_fifo, files.exit_status}) {
    unlink(f.c_str());
  }
  // The workload's end of each FIFO is opened read-write: it then always
  // has a reader (itself), so it never gets SIGPIPE while no agent reads.
  int fifo_read[2] = {-1, -1}, fifo_write[2] = {-1, -1};
  const std::string* fifo_paths[2] = {&files.stdout_fifo, &files.stderr_fifo};
  auto close_fifos = [&] {
    for (int* fds : {fifo_read, fifo_write}) {
      for (int i = 0; i < 2; ++i) CloseFd(fds[i]);
    }
  };
  const bool shared_fifo = files.stdout_fifo == files.stderr_fifo;
  for (int i = 0; i < (shared_fifo ? 1 : 2); ++i) {
    if (mkfifo(fifo_paths[i]->c_str(), 0600) != 0) {
      const int err = errno;
      close_fifos();
      return Internal(fmt::format("mkfifo {}: {}", *fifo_paths[i], strerror(err)));
    }
    fifo_read[i] = OpenFifoForReading(*fifo_paths[i]);
    fifo_write[i] = open(fifo_paths[i]->c_str(), O_RDWR | O_CLOEXEC);
    if (fifo_read[i] < 0 || fifo_write[i] < 0) {
      const int err = errno;
      close_fifos();
      return Internal(fmt::format("open {}: {}", *fifo_paths[i], strerror(err)));
    }
  }
  if (shared_fifo) fifo_write[1] = fcntl(fifo_write[0], F_DUPFD_CLOEXEC, 0);
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    close_fifos();
    return Internal(fmt::format("pipe: {}", strerror(errno)));
  }
  const int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const char* work_dir = spec.work_dir.empty() ? nullptr : spec.work_dir.c_str();
  const bool watch_parent = spec.die_with_agent && spec.lease_path.empty();
  const char* lease_path =
      spec.die_with_agent && !spec.lease_path.empty() ? spec.lease_path.c_str() : nullptr;
  const int64_t orphan_timeout_ms = spec.orphan_timeout_ms;
  const int run_as_uid = spec.run_as_uid;
  const int run_as_gid = spec.run_as_gid;
  const std::vector<gid_t>& run_as_groups = spec.run_as_groups;

  const pid_t pid = fork();
  if (pid == 0) {
    // The keeper. It ignores every signal but SIGKILL, so that a signal to
    // the group is the workload's to handle.
    setpgid(0, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    if (watch_parent && getppid() != parent) _exit(127);  // the agent is already gone
    if (dev_null >= 0) dup2(dev_null, STDIN_FILENO);
    dup2(fifo_write[0], STDOUT_FILENO);
    dup2(fifo_write[1], STDERR_FILENO);
    // Every inherited descriptor (the agent's sockets, other pods' pipes)
    // must close in the workload; the keeper closes them itself below.
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    const pid_t workload = _Fork();
    if (workload == 0) {
      for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
      sigset_t empty;
      sigemptyset(&empty);
      sigprocmask(SIG_SETMASK, &empty, nullptr);
      int err = 0;
      // Groups before the uid: once it is not root, it may change neither.
      if (run_as_uid >= 0 &&
          (setgroups(run_as_groups.size(), run_as_groups.data()) != 0 ||
           setgid(static_cast<gid_t>(run_as_gid)) != 0 || setuid(static_cast<uid_t>(run_as_uid)) != 0)) {
        err = errno;
      } else if (work_dir != nullptr && chdir(work_dir) != 0) {
        err = errno;
      } else {
        execve(exe.c_str(), argv.data(), envp.data());
        err = errno;
      }
      const StartMessage failed = {StartMessage::kExecErrno, err};
      ssize_t ignored = write(exec_pipe[1], &failed, sizeof(failed));
      (void)ignored;
      _exit(127);
    }
    const StartMessage started = {StartMessage::kWorkloadPid, workload > 0 ? workload : -errno};
    ssize_t ignored = write(exec_pipe[1], &started, sizeof(started));
    (void)ignored;
    close_range(0, ~0U, 0);
    if (workload < 0) _exit(127);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    const timespec tick = {0, 500 * 1000 * 1000};  // exits wake it at once (SIGCHLD)
    int64_t lease_seen_ms = RealtimeMs();
    while (true) {
      int status = 0;
      const pid_t r = waitpid(workload, &status, WNOHANG);
      if (r == workload) {
        KeeperWriteExit(files.exit_status.c_str(), exit_tmp.c_str(), status);
        _exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
      }
      if (watch_parent && getppid() != parent) kill(0, SIGKILL);
      if (lease_path != nullptr) {
        struct stat st {};
        if (stat(lease_path, &st) == 0) {
          const int64_t touched_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
          if (touched_ms > lease_seen_ms) lease_seen_ms = touched_ms;
        }
        if (RealtimeMs() - lease_seen_ms > orphan_timeout_ms) kill(0, SIGKILL);
      }
      sigtimedwait(&chld, nullptr, &tick);
    }
  }
  const int fork_errno = errno;
  if (dev_null >= 0) close(dev_null);
  CloseFd(fifo_write[0]);
  CloseFd(fifo_write[1]);
  close(exec_pipe[1]);
  if (pid < 0) {
    close_fifos();
    close(exec_pipe[0]);
    return Internal(fmt::format("fork: {}", strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also in the parent, so the group exists before we signal it

  // The keeper sends the workload's pid (or -errno of its fork), the
  // workload execve's errno if that fails, in either order; EOF comes once
  // the keeper has written and execve succeeded.
  int32_t workload_pid = 0, child_errno = 0;
  StartMessage message;
  ssize_t n;
  while (true) {
    n = read(exec_pipe[0], &message, sizeof(message));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(message))) break;
    if (message.kind == StartMessage::kWorkloadPid) workload_pid = message.value;
    if (message.kind == StartMessage::kExecErrno) child_errno = message.value;
  }
  close(exec_pipe[0]);
  if (workload_pid <= 0 || child_errno != 0) {
    waitpid(pid, nullptr, 0);
    close_fifos();
    if (workload_pid == 0) return Internal("start: the keeper process exited early");
    if (workload_pid < 0) return Internal(fmt::format("fork: {}", strerror(-workload_pid)));
    return FailedPrecondition(fmt::format("{} {}: {}", work_dir && child_errno == ENOENT &&
                                                               access(work_dir, F_OK) != 0
                                                           ? "chdir"
                                                           : "execve",
                                          exe, strerror(child_errno)));
  }

  std::unique_ptr<PodProcess> proc(new PodProcess());
  proc->pid_ = pid;
  proc->workload_pid_ = workload_pid;
  proc->start_ticks_ = ProcessStartTicks(pid);
  proc->exit_status_path_ = files.exit_status;
  proc->StartPump(fifo_read[0], fifo_read[1], spec);
  return proc;
}

StatusOr<std::unique_ptr<PodProcess>> PodProcess::Adopt(const ProcessSpec& spec, pid_t pgid,
                                                        pid_t workload_pid,
                                                        uint64_t start_ticks) {
  // A group that is gone is adopted too: its exit (from the keeper's file,
  // else SIGKILL) is still the server's to hear.
  const ProcessFiles files = ProcessFilesFor(spec);
  if (pgid <= 0 || start_ticks == 0) return InvalidArgument("adopt: no process group");
  std::unique_ptr<PodProcess> proc(new PodProcess());
  proc->pid_ = pgid;
  proc->workload_pid_ = workload_pid;
  proc->start_ticks_ = start_ticks;
  proc->exit_status_path_ = files.exit_status;
  proc->StartPump(OpenFifoForReading(files.stdout_fifo),
                  files.stderr_fifo == files.stdout_fifo ? -1 : OpenFifoForReading(files.stderr_fifo),
                  spec);
  return proc;
}

void PodProcess::StartPump(int out_fd, int err_fd, const ProcessSpec& spec) {
  if (pipe2(stop_fd_, O_CLOEXEC) != 0) stop_fd_[0] = stop_fd_[1] = -1;
  pump_ = std::thread([this, out_fd, err_fd, spec] { Pump(out_fd, err_fd, spec); });
}

void PodProcess::Pump(int out_fd, int err_fd, const ProcessSpec& spec) {
  RotatingLog out_log(spec.stdout_path, spec.log_max_bytes, spec.log_max_files);
  RotatingLog err_log(spec.stderr_path, spec.log_max_bytes, spec.log_max_files);
  // One bucket for both streams: the cap is on the pod, not per stream.
  TokenBucket bucket(spec.log_rate_bytes_per_s, spec.log_burst_bytes,
                     TokenBucket::Clock::now());
  int64_t dropping = 0;  // bytes dropped since the last note in the log
  std::vector<char> buf(64 << 10);
  int fds[2] = {out_fd, err_fd};
  RotatingLog* logs[2] = {&out_log, &err_log};
  // Once the owner asks to stop, drain what is already buffered, then quit
  // even if some process outside the group still holds a pipe open.
  bool stopping = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd pfds[3];
    for (int i = 0; i < 2; ++i) pfds[i] = {fds[i], POLLIN, 0};
    pfds[2] = {stopping ? -1 : stop_fd_[0], POLLIN, 0};
    const int ready = poll(pfds, 3, stopping ? 0 : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0 && stopping) break;
    if (pfds[2].revents != 0) stopping = true;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || pfds[i].revents == 0) continue;
      const ssize_t n = read(fds[i], buf.data(), buf.size());
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        CloseFd(fds[i]);
        continue;
      }
      const int64_t granted = bucket.Take(n, TokenBucket::Clock::now());
      if (granted > 0 && dropping > 0) {
        logs[i]->Write(fmt::format("[tidal] log rate limit: dropped {} bytes\n", dropping)).ok();
        dropping = 0;
      }
      if (granted > 0) logs[i]->Write(std::string_view(buf.data(), granted)).ok();
      if (granted < n) {
        dropping += n - granted;
        dropped_bytes_ += n - granted;
      }
    }
  }
  if (dropping > 0) {
    out_log.Write(fmt::format("[tidal] log rate limit: dropped {} bytes\n", dropping)).ok();
  }
  for (int& fd : fds) CloseFd(fd);
}

std::optional<ExitStatus> PodProcess::Reap(bool block) {
  while (!exit_) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, block ? 0 : WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return std::nullopt;  // our child, still running
    if (r == pid_) {
      // The keeper mirrors the workload's status in its own; the file also
      // tells an exit code of 137 from death by SIGKILL.
      exit_ = ReadExitFile(exit_status_path_);
      if (!exit_) {
        exit_ = WIFSIGNALED(status) ? ExitStatus{-1, WTERMSIG(status)}
                                    : ExitStatus{WEXITSTATUS(status), 0};
      }
      break;
    }
    // Not our child: adopted from an earlier agent.
    if (ProcessStartTicks(pid_) == start_ticks_) {
      if (!block) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    // A keeper leaves no status only when it was SIGKILLed with its group.
    exit_ = ReadExitFile(exit_status_path_).value_or(ExitStatus{-1, SIGKILL});
  }
  return exit_;
}

std::optional<ExitStatus> PodProcess::Poll() { return Reap(/*block=*/false); }

ExitStatus PodProcess::Wait() { return *Reap(/*block=*/true); }

bool PodProcess::SignalGroup(int sig) { return killpg(pid_, sig) == 0; }

bool PodProcess::GroupAlive() const { return ProcessGroupAlive(pid_); }

namespace {

// True if /proc/<pid>/stat (`stat_path`) shows a live process (not a
// zombie) in process group `pgid`.
bool LiveMemberOf(const std::filesystem::path& stat_path, pid_t pgid) {
  std::ifstream in(stat_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return false;
  std::istringstream fields(text.substr(close_paren + 2));
  std::string state, ppid, pgrp;
  fields >> state >> ppid >> pgrp;
  return state != "Z" && state != "X" && pgrp == std::to_string(pgid);
}

}  // namespace

bool ProcessGroupAlive(pid_t pgid) {
  if (killpg(pgid, 0) != 0 && errno != EPERM) return false;
  // killpg also finds zombies, which wait for whoever reaps orphans (PID 1,
  // slow or absent in some containers); a zombie runs nothing, so look for a
  // member that is not one. The leader first: while it lives, one read
  // answers, where a walk of /proc reads every process's stat (with 256
  // local agents and their pods, a thousand reads per agent asked about).
  if (LiveMemberOf(fmt::format("/proc/{}/stat", pgid), pgid)) return true;
  // A range-for's increment throws on a read error; this walk must not.
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (LiveMemberOf(it->path() / "stat", pgid)) return true;
  }
  return false;
}

uint64_t ProcessStartTicks(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return 0;
  std::istringstream fields(text.substr(close_paren + 2));
  // After "pid (comm) ": state is field 3, starttime field 22.
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return 0;
    if (i == 22) return std::stoull(field);
  }
  return 0;
}

double PodProcess::CpuSeconds() const {
  std::ifstream in(fmt::format("/proc/{}/stat", workload_pid_));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(close_paren + 2));
  // After "pid (comm) ": state is field 3; utime..cstime are fields 14..17.
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 17 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

PodProcess::~PodProcess() {
  if (detached_) {
    if (stop_fd_[1] >= 0) CloseFd(stop_fd_[1]);
    if (pump_.joinable()) pump_.join();
    CloseFd(stop_fd_[0]);
    return;
  }
  if (!Poll()) {
    SignalGroup(SIGKILL);
    Wait();
  }
  // Children the leader left behind in its group die with it.
  SignalGroup(SIGKILL);
  if (stop_fd_[1] >= 0) CloseFd(stop_fd_[1]);
  if (pump_.joinable()) pump_.join();
  CloseFd(stop_fd_[0]);
}

}  // namespace tidal::agent
