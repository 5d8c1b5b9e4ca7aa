#include "agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "agent/fake_gpu_probe.h"
#include "agent/http_get.h"
#include "agent/pod_env.h"
#include "config/json_codec.h"
#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "protocol/pod_assignment.h"
#include "protocol/pod_log.h"

namespace tidal::agent {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxOutbox = 10000;
// One upload stays well under the server's default body limit (1 MiB).
constexpr int64_t kMaxLogUploadBytes = 512 << 10;
constexpr int64_t kMaxLogBytesPerStream = 64 << 10;  // per pod per upload
constexpr int kLogIdleSyncsAfterExit = 3;
// How long one pod watch waits on the server for a change: short enough
// that a server gone quiet is noticed, long enough to cost nothing.
constexpr Duration kPodWatchWait = seconds(25);
// How long the sync thread gathers events after a sync before the next one:
// events a tick produces together (a burst of launches, a gang's exits) go
// in one request, and none waits the rest of a tick.
constexpr Duration kEventBatchWindow = milliseconds(2);
// How often a tick loop with a long period looks at the stop flag.
constexpr Duration kStopPoll = milliseconds(100);

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// Up to `max` bytes of `path` from `offset`.
std::string ReadFrom(const std::string& path, int64_t offset, int64_t max) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  out.resize(static_cast<size_t>(max));
  const ssize_t n = ::pread(fd, out.data(), out.size(), offset);
  ::close(fd);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// New bytes of one stream's log from *offset, moving *offset past what it
// returns. A file smaller than the offset was rotated (RotatingLog): the
// rest of path.1 comes first, then the fresh file from its start.
std::string ReadNewLog(const std::string& path, int64_t* offset, int64_t max) {
  const int64_t size = FileSize(path);
  if (size == *offset) return {};  // nothing new, the common case: no open, no buffer
  size_t used = 0;
  if (size < *offset) {
    const std::string raw = ReadFrom(path + ".1", *offset, max);
    std::string text = protocol::ValidUtf8Prefix(raw, &used);
    // All of path.1 read: on in the fresh file (a character split across
    // the two files is lost).
    *offset = static_cast<int64_t>(raw.size()) < max ? 0 : *offset + static_cast<int64_t>(used);
    return text;
  }
  const std::string raw = ReadFrom(path, *offset, std::min(max, size - *offset));
  std::string text = protocol::ValidUtf8Prefix(raw, &used);
  *offset += static_cast<int64_t>(used);
  return text;
}

}  // namespace

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Agent::Agent(AgentConfig config, GpuProbe& probe, ControlPlane& server)
    : config_(std::move(config)), probe_(probe), server_(server),
      start_limiter_(std::max(1, config_.max_concurrent_starts)) {
  if (config_.checkpoint_root.empty()) config_.checkpoint_root = config_.work_dir + "/checkpoints";
}

Agent::~Agent() {
  // Pods die with their Pod objects (SIGKILL to the group); the agent's
  // owner calls Shutdown() first for a graceful stop.
  pods_.clear();
  retiring_.clear();
}

Duration Agent::sync_interval() const {
  if (config_.sync_interval.count() > 0) return config_.sync_interval;
  return seconds(std::max(1, lease_.heartbeat_interval_s));
}

json Agent::RegisterBody() const {
  protocol::NodeRegistration reg;
  reg.name = config_.name;
  reg.address = config_.address;
  reg.gpu_model = inventory_.gpus.empty() ? "" : inventory_.gpus[0].model;
  reg.gpu_memory_gib = inventory_.gpus.empty() ? 0 : static_cast<int>(inventory_.gpus[0].memory_mib / 1024);
  reg.driver_version = inventory_.driver_version;
  reg.mig_capable = std::any_of(inventory_.gpus.begin(), inventory_.gpus.end(),
                                [](const GpuDevice& g) { return g.mig_enabled; });
  reg.network = protocol::NetworkInfo{config_.nic_gbps, config_.rdma};
  std::vector<protocol::GpuInfo> gpus;
  for (const GpuDevice& gpu : inventory_.gpus) {
    protocol::GpuInfo info;
    info.index = gpu.index;
    info.uuid = gpu.uuid;
    info.healthy = failed_gpus_.count(gpu.index) == 0;
    gpus.push_back(std::move(info));
  }
  reg.gpus = std::move(gpus);
  std::vector<std::vector<int>> domains;
  for (GpuMask mask : NvlinkDomains(inventory_)) domains.push_back(config::GpuIndices(mask));
  reg.nvlink_domains = std::move(domains);
  // Repeated only when set: the server refuses any that contradict the
  // cluster file, which owns them.
  if (!config_.labels.empty()) reg.labels = config_.labels;
  if (!config_.taints.empty()) reg.taints = config_.taints;
  if (!config_.pool.empty()) reg.pool = config_.pool;
  if (!config_.rack.empty()) reg.rack = config_.rack;
  if (!config_.zone.empty()) reg.zone = config_.zone;
  return protocol::NodeRegistrationToJson(reg);
}

