#include "agent/pod.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "agent/http_get.h"
#include "agent/pod_env.h"
#include "config/input_limits.h"

namespace tidal::agent {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t MtimeMs(const fs::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// Atomic: a workload polling the file sees nothing or all of it.
Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return Internal(fmt::format("write {}: failed", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Internal(fmt::format("rename {}: {}", path, ec.message()));
  return Status::Ok();
}

}  // namespace

StatusOr<LoadReport> ParseLoadReport(const std::string& body) {
  // The body comes from the pod: refuse deep nesting before the parser
  // walks it (HttpGet has already bounded its size).
  TIDAL_RETURN_IF_ERROR(config::CheckJsonDepth(body, "load"));
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("load: not JSON");
  return protocol::LoadReplyFromJson(j);
}

std::string_view Pod::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kWaitingForSlot: return "waiting_for_slot";
    case Phase::kStarting: return "starting";
    case Phase::kRunning: return "running";
    case Phase::kReady: return "ready";
    case Phase::kStopping: return "stopping";
    case Phase::kExited: return "exited";
  }
  return "unknown";
}

namespace {

uint64_t NewRevision() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

class Pod::RevisionGuard {
 public:
  explicit RevisionGuard(Pod& pod) : pod_(pod), before_(pod.Showing()) {}
  ~RevisionGuard() {
    if (pod_.Showing() != before_) pod_.revision_ = NewRevision();
  }
  RevisionGuard(const RevisionGuard&) = delete;
  RevisionGuard& operator=(const RevisionGuard&) = delete;

 private:
  Pod& pod_;
  const Shown before_;
};

Pod::Pod(PodSpec spec, PodOptions options)
    : spec_(std::move(spec)), options_(std::move(options)),
      notice_file_(options_.pod_dir + "/preempt-notice.json"), revision_(NewRevision()) {}

Pod::Shown Pod::Showing() const {
  return {phase_, pid(), workload_pid(), launch_ms_, notice_.has_value(), kill_deadline_ms_, killed_at_deadline_,
          checkpoint_at_notice_ms_};
}

PodEvent Pod::Event(std::string phase, int64_t now_ms) const {
  PodEvent e;
  e.key = spec_.key;
  e.phase = std::move(phase);
  e.time_ms = now_ms;
  return e;
}

void Pod::ReleaseSlot() {
  if (holds_slot_ && options_.start_limiter != nullptr) options_.start_limiter->Release();
  holds_slot_ = false;
}

ProcessSpec Pod::MakeProcessSpec() const {
  ProcessSpec ps;
  ps.work_dir = options_.pod_dir;
  ps.stdout_path = options_.pod_dir + "/stdout.log";
  ps.stderr_path = options_.pod_dir + "/stderr.log";
  ps.log_max_bytes = options_.log_max_bytes;
  ps.log_max_files = options_.log_max_files;
  ps.log_rate_bytes_per_s = options_.log_rate_bytes_per_s;
  ps.log_burst_bytes = options_.log_burst_bytes;
  ps.lease_path = options_.lease_path;
  ps.orphan_timeout_ms = options_.orphan_timeout_ms;
  if (options_.user) {
    ps.run_as_uid = static_cast<int>(options_.user->uid);
    ps.run_as_gid = static_cast<int>(options_.user->gid);
    ps.run_as_groups = options_.user->groups;
  }
  return ps;
}

json Pod::SaveState() const {
  if (!process_ || phase_ == Phase::kExited || phase_ == Phase::kWaitingForSlot) return nullptr;
  json state = {{"spec", protocol::PodAssignmentToJson(spec_)},
                {"pod_dir", options_.pod_dir},
                {"checkpoint_dir", options_.checkpoint_dir},
                {"port", options_.port},
                {"local_rank", options_.local_rank},
                {"local_world_size", options_.local_world_size},
                {"phase", PhaseName(phase_)},
                {"pgid", process_->pid()},
                {"workload_pid", process_->workload_pid()},
                {"start_ticks", process_->start_ticks()},
                {"launch_ms", launch_ms_}};
  if (notice_) {
    state["notice"] = {{"cause", notice_->cause},
                       {"notice_time_ms", notice_->notice_time_ms},
                       {"grace_deadline_ms", notice_->grace_deadline_ms},
                       {"signal", notice_->signal},
                       {"received_ms", notice_received_ms_},
                       {"kill_deadline_ms", kill_deadline_ms_},
                       {"killed_at_deadline", killed_at_deadline_},
                       {"checkpoint_at_notice_ms", checkpoint_at_notice_ms_}};
  }
  return state;
}

StatusOr<std::unique_ptr<Pod>> Pod::Restore(const json& state, PodOptions base) {
  try {
    TIDAL_ASSIGN_OR_RETURN(PodSpec spec, protocol::PodAssignmentFromJson(state.at("spec"), "spec"));
    base.pod_dir = state.at("pod_dir").get<std::string>();
    base.checkpoint_dir = state.at("checkpoint_dir").get<std::string>();
    base.port = state.at("port").get<int>();
    base.local_rank = state.at("local_rank").get<int>();
    base.local_world_size = state.at("local_world_size").get<int>();
    auto pod = std::make_unique<Pod>(std::move(spec), std::move(base));
    TIDAL_ASSIGN_OR_RETURN(
        pod->process_,
        PodProcess::Adopt(pod->MakeProcessSpec(), state.at("pgid").get<pid_t>(),
                          state.at("workload_pid").get<pid_t>(),
                          state.at("start_ticks").get<uint64_t>()));
    pod->launch_ms_ = state.at("launch_ms").get<int64_t>();
    const std::string phase = state.at("phase").get<std::string>();
    pod->phase_ = phase == "starting" ? Phase::kStarting
                  : phase == "ready"  ? Phase::kReady
                  : phase == "stopping" ? Phase::kStopping
                                        : Phase::kRunning;
    if (pod->phase_ == Phase::kStarting && pod->options_.start_limiter != nullptr) {
      // Its model load still runs; hold a slot if one is free.
      pod->holds_slot_ = pod->options_.start_limiter->TryAcquire();
    }
    if (state.contains("notice")) {
      const json& n = state["notice"];
      pod->notice_ = StopNotice{n.at("cause").get<std::string>(), n.at("notice_time_ms").get<int64_t>(),
                                n.at("grace_deadline_ms").get<int64_t>(), n.at("signal").get<int>()};
      pod->notice_received_ms_ = n.at("received_ms").get<int64_t>();
      pod->kill_deadline_ms_ = n.at("kill_deadline_ms").get<int64_t>();
      pod->killed_at_deadline_ = n.at("killed_at_deadline").get<bool>();
      pod->checkpoint_at_notice_ms_ = n.at("checkpoint_at_notice_ms").get<int64_t>();
    }
    return pod;
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("pod state: {}", e.what()));
  }
}

