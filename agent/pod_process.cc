#include "agent/pod_process.h"

#include <fcntl.h>
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

StatusOr<std::unique_ptr<PodProcess>> PodProcess::Start(const ProcessSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("command: argv is empty");
  std::string path_var;
  for (const std::string& kv : spec.env) {
    if (kv.starts_with("PATH=")) path_var = kv.substr(5);
  }
  TIDAL_ASSIGN_OR_RETURN(std::string exe, ResolveExecutable(spec.argv[0], path_var));

  // Everything the child touches is built before fork: between fork and
  // execve only async-signal-safe calls are allowed (the agent has threads).
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Internal(fmt::format("pipe: {}", strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    return Internal(fmt::format("pipe: {}", strerror(errno)));
  }
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return Internal(fmt::format("pipe: {}", strerror(errno)));
  }
  const int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const char* work_dir = spec.work_dir.empty() ? nullptr : spec.work_dir.c_str();

  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    if (spec.die_with_agent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the agent died before prctl
    }
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) signal(sig, SIG_DFL);
    if (dev_null >= 0) dup2(dev_null, STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    int err = 0;
    if (work_dir != nullptr && chdir(work_dir) != 0) {
      err = errno;
    } else {
      execve(exe.c_str(), argv.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = write(exec_pipe[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  const int fork_errno = errno;
  if (dev_null >= 0) close(dev_null);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_pipe[1]);
  if (pid < 0) {
    for (int fd : {out_pipe[0], err_pipe[0], exec_pipe[0]}) close(fd);
    return Internal(fmt::format("fork: {}", strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also in the parent, so the group exists before we signal it

  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    waitpid(pid, nullptr, 0);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return FailedPrecondition(fmt::format("{} {}: {}", work_dir && child_errno == ENOENT &&
                                                               access(work_dir, F_OK) != 0
                                                           ? "chdir"
                                                           : "execve",
                                          exe, strerror(child_errno)));
  }

  std::unique_ptr<PodProcess> proc(new PodProcess());
  proc->pid_ = pid;
  if (pipe2(proc->stop_fd_, O_CLOEXEC) != 0) {
    proc->stop_fd_[0] = proc->stop_fd_[1] = -1;
  }
  proc->pump_ = std::thread([p = proc.get(), out = out_pipe[0], err = err_pipe[0], spec] {
    p->Pump(out, err, spec);
  });
  return proc;
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

std::optional<ExitStatus> PodProcess::Poll() {
  if (exit_) return exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    ExitStatus s;
    if (WIFSIGNALED(status)) {
      s.term_signal = WTERMSIG(status);
    } else {
      s.exit_code = WEXITSTATUS(status);
    }
    exit_ = s;
  } else if (r < 0) {
    exit_ = ExitStatus{};  // reaped elsewhere (should not happen); unknown code
  }
  return exit_;
}

ExitStatus PodProcess::Wait() {
  while (!exit_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid_) {
      ExitStatus s;
      if (WIFSIGNALED(status)) {
        s.term_signal = WTERMSIG(status);
      } else {
        s.exit_code = WEXITSTATUS(status);
      }
      exit_ = s;
    } else {
      exit_ = ExitStatus{};
    }
  }
  return *exit_;
}

bool PodProcess::SignalGroup(int sig) { return killpg(pid_, sig) == 0; }

bool PodProcess::GroupAlive() const { return ProcessGroupAlive(pid_); }

bool ProcessGroupAlive(pid_t pgid) {
  if (killpg(pgid, 0) != 0 && errno != EPERM) return false;
  // killpg also finds zombies, which wait for whoever reaps orphans (PID 1,
  // slow or absent in some containers); a zombie runs nothing, so look for a
  // member that is not one.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close_paren = text.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= text.size()) continue;
    std::istringstream fields(text.substr(close_paren + 2));
    std::string state, ppid, pgrp;
    fields >> state >> ppid >> pgrp;
    if (state != "Z" && state != "X" && pgrp == std::to_string(pgid)) return true;
  }
  return false;
}

double PodProcess::CpuSeconds() const {
  std::ifstream in(fmt::format("/proc/{}/stat", pid_));
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