json Agent::HeartbeatBody() const {
  protocol::Heartbeat heartbeat;
  for (const GpuDevice& gpu : inventory_.gpus) {
    protocol::GpuReport g;
    g.index = gpu.index;
    g.healthy = failed_gpus_.count(gpu.index) == 0;
    if (auto it = last_fault_.find(gpu.index); it != last_fault_.end()) {
      if (it->second.kind == GpuFaultKind::kXid) g.xid = it->second.code;
      if (it->second.kind == GpuFaultKind::kEccUncorrectable) g.ecc_uncorrectable = it->second.code;
    }
    for (const GpuSample& s : samples_) {
      if (s.gpu_index != gpu.index) continue;
      g.utilization = std::clamp(s.utilization_pct / 100.0, 0.0, 1.0);
      g.memory_used_gib = static_cast<double>(s.memory_used_mib) / 1024.0;
    }
    heartbeat.gpus.push_back(std::move(g));
  }
  // While the watch answers, its lists are the agent's (a heartbeat
  // reply's would be ignored): the server need not build one.
  heartbeat.pods_by_watch = watching_;
  return protocol::HeartbeatToJson(heartbeat);
}

Status Agent::Start(int64_t now_ms) {
  std::unique_lock lock(mu_);
  TIDAL_ASSIGN_OR_RETURN(inventory_, probe_.Inventory());
  std::error_code ec;
  fs::create_directories(config_.work_dir + "/pods", ec);
  if (ec) return Internal(fmt::format("--work-dir {}: {}", config_.work_dir, ec.message()));
  fs::create_directories(config_.checkpoint_root, ec);
  TouchLease(now_ms);
  if (!restored_) {
    RestorePods();
    restored_ = true;
  }
  next_heartbeat_ms_ = now_ms;  // first heartbeat fetches the pods at once
  next_sample_ms_ = now_ms;
  last_sample_ms_ = now_ms;
  WriteFiles();
  const json body = RegisterBody();
  lock.unlock();
  auto lease = server_.Register(body);
  lock.lock();
  if (!lease.ok()) {
    // Adopted pods need the lease file touched: a server that is not up
    // yet is the sync loop's to retry; anything else is a real error.
    if (lease.status().code() != StatusCode::kUnavailable) return lease.status();
    fmt::print(stderr, "agent {}: register: {} (retrying)\n", config_.name, lease.status().message());
    return Status::Ok();
  }
  lease_ = *lease;
  registered_ = true;
  return Status::Ok();
}

PodOptions Agent::BasePodOptions() {
  PodOptions options;
  options.node_name = config_.name;
  options.base_env = InheritedPodEnv(config_.pod_user);
  options.user = config_.pod_user;
  options.log_max_bytes = config_.log_max_bytes;
  options.log_max_files = config_.log_max_files;
  options.log_rate_bytes_per_s = config_.log_rate_bytes_per_s;
  options.log_burst_bytes = config_.log_burst_bytes;
  options.readiness_timeout = config_.readiness_timeout;
  options.start_limiter = &start_limiter_;
  options.lease_path = config_.work_dir + "/agent.lease";
  options.orphan_timeout_ms = config_.orphan_timeout.count() > 0
                                  ? config_.orphan_timeout.count()
                                  : std::max(1, lease_.lease_s) * 1000 / 2;
  return options;
}

