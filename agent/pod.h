// One pod's life on this node.
//
//   waiting_for_slot -> starting -> running -> [ready] -> stopping -> exited
//
// A pod waits for a node start slot (StartLimiter) before it launches; a pod
// with a readiness probe holds the slot until the probe first passes (its
// model load), others release it as soon as the process runs.
//
// Stop protocol: on a notice the pod writes the notice file (atomically, so
// the workload never reads half of it), sends the notice's signal (SIGTERM by
// default) to the whole process group and arms a local deadline of
// receive time + (grace_deadline - notice_time), so clock skew between the
// server and this node cannot shorten the grace. Past the deadline the group
// gets SIGKILL. The exit event's stop outcome says when the notice came,
// whether the pod was killed at the deadline, and whether it checkpointed in
// time: it exited before the deadline and its checkpoint directory changed
// after the notice.
#ifndef TIDAL_AGENT_POD_H_
#define TIDAL_AGENT_POD_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "agent/pod_process.h"
#include "agent/pod_spec.h"
#include "agent/pod_user.h"
#include "agent/start_limiter.h"
#include "core/common/time.h"
#include "protocol/pod_event.h"

namespace tidal::agent {

using LoadReport = protocol::LoadReport;
// Parses a replica's load reply (protocol::LoadReplyFromJson), refusing a
// body nested deeper than a JSON request may be.
StatusOr<LoadReport> ParseLoadReport(const std::string& body);

// What the agent tells the server about a pod; the protocol's message.
using PodEvent = protocol::PodEvent;
using StopOutcome = protocol::StopOutcome;

struct PodOptions {
  std::string node_name;
  std::string pod_dir;         // logs and the notice file live here
  std::string checkpoint_dir;  // survives restarts of the workload
  int port = 0;                // serving port handed to the pod ($PORT), probed; 0 = none
  int local_rank = 0;
  int local_world_size = 1;
  std::map<std::string, std::string> base_env;
  int64_t log_max_bytes = 16 << 20;
  int log_max_files = 3;
  double log_rate_bytes_per_s = 1 << 20;
  double log_burst_bytes = 4 << 20;
  Duration readiness_timeout = seconds(300);
  Duration probe_timeout = milliseconds(300);
  StartLimiter* start_limiter = nullptr;  // null = no limit
  // The agent's lease file; the pod dies once it is older than the orphan
  // timeout (pod_process.h). "" = the pod dies with this process.
  std::string lease_path;
  int64_t orphan_timeout_ms = 15000;
  // Set: the pod's process runs as this user, and its pod and checkpoint
  // directories are made its own (agent/pod_user.h).
  std::optional<PodUser> user;
};

class Pod {
 public:
  enum class Phase { kWaitingForSlot, kStarting, kRunning, kReady, kStopping, kExited };
  static std::string_view PhaseName(Phase phase);

  Pod(PodSpec spec, PodOptions options);
  // Adopts a pod an earlier agent launched, from its SaveState(): `base`
  // gives what belongs to this agent (environment, limits, start limiter),
  // the state what belongs to the pod (directories, port, ranks, process,
  // phase, a stop in progress with its deadline).
  static StatusOr<std::unique_ptr<Pod>> Restore(const nlohmann::json& state, PodOptions base);

  const PodSpec& spec() const { return spec_; }
  const PodOptions& options() const { return options_; }
  Phase phase() const { return phase_; }
  bool holds_start_slot() const { return holds_slot_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }  // the process group
  pid_t workload_pid() const { return process_ ? process_->workload_pid() : -1; }
  // What a restarted agent needs to adopt this pod; null before launch and
  // after exit (nothing to adopt).
  nlohmann::json SaveState() const;
  // A number no other pod or state of a pod in this process has had: it
  // changes whenever what SaveState or the agent's pod list shows of this
  // pod changes, so the agent rewrites its files only then, not each tick.
  uint64_t revision() const { return revision_; }
  // Leaves the process running for the next agent (no signal, no event).
  void Detach();
  const std::string& notice_file() const { return notice_file_; }

  // Launches the process once a start slot is free; false while waiting.
  // Emits "running", or "exited" when it cannot start.
  bool TryLaunch(int64_t now_ms, std::vector<PodEvent>& events);
  // Starts the stop protocol; later calls are ignored.
  void Stop(const StopNotice& notice, int64_t now_ms, std::vector<PodEvent>& events);
  // Reaps an exit, enforces the grace deadline, runs the readiness probe.
  void Tick(int64_t now_ms, std::vector<PodEvent>& events);
  // Reads the declared load endpoint; nullopt when there is none or it fails.
  std::optional<LoadReport> ReadLoad();
  // The newest modification time under the checkpoint directory, 0 if empty.
  int64_t LastCheckpointMs() const;
  double CpuSeconds() const { return process_ ? process_->CpuSeconds() : 0; }
  // When the process was started (wall clock), 0 before.
  int64_t launch_ms() const { return launch_ms_; }
  int64_t dropped_log_bytes() const { return process_ ? process_->dropped_log_bytes() : 0; }
  // SIGKILLs the group now (agent shutdown past its grace).
  void Kill();

 private:
  void ReleaseSlot();
  ProcessSpec MakeProcessSpec() const;
  void FinishExit(const ExitStatus& status, int64_t now_ms, std::vector<PodEvent>& events);
  PodEvent Event(std::string phase, int64_t now_ms) const;

  // What SaveState and the pod list show that can change after
  // construction (the rest is the spec and the options).
  struct Shown {
    Phase phase;
    pid_t pid, workload_pid;
    int64_t launch_ms;
    bool noticed;
    int64_t kill_deadline_ms;
    bool killed_at_deadline;
    int64_t checkpoint_at_notice_ms;
    bool operator==(const Shown&) const = default;
  };
  Shown Showing() const;
  // Held by each mutator: on leaving, a new revision if what is shown changed.
  class RevisionGuard;

  PodSpec spec_;
  PodOptions options_;
  std::string notice_file_;
  Phase phase_ = Phase::kWaitingForSlot;
  bool holds_slot_ = false;
  std::unique_ptr<PodProcess> process_;
  int64_t launch_ms_ = 0;
  std::optional<StopNotice> notice_;
  int64_t notice_received_ms_ = 0;
  int64_t kill_deadline_ms_ = 0;
  bool killed_at_deadline_ = false;
  int64_t checkpoint_at_notice_ms_ = 0;
  uint64_t revision_;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_H_
