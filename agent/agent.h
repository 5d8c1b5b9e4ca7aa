// The node agent: registers the node with its GPU inventory, heartbeats on
// the server's lease, runs the pods the server wants on this node and
// reports what happens to them.
//
// Each Step(now) does, in order:
//   1. polls GPU faults (XID, uncorrectable ECC); a new fault forces an
//      immediate heartbeat, so the server drains the node without waiting
//      for the next period;
//   2. samples GPU utilization and memory, attributes it to the pods holding
//      each GPU (a pod's utilization is the mean over its GPUs);
//   3. heartbeats when due; the reply is the node's desired pods, which are
//      reconciled: new pods are created, pods told to stop get the stop
//      protocol (pod.h), pods absent from the list retire: stopped with the
//      default grace, their exits unreported (the server forgot them);
//   4. launches waiting pods as start slots free up (StartLimiter), ticks
//      every pod (exit, grace deadline, readiness);
//   5. reads inference replicas' load endpoints and sends all pod events;
//      events that fail to send are kept and resent, in order. Once its exit
//      is delivered, an exited pod is forgotten: the server then stops
//      listing it, and a list asked for later that names the same rank is
//      a new run (one that may predate the exit starts nothing).
// The agent never restarts a pod on its own: restarts are the server's
// decision, because a gang must restart whole.
//
// Server calls (3 and sending events: Sync) and local work (1, 2, 4: Tick)
// are separate, so that Run() can do them on two threads: a server that
// hangs must not delay a grace-deadline SIGKILL, a readiness probe or the
// lease file. Step() does both on the caller's thread (tests).
//
// Restarts: what a restarted agent needs to adopt the pods still running
// (spec, directories, process group, stop in progress) is kept in
// WORK_DIR/agent-state.json, rewritten atomically on change. The pods
// outlive the agent for the orphan timeout (pod_process.h): the agent
// touches WORK_DIR/agent.lease every second while it runs. Start() adopts
// them before the first heartbeat, so listed pods are not started twice and
// unlisted ones are retired, not orphaned.
#ifndef TIDAL_AGENT_AGENT_H_
#define TIDAL_AGENT_AGENT_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/control_plane.h"
#include "agent/gpu_probe.h"
#include "agent/pod.h"
#include "agent/pod_user.h"
#include "agent/start_limiter.h"
#include "core/model/cluster.h"

namespace tidal::agent {

struct AgentConfig {
  std::string name;
  std::string address = "127.0.0.1";  // where other nodes reach this one (MASTER_ADDR)
  std::string work_dir;               // pods/<workload>-<rank>-<attempt>/, pods.json
  std::string checkpoint_root;        // "" = work_dir/checkpoints
  std::string pool, rack, zone;       // "" = the server's configured value
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  double nic_gbps = 0;
  bool rdma = false;

  int max_concurrent_starts = 2;
  int64_t log_max_bytes = 16 << 20;
  int log_max_files = 3;
  double log_rate_bytes_per_s = 1 << 20;
  double log_burst_bytes = 4 << 20;

  Duration sync_interval = milliseconds(0);  // 0 = the server's heartbeat interval
  Duration sample_interval = seconds(5);
  Duration load_interval = seconds(2);
  Duration default_grace = seconds(10);      // pods the server stopped listing
  Duration readiness_timeout = seconds(300);
  // CPU use (share of one core) at which a fake GPU counts as fully busy.
  double fake_busy_cpu_share = 0.02;
  // How long pods outlive a dead agent, waiting to be adopted by its
  // restart; 0 = half the server's lease, so that they are gone before the
  // server declares the node lost and restarts their gangs elsewhere.
  Duration orphan_timeout = milliseconds(0);
  // Who pods run as; nullopt = the agent's own user (pod_user.h).
  std::optional<PodUser> pod_user;
};

// What `pods.json` in the work dir and tests see of one pod.
struct PodView {
  PodKey key;
  std::string name;
  std::string kind;
  std::string phase;  // Pod::PhaseName
  pid_t pid = -1;           // the pod's process group
  pid_t workload_pid = -1;  // the workload process itself
  int64_t launch_ms = 0;    // wall clock; 0 = not started yet
  int port = 0;
  std::vector<int> gpus;
  std::string pod_dir;
  double utilization = 0;
};

class Agent {
 public:
  Agent(AgentConfig config, GpuProbe& probe, ControlPlane& server);
  ~Agent();

  // Reads the inventory, adopts the pods an earlier agent left in the work
  // dir and registers the node (an unreachable server is retried by Sync).
  Status Start(int64_t now_ms);
  // Tick, then Sync, on the caller's thread.
  void Step(int64_t now_ms);
  // Local work: GPU faults and samples, pods (launch, exit, grace deadline,
  // readiness), load endpoints, the lease and state files. Never calls the
  // server.
  void Tick(int64_t now_ms);
  // Server calls: registration and heartbeat when due (reconciling the
  // reply), then queued pod events. The agent's state is unlocked while a
  // call is in flight, so Tick runs on meanwhile.
  void Sync(int64_t now_ms);
  // Ticks every `tick` on this thread, syncs on another, and keeps a watch
  // on the node's pods on a third, until `stop`.
  void Run(const std::function<bool()>& stop, Duration tick);
  // Stops every pod: notice + signal, SIGKILL after `grace`; blocks until all
  // have exited. Their exits are not reported (they did not finish).
  void Shutdown(Duration grace);
  // Leaves every pod running for a restarted agent to adopt (the state file
  // keeps them); the agent object then holds none.
  void Detach();