void Agent::RestorePods() {
  const std::string path = config_.work_dir + "/agent-state.json";
  std::ifstream in(path);
  if (!in) return;
  json state = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object()) {
    fmt::print(stderr, "agent {}: {}: not JSON, no pods adopted\n", config_.name, path);
    return;
  }
  for (const char* list : {"pods", "retiring"}) {
    if (!state.contains(list) || !state[list].is_array()) continue;
    for (const json& saved : state[list]) {
      auto pod = Pod::Restore(saved, BasePodOptions());
      if (!pod.ok()) {
        fmt::print(stderr, "agent {}: {}: {}\n", config_.name, path, pod.status().message());
        continue;
      }
      const PodKey key = (*pod)->spec().key;
      fmt::print(stderr, "agent {}: adopted pod {} rank {} (process group {}, {})\n",
                 config_.name, (*pod)->spec().name, key.rank, (*pod)->pid(),
                 Pod::PhaseName((*pod)->phase()));
      if (std::string_view(list) == "retiring" || pods_.count(key)) {
        retiring_.push_back(LocalPod{std::move(pod).value()});
      } else {
        // The earlier agent uploaded up to somewhere short of the end; going
        // on from the end loses that little rather than repeating it all.
        const std::string dir = (*pod)->options().pod_dir;
        log_cursors_[key] = LogCursor{dir, FileSize(dir + "/stdout.log"), FileSize(dir + "/stderr.log")};
        pods_.emplace(key, LocalPod{std::move(pod).value()});
      }
    }
  }
}

void Agent::TouchLease(int64_t now_ms) {
  if (now_ms - lease_touched_ms_ < 1000) return;
  TouchLeaseFile();
  lease_touched_ms_ = now_ms;
}

void Agent::TouchLeaseFile() const {
  const std::string path = config_.work_dir + "/agent.lease";
  if (utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) {
    std::ofstream(path, std::ios::app).flush();  // first run: create it
  }
}

std::string Agent::PodDir(const PodKey& key) const {
  // The sequence number keeps a rerun of the same rank from reusing (and
  // mixing logs with) an earlier run's directory, also one an earlier agent
  // made in this work dir.
  while (true) {
    std::string dir = fmt::format("{}/pods/{}-r{}-a{}-{}", config_.work_dir, key.workload,
                                  key.rank, key.attempt, next_pod_seq_++);
    if (!fs::exists(dir)) return dir;
  }
}

void Agent::Sample(int64_t now_ms) {
  const double interval_s = std::max(0.001, (now_ms - last_sample_ms_) / 1000.0);
  last_sample_ms_ = now_ms;
  std::map<int, LocalPod*> holder;
  for (auto& [key, lp] : pods_) {
    const Pod::Phase phase = lp.pod->phase();
    if (phase == Pod::Phase::kExited || phase == Pod::Phase::kWaitingForSlot) continue;
    for (int gpu : lp.pod->spec().gpus) holder[gpu] = &lp;
  }
  if (auto* fake = dynamic_cast<FakeGpuProbe*>(&probe_)) {
    // Without GPUs, a pod's CPU use stands in for its GPU use: a trainer
    // computing is busy, a debug shell waiting for input is idle.
    static const double kTickS = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    std::map<LocalPod*, double> activity;
    for (auto& [key, lp] : pods_) {
      const double cpu = lp.pod->CpuSeconds();
      activity[&lp] = FakeGpuActivity(cpu - lp.cpu_s_at_sample, interval_s, config_.fake_busy_cpu_share, kTickS);
      lp.cpu_s_at_sample = cpu;
    }
    for (const GpuDevice& gpu : inventory_.gpus) {
      auto it = holder.find(gpu.index);
      fake->SetLoad(gpu.index, it != holder.end(), it != holder.end() ? activity[it->second] : 0);
    }
  }
  auto samples = probe_.Sample();
  if (!samples.ok()) {
    fmt::print(stderr, "agent {}: GPU sample: {}\n", config_.name, samples.status().message());
    return;
  }
  samples_ = std::move(samples).value();
  for (auto& [key, lp] : pods_) {
    const auto& gpus = lp.pod->spec().gpus;
    if (gpus.empty()) continue;
    double sum = 0;
    for (int gpu : gpus) {
      for (const GpuSample& s : samples_) {
        if (s.gpu_index == gpu) sum += s.utilization_pct / 100.0;
      }
    }
    lp.utilization = sum / static_cast<double>(gpus.size());
    const Pod::Phase phase = lp.pod->phase();
    if (phase != Pod::Phase::kRunning && phase != Pod::Phase::kReady) continue;
    // No phase: a report, not a transition (the server would otherwise
    // count another start).
    PodEvent e;
    e.key = key;
    e.time_ms = now_ms;
    e.utilization = std::clamp(lp.utilization, 0.0, 1.0);
    const int64_t checkpoint_ms = lp.pod->LastCheckpointMs();
    if (checkpoint_ms > lp.reported_checkpoint_ms) {
      e.checkpoint_time_ms = checkpoint_ms;
      lp.reported_checkpoint_ms = checkpoint_ms;
    }
    outbox_.push_back(std::move(e));
  }
}