void Pod::Detach() {
  if (process_) process_->Detach();
}

bool Pod::TryLaunch(int64_t now_ms, std::vector<PodEvent>& events) {
  const RevisionGuard guard(*this);
  if (phase_ != Phase::kWaitingForSlot) return true;
  if (options_.start_limiter != nullptr && !options_.start_limiter->TryAcquire()) return false;
  holds_slot_ = true;
  launch_ms_ = now_ms;
  std::error_code ec;
  fs::create_directories(options_.pod_dir, ec);
  fs::create_directories(options_.checkpoint_dir, ec);
  fs::remove(notice_file_, ec);  // a notice from an earlier run must not leak in
  if (options_.user) {
    // The pod writes its checkpoints and scratch files there as its user;
    // the logs and FIFOs stay the agent's (the keeper opens them).
    for (const std::string& dir : {options_.pod_dir, options_.checkpoint_dir}) {
      if (chown(dir.c_str(), options_.user->uid, options_.user->gid) != 0) {
        fmt::print(stderr, "pod {}: chown {}: {}\n", spec_.name, dir, std::strerror(errno));
      }
    }
  }

  PodEnvContext ctx;
  ctx.local_rank = options_.local_rank;
  ctx.local_world_size = options_.local_world_size;
  ctx.node_name = options_.node_name;
  ctx.checkpoint_dir = options_.checkpoint_dir;
  ctx.notice_file = notice_file_;
  ctx.pod_dir = options_.pod_dir;
  ctx.port = options_.port;
  ctx.base = options_.base_env;

  ProcessSpec ps = MakeProcessSpec();
  ps.argv = spec_.command;
  ps.env = BuildPodEnv(spec_, ctx);
  auto process = PodProcess::Start(ps);
  if (!process.ok()) {
    ReleaseSlot();
    phase_ = Phase::kExited;
    PodEvent e = Event("exited", now_ms);
    e.exit_code = 127;
    e.reason = fmt::format("failed to start: {}", process.status().message());
    events.push_back(std::move(e));
    return true;
  }
  process_ = std::move(process).value();
  phase_ = spec_.readiness ? Phase::kStarting : Phase::kRunning;
  if (!spec_.readiness) ReleaseSlot();
  events.push_back(Event("running", now_ms));
  return true;
}