  std::vector<PodView> Pods() const;
  std::set<int> failed_gpus() const;
  const GpuInventory& inventory() const { return inventory_; }
  int64_t events_sent() const;
  int64_t heartbeats_sent() const;
  Duration sync_interval() const;

 private:
  struct LocalPod {
    std::unique_ptr<Pod> pod;
    double cpu_s_at_sample = 0;
    double utilization = 0;
    int64_t reported_checkpoint_ms = 0;
  };

  // Private methods run with mu_ held; Heartbeat and SendEvents release it
  // around the server call.
  nlohmann::json RegisterBody() const;
  nlohmann::json HeartbeatBody() const;
  void Heartbeat(int64_t now_ms, std::unique_lock<std::mutex>& lock);
  void SendEvents(std::unique_lock<std::mutex>& lock);
  // Uploads what the pods wrote to stdout/stderr since the last upload
  // (bounded per call); releases mu_ around the server call.
  void ShipLogs(std::unique_lock<std::mutex>& lock);
  // `exits_before`: exits_delivered_ when the list was asked for. A list
  // asked for before an exit was delivered may predate it, so it does not
  // start that pod again (see delivered_exits_).
  void Reconcile(const std::vector<PodSpec>& desired, int64_t now_ms, uint64_t exits_before);
  // The pod watch loop (Run's third thread): one long-poll at a time, each
  // reply reconciled at once.
  void WatchPods(const std::function<bool()>& stop, Duration tick);
  void Sample(int64_t now_ms);
  void ReportLoad(int64_t now_ms);
  void RestorePods();
  void TouchLease(int64_t now_ms);  // at most once a second
  void TouchLeaseFile() const;
  void WriteFiles();
  std::vector<PodView> PodsLocked() const;
  PodOptions BasePodOptions();
  std::string PodDir(const PodKey& key) const;  // unique per call
  bool PortUsedLocally(int port) const;

  mutable std::mutex mu_;
  // Wakes Run's sync thread: Tick has events to send, pods whose output to
  // ship, or a heartbeat to send now. An idle node's sync thread sleeps
  // until its next heartbeat instead of every tick.
  std::condition_variable sync_cv_;
  bool sync_wanted_ = false;
  // Wakes Run's tick loop before its period: a pod list brought pods to
  // launch or to stop, so they do not wait out the rest of a tick.
  std::condition_variable tick_cv_;
  bool tick_wanted_ = false;
  AgentConfig config_;
  GpuProbe& probe_;
  ControlPlane& server_;
  GpuInventory inventory_;
  Lease lease_;
  StartLimiter start_limiter_;
  std::map<PodKey, LocalPod> pods_;
  std::vector<LocalPod> retiring_;  // unlisted pods on their way out
  std::set<PodKey> absent_stop_reported_;
  // Pods whose exit the server acknowledged, with exits_delivered_ after
  // it. The pod watch runs beside the event sender, so a list the server
  // computed just before it took an exit can arrive just after: such a list
  // still names the pod, which must not run twice. A list asked for later
  // is the server's word: naming the key again is a new run (a replaced
  // replica keeps its rank), omitting it ends the entry.
  std::map<PodKey, uint64_t> delivered_exits_;
  uint64_t exits_delivered_ = 0;
  mutable int64_t next_pod_seq_ = 0;
  std::set<int> failed_gpus_;
  std::map<int, GpuFault> last_fault_;
  std::vector<GpuSample> samples_;
  std::deque<PodEvent> outbox_;
  // How far each pod's log files were uploaded. A cursor outlives its pod
  // for a few syncs: the log pump may still be writing a pod's last output
  // when its exit is reported.
  struct LogCursor {
    std::string pod_dir;
    int64_t stdout_offset = 0;
    int64_t stderr_offset = 0;
    int idle_syncs = 0;  // uploads in a row that found nothing, once the pod is gone
  };
  std::map<PodKey, LogCursor> log_cursors_;
  bool registered_ = false;
  // While the pod watch answers, its lists are the agent's (in order); a
  // heartbeat reply's, computed before a watch reply that overtook it,
  // could stop a pod just started.
  bool watching_ = false;
  bool heartbeat_now_ = false;
  int64_t next_heartbeat_ms_ = 0;
  int64_t next_sample_ms_ = 0;
  int64_t next_load_ms_ = 0;
  int64_t last_sample_ms_ = 0;
  int64_t events_sent_ = 0;
  int64_t heartbeats_sent_ = 0;
  int64_t lease_touched_ms_ = 0;
  bool restored_ = false;
  // What the files last written show: each pod's revision (pods_, then
  // retiring_) and the failed GPUs. Unset until both files are written; a
  // tick that changed none of it writes nothing.
  struct FilesShown {
    std::vector<uint64_t> revisions;
    size_t pods = 0;  // revisions[0, pods) are pods_'s
    std::set<int> failed_gpus;
    bool operator==(const FilesShown&) const = default;
  };
  std::optional<FilesShown> files_shown_;
};

int64_t WallClockMs();

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_AGENT_H_