void Agent::ReportLoad(int64_t now_ms) {
  for (auto& [key, lp] : pods_) {
    auto load = lp.pod->ReadLoad();
    if (!load) continue;
    PodEvent e;
    e.key = key;
    e.time_ms = now_ms;
    e.load = *load;
    outbox_.push_back(std::move(e));
  }
}

void Agent::Reconcile(const std::vector<PodSpec>& desired, int64_t now_ms, uint64_t exits_before) {
  std::vector<PodEvent> events;
  bool new_pods = false;
  std::set<PodKey> listed;
  // Local ranks: this workload's pods on this node, in rank order.
  std::map<uint64_t, std::vector<int>> ranks_here;
  for (const PodSpec& spec : desired) {
    if (spec.desired_run) ranks_here[spec.key.workload].push_back(spec.key.rank);
  }
  for (auto& [w, ranks] : ranks_here) std::sort(ranks.begin(), ranks.end());

  for (const PodSpec& spec : desired) {
    listed.insert(spec.key);
    auto it = pods_.find(spec.key);
    if (it == pods_.end()) {
      if (!spec.desired_run) {
        // Asked to stop a pod that does not run here (placed and stopped
        // between two syncs, or lost with an earlier agent): say it has
        // exited, so the server frees its GPUs now rather than at the
        // grace deadline. A retiring run of the same rank is not it, and a
        // run whose exit was delivered after this list was asked for has
        // been reported already.
        if (delivered_exits_.count(spec.key)) continue;
        const bool retiring = std::any_of(retiring_.begin(), retiring_.end(), [&](const LocalPod& lp) {
          return lp.pod->spec().key == spec.key;
        });
        if (!retiring && absent_stop_reported_.insert(spec.key).second) {
          PodEvent e;
          e.key = spec.key;
          e.phase = "exited";
          e.time_ms = now_ms;
          e.reason = "stopped before start: not running on this node";
          events.push_back(std::move(e));
        }
        continue;
      }
      if (auto d = delivered_exits_.find(spec.key); d != delivered_exits_.end()) {
        if (d->second > exits_before) continue;  // a list older than the exit
        delivered_exits_.erase(d);
      }
      PodOptions options = BasePodOptions();
      options.pod_dir = PodDir(spec.key);
      options.checkpoint_dir = config_.checkpoint_root + "/" + spec.checkpoint_dir_key;
      const auto& ranks = ranks_here[spec.key.workload];
      options.local_rank = static_cast<int>(
          std::lower_bound(ranks.begin(), ranks.end(), spec.key.rank) - ranks.begin());
      options.local_world_size = static_cast<int>(ranks.size());
      // The serving port: the declared one while it is free on this node,
      // else (another replica here holds it, or none was declared) a free
      // one. Pods listen on $PORT, so the probes follow the pod.
      if (spec.readiness || spec.load_endpoint) {
        const int declared = spec.readiness ? spec.readiness->port : spec.load_endpoint->port;
        if (declared > 0 && !PortUsedLocally(declared) && PortIsFree(declared)) {
          options.port = declared;
        } else if (auto port = PickFreePort(); port.ok()) {
          options.port = *port;
        }
      }
      it = pods_.emplace(spec.key, LocalPod{std::make_unique<Pod>(spec, std::move(options))}).first;
      new_pods = true;
    }
    if (!spec.desired_run) {
      StopNotice notice = spec.notice.value_or(StopNotice{
          "stop", now_ms, now_ms + config_.default_grace.count(), SIGTERM});
      it->second.pod->Stop(notice, now_ms, events);
    }
  }
  for (auto it = absent_stop_reported_.begin(); it != absent_stop_reported_.end();) {
    it = listed.count(*it) ? std::next(it) : absent_stop_reported_.erase(it);
  }
  for (auto it = delivered_exits_.begin(); it != delivered_exits_.end();) {
    it = it->second <= exits_before && !listed.count(it->first) ? delivered_exits_.erase(it) : std::next(it);
  }
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (listed.count(it->first)) {
      ++it;
      continue;
    }
    Pod& pod = *it->second.pod;
    if (pod.phase() == Pod::Phase::kExited) {
      it = pods_.erase(it);  // the server has seen its exit
      continue;
    }
    // A pod the server no longer lists must not run. The server has
    // forgotten it (e.g. its gang was requeued when another node was lost),
    // so it retires out of the key map: its exit is not reported (it would
    // be taken for a later run of the same rank), and a new listing of the
    // same rank is a new pod.
    std::vector<PodEvent> ignored;
    pod.Stop(StopNotice{"removed", now_ms, now_ms + config_.default_grace.count(), SIGTERM},
             now_ms, ignored);
    retiring_.push_back(std::move(it->second));
    it = pods_.erase(it);
  }
  for (PodEvent& e : events) outbox_.push_back(std::move(e));
  // New pods to launch, or events for Tick to hand to the sync thread: tick
  // now rather than at the period's end.
  if (new_pods || !events.empty()) {
    tick_wanted_ = true;
    tick_cv_.notify_one();
  }
}