void Pod::Stop(const StopNotice& notice, int64_t now_ms, std::vector<PodEvent>& events) {
  const RevisionGuard guard(*this);
  if (notice_ || phase_ == Phase::kExited) return;
  notice_ = notice;
  notice_received_ms_ = now_ms;
  if (phase_ == Phase::kWaitingForSlot) {
    phase_ = Phase::kExited;
    PodEvent e = Event("exited", now_ms);
    e.reason = fmt::format("stopped before start: {}", notice.cause);
    e.stop = StopOutcome{now_ms, /*killed_at_deadline=*/false,
                         /*checkpointed_in_time=*/true};  // nothing ran, nothing was lost
    events.push_back(std::move(e));
    return;
  }
  const int64_t grace_ms = std::max<int64_t>(0, notice.grace_deadline_ms - notice.notice_time_ms);
  kill_deadline_ms_ = now_ms + grace_ms;
  checkpoint_at_notice_ms_ = LastCheckpointMs();
  const json body = {{"cause", notice.cause},
                     {"notice_time_ms", notice.notice_time_ms},
                     {"grace_deadline_ms", notice.grace_deadline_ms},
                     {"received_ms", now_ms},
                     {"local_deadline_ms", kill_deadline_ms_},
                     {"signal", notice.signal},
                     {"checkpoint", notice.checkpoint}};
  Status written = WriteFileAtomically(notice_file_, body.dump() + "\n");
  if (!written.ok()) fmt::print(stderr, "pod {}: {}\n", spec_.name, written.message());
  ReleaseSlot();
  phase_ = Phase::kStopping;
  process_->SignalGroup(grace_ms == 0 ? SIGKILL : notice.signal);
  if (grace_ms == 0) killed_at_deadline_ = true;
}

void Pod::Kill() {
  if (process_ && phase_ != Phase::kExited) process_->SignalGroup(SIGKILL);
}

void Pod::FinishExit(const ExitStatus& status, int64_t now_ms, std::vector<PodEvent>& events) {
  ReleaseSlot();
  phase_ = Phase::kExited;
  PodEvent e = Event("exited", now_ms);
  e.exit_code = status.term_signal == 0 ? status.exit_code : 128 + status.term_signal;
  e.signal = status.term_signal;
  e.checkpoint_time_ms = LastCheckpointMs();
  if (notice_) {
    StopOutcome& stop = e.stop.emplace();
    stop.notice_time_ms = notice_received_ms_;
    stop.killed_at_deadline = killed_at_deadline_;
    stop.checkpointed_in_time = !killed_at_deadline_ && now_ms <= kill_deadline_ms_ &&
                                e.checkpoint_time_ms > checkpoint_at_notice_ms_ &&
                                e.checkpoint_time_ms >= notice_received_ms_ - 1000;
    // How long after its notice, not the notice's epoch time: a reader
    // compares it with the grace, and `notice_time_ms` carries the time.
    e.reason = fmt::format("stopped ({}): {}{}; {:.1f} s after the notice, {}", notice_->cause,
                           status.Describe(), killed_at_deadline_ ? " at the grace deadline" : "",
                           std::max<int64_t>(0, now_ms - notice_received_ms_) / 1000.0,
                           stop.checkpointed_in_time ? "checkpointed in time" : "no new checkpoint");
  } else {
    e.reason = status.success() ? "completed" : fmt::format("failed: {}", status.Describe());
  }
  events.push_back(std::move(e));
}

void Pod::Tick(int64_t now_ms, std::vector<PodEvent>& events) {
  const RevisionGuard guard(*this);
  if (!process_ || phase_ == Phase::kExited) return;
  if (auto status = process_->Poll()) {
    // The leader is gone; whatever it left in its group goes with it.
    process_->SignalGroup(SIGKILL);
    FinishExit(*status, now_ms, events);
    return;
  }
  if (phase_ == Phase::kStopping && !killed_at_deadline_ && now_ms >= kill_deadline_ms_) {
    process_->SignalGroup(SIGKILL);
    killed_at_deadline_ = true;
    return;
  }
  if (phase_ == Phase::kStarting) {
    const HttpEndpoint& probe = *spec_.readiness;
    const int port = options_.port > 0 ? options_.port : probe.port;
    auto reply = HttpGet("127.0.0.1", port, probe.path, options_.probe_timeout);
    if (reply.ok() && reply->status >= 200 && reply->status < 400) {
      ReleaseSlot();
      phase_ = Phase::kReady;
      PodEvent e = Event("ready", now_ms);
      e.cold_start_ms = now_ms - launch_ms_;
      events.push_back(std::move(e));
    } else if (holds_slot_ &&
               now_ms - launch_ms_ >= options_.readiness_timeout.count()) {
      // Keep probing, but stop blocking other pods' starts.
      ReleaseSlot();
    }
  }
}

std::optional<LoadReport> Pod::ReadLoad() {
  if (!spec_.load_endpoint || phase_ != Phase::kReady) return std::nullopt;
  const int port = options_.port > 0 ? options_.port : spec_.load_endpoint->port;
  auto reply = HttpGet("127.0.0.1", port, spec_.load_endpoint->path, options_.probe_timeout);
  if (!reply.ok() || reply->status != 200) return std::nullopt;
  auto load = ParseLoadReport(reply->body);
  if (!load.ok()) return std::nullopt;
  return *load;
}

int64_t Pod::LastCheckpointMs() const {
  std::error_code ec;
  int64_t newest = 0;
  for (auto it = fs::recursive_directory_iterator(options_.checkpoint_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 1) {
      it.disable_recursion_pending();
      continue;
    }
    newest = std::max(newest, MtimeMs(it->path()));
  }
  return newest;
}

}  // namespace tidal::agent