bool Agent::PortUsedLocally(int port) const {
  for (const auto& [key, lp] : pods_) {
    if (lp.pod->options().port == port && lp.pod->phase() != Pod::Phase::kExited) return true;
  }
  return false;
}

void Agent::Heartbeat(int64_t now_ms, std::unique_lock<std::mutex>& lock) {
  // Local time moves on while a call is in flight; what the reply starts
  // (a notice's receive time) is stamped when it arrives.
  const int64_t wall_before = WallClockMs();
  auto arrival = [&] { return now_ms + std::max<int64_t>(0, WallClockMs() - wall_before); };
  if (!registered_) {
    const json body = RegisterBody();
    lock.unlock();
    auto lease = server_.Register(body);
    lock.lock();
    if (!lease.ok()) {
      fmt::print(stderr, "agent {}: register: {}\n", config_.name, lease.status().message());
      next_heartbeat_ms_ = arrival() + 1000;
      return;
    }
    lease_ = *lease;
    registered_ = true;
  }
  const json body = HeartbeatBody();
  const uint64_t exits_before = exits_delivered_;
  heartbeat_now_ = false;
  lock.unlock();
  auto reply = server_.Heartbeat(config_.name, body);
  lock.lock();
  const int64_t arrived_ms = arrival();
  next_heartbeat_ms_ = now_ms + sync_interval().count();
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kNotFound) registered_ = false;
    fmt::print(stderr, "agent {}: heartbeat: {}\n", config_.name, reply.status().message());
    return;
  }
  ++heartbeats_sent_;
  auto decoded = protocol::HeartbeatReplyFromJson(*reply);
  if (!decoded.ok()) {
    fmt::print(stderr, "agent {}: heartbeat reply: {}\n", config_.name, decoded.status().message());
    return;
  }
  if (decoded->lease_s) lease_.lease_s = *decoded->lease_s;
  if (decoded->pods && !watching_) Reconcile(*decoded->pods, arrived_ms, exits_before);
}

void Agent::WatchPods(const std::function<bool()>& stop, Duration tick) {
  std::string version;
  auto pause = [&](Duration d) {
    for (auto until = std::chrono::steady_clock::now() + d; !stop() && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(tick);
    }
  };
  while (!stop()) {
    bool registered = false;
    uint64_t exits_before = 0;
    {
      std::lock_guard lock(mu_);
      registered = registered_;
      exits_before = exits_delivered_;
      if (!registered) {
        watching_ = false;
        version.clear();
      }
    }
    if (!registered) {
      pause(tick);
      continue;
    }
    auto reply = server_.WatchPods(config_.name, version, kPodWatchWait);
    StatusOr<protocol::PodAssignmentList> list =
        reply.ok() ? protocol::PodAssignmentListFromJson(*reply) : StatusOr<protocol::PodAssignmentList>(reply.status());
    std::unique_lock lock(mu_);
    if (!list.ok()) {
      watching_ = false;
      version.clear();
      if (list.status().code() == StatusCode::kFailedPrecondition) return;  // heartbeats carry the pods
      lock.unlock();
      if (!stop()) fmt::print(stderr, "agent {}: pod watch: {}\n", config_.name, list.status().message());
      pause(seconds(1));
      continue;
    }
    // A server without the watch answers at once with no version: asking
    // again would spin. Its heartbeat replies carry the pods.
    if (list->version.empty()) {
      watching_ = false;
      return;
    }
    watching_ = true;
    version = list->version;
    Reconcile(list->pods, WallClockMs(), exits_before);
  }
}

// Every exit event is queued when the exit happens; once it is delivered
// the server knows of the exit and stops listing the pod, so the pod is
// forgotten: if a list asked for later names the same rank, that is a new
// run, which needs a fresh Pod (delivered_exits_ keeps the lists in flight
// meanwhile from starting it again). Events queued while a batch is in
// flight wait for the next one (Tick goes on meanwhile).
void Agent::SendEvents(std::unique_lock<std::mutex>& lock) {
  while (outbox_.size() > kMaxOutbox) outbox_.pop_front();
  if (outbox_.empty()) return;
  const size_t batch = outbox_.size();
  protocol::PodEventBatch events;
  std::set<PodKey> exits;
  for (const PodEvent& e : outbox_) {
    events.events.push_back(e);
    if (e.phase == "exited") exits.insert(e.key);
  }
  lock.unlock();
  Status sent = server_.ReportEvents(config_.name, protocol::PodEventBatchToJson(events));
  lock.lock();
  if (!sent.ok() && sent.code() != StatusCode::kInvalidArgument) {
    fmt::print(stderr, "agent {}: pod status: {}\n", config_.name, sent.message());
    return;
  }
  if (sent.ok()) {
    events_sent_ += static_cast<int64_t>(batch);
  } else {
    // A rejected batch would be rejected forever; say so and move on.
    fmt::print(stderr, "agent {}: pod status rejected, dropping {} event(s): {}\n", config_.name,
               batch, sent.message());
  }
  outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(batch));
  if (!exits.empty()) ++exits_delivered_;
  for (const PodKey& key : exits) {
    auto it = pods_.find(key);
    if (it == pods_.end() || it->second.pod->phase() != Pod::Phase::kExited) continue;
    pods_.erase(it);
    delivered_exits_[key] = exits_delivered_;
  }
  // Bounded: a server that never lists again leaves entries behind.
  while (delivered_exits_.size() > kMaxOutbox) delivered_exits_.erase(delivered_exits_.begin());
}

void Agent::ShipLogs(std::unique_lock<std::mutex>& lock) {
  for (const auto& [key, lp] : pods_) {
    auto [it, fresh] = log_cursors_.try_emplace(key);
    LogCursor& c = it->second;
    if (fresh || c.pod_dir != lp.pod->options().pod_dir) c = LogCursor{lp.pod->options().pod_dir};
    c.idle_syncs = 0;
  }
  protocol::PodLogBatch batch;
  std::map<PodKey, LogCursor> advanced;
  int64_t total = 0;
  for (const auto& [key, cursor] : log_cursors_) {
    if (total >= kMaxLogUploadBytes) break;
    LogCursor next = cursor;
    std::string data = ReadNewLog(cursor.pod_dir + "/stdout.log", &next.stdout_offset, kMaxLogBytesPerStream);
    data += ReadNewLog(cursor.pod_dir + "/stderr.log", &next.stderr_offset, kMaxLogBytesPerStream);
    if (!pods_.count(key) && data.empty()) ++next.idle_syncs;
    if (!data.empty()) {
      total += static_cast<int64_t>(data.size());
      batch.chunks.push_back({key, std::move(data)});
    }
    advanced.emplace(key, std::move(next));
  }
  Status sent = Status::Ok();
  if (!batch.chunks.empty()) {
    const json body = protocol::PodLogBatchToJson(batch);
    lock.unlock();
    sent = server_.ShipLogs(config_.name, body);
    lock.lock();
  }
  // A rejected upload would be rejected again: move on past it too.
  if (!sent.ok() && sent.code() != StatusCode::kInvalidArgument) {
    fmt::print(stderr, "agent {}: pod logs: {}\n", config_.name, sent.message());
    return;
  }
  for (auto& [key, next] : advanced) {
    auto it = log_cursors_.find(key);
    if (it == log_cursors_.end() || it->second.pod_dir != next.pod_dir) continue;
    if (next.idle_syncs >= kLogIdleSyncsAfterExit) {
      log_cursors_.erase(it);
    } else {
      it->second = std::move(next);
    }
  }
}

void Agent::Step(int64_t now_ms) {
  Tick(now_ms);
  Sync(now_ms);
}

void Agent::Sync(int64_t now_ms) {
  std::unique_lock lock(mu_);
  if (heartbeat_now_ || now_ms >= next_heartbeat_ms_) Heartbeat(now_ms, lock);
  // Logs before events: the server takes a pod's output while the pod is
  // placed, which its exit event ends.
  if (registered_) ShipLogs(lock);
  SendEvents(lock);
  // The files are Tick's to write: what a reply changed shows on the next.
}

void Agent::Tick(int64_t now_ms) {
  std::unique_lock lock(mu_);
  TouchLease(now_ms);
  for (const GpuFault& fault : probe_.PollFaults()) {
    fmt::print(stderr, "agent {}: GPU {} fault: {} {}\n", config_.name, fault.gpu_index,
               GpuFaultKindName(fault.kind), fault.code);
    failed_gpus_.insert(fault.gpu_index);
    last_fault_[fault.gpu_index] = fault;
    heartbeat_now_ = true;
  }
  if (now_ms >= next_sample_ms_) {
    Sample(now_ms);
    next_sample_ms_ = now_ms + config_.sample_interval.count();
  }

  std::vector<PodEvent> ignored;
  GpuMask retiring_gpus = 0;
  for (auto it = retiring_.begin(); it != retiring_.end();) {
    it->pod->Tick(now_ms, ignored);
    if (it->pod->phase() == Pod::Phase::kExited) {
      it = retiring_.erase(it);
      continue;
    }
    for (int gpu : it->pod->spec().gpus) retiring_gpus |= GpuMask{1} << gpu;
    ++it;
  }
  std::vector<PodEvent> events;
  for (auto& [key, lp] : pods_) {
    if (lp.pod->phase() == Pod::Phase::kWaitingForSlot) {
      // A retiring pod still on one of its GPUs goes first.
      GpuMask mine = 0;
      for (int gpu : lp.pod->spec().gpus) mine |= GpuMask{1} << gpu;
      if ((mine & retiring_gpus) == 0) lp.pod->TryLaunch(now_ms, events);
    }
    lp.pod->Tick(now_ms, events);
  }
  for (PodEvent& e : events) outbox_.push_back(std::move(e));
  if (now_ms >= next_load_ms_) {
    ReportLoad(now_ms);
    next_load_ms_ = now_ms + config_.load_interval.count();
  }
  WriteFiles();
  if (!outbox_.empty() || !pods_.empty() || !retiring_.empty() || !log_cursors_.empty() || heartbeat_now_) {
    sync_wanted_ = true;
    sync_cv_.notify_one();
  }
}

void Agent::Run(const std::function<bool()>& stop, Duration tick) {
  std::thread sync([&] {
    while (!stop()) {
      {
        std::lock_guard lock(mu_);
        sync_wanted_ = false;
      }
      Sync(WallClockMs());
      // A short window to gather what comes next into one request; then
      // until Tick wants a sync or the next heartbeat is due.
      std::this_thread::sleep_for(kEventBatchWindow);
      std::unique_lock lock(mu_);
      const Duration due(std::max<int64_t>(0, next_heartbeat_ms_ - WallClockMs()));
      sync_cv_.wait_for(lock, due, [&] { return sync_wanted_ || stop(); });
    }
  });
  std::atomic<bool> watch_done{false};
  std::thread watch([&] {
    WatchPods(stop, tick);
    watch_done = true;
  });
  // Pods' keepers kill their pods when the lease file goes stale (the
  // orphan timeout, half the node's lease). Tick can take a while when
  // busy replicas answer readiness and load probes slowly, so the file is
  // kept fresh by a thread that does nothing else.
  std::thread lease([&] {
    while (!stop()) {
      TouchLeaseFile();
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  while (!stop()) {
    Tick(WallClockMs());
    // Until the next tick, a pod list that wants one now, or stop (polled:
    // the caller's flag cannot notify).
    std::unique_lock lock(mu_);
    const auto next = std::chrono::steady_clock::now() + tick;
    while (!tick_wanted_ && !stop() && std::chrono::steady_clock::now() < next) {
      tick_cv_.wait_until(lock, std::min(next, std::chrono::steady_clock::now() + kStopPoll));
    }
    tick_wanted_ = false;
  }
  {
    std::lock_guard lock(mu_);
    sync_cv_.notify_all();  // its predicate sees stop()
    tick_cv_.notify_all();
  }
  // A long-poll in flight ends when its connection is shut; one that was
  // just being opened is caught by the next try.
  while (!watch_done) {
    server_.CancelWatch();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  watch.join();
  lease.join();
  sync.join();
}

void Agent::Detach() {
  std::unique_lock lock(mu_);
  WriteFiles();  // the state file keeps every pod for the next agent
  for (auto& [key, lp] : pods_) lp.pod->Detach();
  for (LocalPod& lp : retiring_) lp.pod->Detach();
  pods_.clear();
  retiring_.clear();
}

void Agent::Shutdown(Duration grace) {
  // Pods stopped because the agent goes away did not finish: reporting
  // their exits would tell the server a rank completed. They are not
  // reported; the node's lease (or the agent's return) settles them.
  std::unique_lock lock(mu_);
  std::vector<PodEvent> ignored;
  const int64_t start = WallClockMs();
  for (auto& [key, lp] : pods_) {
    lp.pod->Stop(StopNotice{"agent_shutdown", start, start + grace.count(), SIGTERM}, start,
                 ignored);
  }
  while (true) {
    const int64_t now = WallClockMs();
    TouchLease(now);
    bool running = false;
    for (auto& [key, lp] : pods_) {
      lp.pod->Tick(now, ignored);
      if (lp.pod->phase() != Pod::Phase::kExited) running = true;
    }
    for (LocalPod& lp : retiring_) {
      lp.pod->Tick(now, ignored);
      if (lp.pod->phase() != Pod::Phase::kExited) running = true;
    }
    if (!running || now > start + grace.count() + 5000) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  SendEvents(lock);  // what was already queued before the shutdown
  pods_.clear();
  retiring_.clear();
  WriteFiles();
}

std::set<int> Agent::failed_gpus() const {
  std::lock_guard lock(mu_);
  return failed_gpus_;
}

int64_t Agent::events_sent() const {
  std::lock_guard lock(mu_);
  return events_sent_;
}

int64_t Agent::heartbeats_sent() const {
  std::lock_guard lock(mu_);
  return heartbeats_sent_;
}

std::vector<PodView> Agent::Pods() const {
  std::lock_guard lock(mu_);
  return PodsLocked();
}

std::vector<PodView> Agent::PodsLocked() const {
  std::vector<PodView> views;
  std::vector<const LocalPod*> all;
  for (const auto& [key, lp] : pods_) all.push_back(&lp);
  for (const LocalPod& lp : retiring_) all.push_back(&lp);
  for (const LocalPod* p : all) {
    const LocalPod& lp = *p;
    PodView v;
    v.key = lp.pod->spec().key;
    v.name = lp.pod->spec().name;
    v.kind = lp.pod->spec().kind;
    v.phase = Pod::PhaseName(lp.pod->phase());
    v.pid = lp.pod->pid();
    v.workload_pid = lp.pod->workload_pid();
    v.launch_ms = lp.pod->launch_ms();
    v.port = lp.pod->options().port;
    v.gpus = lp.pod->spec().gpus;
    v.pod_dir = lp.pod->options().pod_dir;
    v.utilization = lp.utilization;
    views.push_back(std::move(v));
  }
  return views;
}

namespace {

// Temp file + rename: a reader (loadgen, an adopting agent) never sees half.
bool ReplaceFile(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << text;
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  return !ec;
}

}  // namespace

void Agent::WriteFiles() {
  FilesShown shown;
  shown.revisions.reserve(pods_.size() + retiring_.size());
  for (const auto& [key, lp] : pods_) shown.revisions.push_back(lp.pod->revision());
  shown.pods = pods_.size();
  for (const LocalPod& lp : retiring_) shown.revisions.push_back(lp.pod->revision());
  shown.failed_gpus = failed_gpus_;
  if (shown == files_shown_) return;

  json pods = json::array();
  for (const PodView& v : PodsLocked()) {
    pods.push_back({{"workload", v.key.workload}, {"rank", v.key.rank},
                    {"attempt", v.key.attempt}, {"name", v.name}, {"kind", v.kind},
                    {"phase", v.phase}, {"pid", v.pid}, {"workload_pid", v.workload_pid},
                    {"launch_ms", v.launch_ms}, {"port", v.port}, {"gpus", v.gpus}, {"pod_dir", v.pod_dir}});
  }
  json failed = json::array();
  for (int g : failed_gpus_) failed.push_back(g);
  const std::string text =
      json{{"node", config_.name}, {"agent_pid", getpid()}, {"failed_gpus", failed},
           {"pods", pods}}.dump(1) + "\n";
  const bool pods_written = ReplaceFile(config_.work_dir + "/pods.json", text);

  json saved = json::array(), saved_retiring = json::array();
  for (const auto& [key, lp] : pods_) {
    if (json s = lp.pod->SaveState(); !s.is_null()) saved.push_back(std::move(s));
  }
  for (const LocalPod& lp : retiring_) {
    if (json s = lp.pod->SaveState(); !s.is_null()) saved_retiring.push_back(std::move(s));
  }
  const std::string state =
      json{{"node", config_.name}, {"pods", saved}, {"retiring", saved_retiring}}.dump() + "\n";
  if (ReplaceFile(config_.work_dir + "/agent-state.json", state) && pods_written) {
    files_shown_ = std::move(shown);
  }
}

}  // namespace tidal::agent
