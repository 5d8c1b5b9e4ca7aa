#include "agent/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/core.h>
#include <httplib.h>

#include "agent/http_get.h"
#include "agent/token_source.h"
#include "protocol/leader_redirect.h"

extern char** environ;

namespace tidal::agent {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string RandomToken() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

std::vector<std::string> ParentEnv() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    // Children get their token explicitly; never a stale one from here.
    if (std::string_view(*e).starts_with("TIDAL_TOKEN=")) continue;
    env.emplace_back(*e);
  }
  return env;
}

// Waits up to `timeout` for the process to exit; true if it did.
bool WaitExit(PodProcess& p, Duration timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (p.Poll()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return p.Poll().has_value();
}

std::string Tail(const std::string& path, size_t bytes = 2000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

// Asks the replicas in turn, going to the leader a follower names (only
// one of `urls`), until one answers other than "not the leader".
StatusOr<json> Call(const std::vector<std::string>& urls, const std::string& ca_file, const std::string& token,
                    const std::string& method, const std::string& path, const json* body) {
  std::string url = urls.front();
  std::string tried;
  for (size_t attempt = 0; attempt < 2 * urls.size(); ++attempt) {
    httplib::Client client(url);
    if (!ca_file.empty()) client.set_ca_cert_path(ca_file.c_str());
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(30, 0);
    client.set_default_headers({{"Authorization", "Bearer " + token}});
    auto res = method == "GET" ? client.Get(path.c_str())
                               : client.Post(path.c_str(), body->dump(), "application/json");
    std::optional<protocol::NotLeaderReply> not_leader;
    if (res && res->status == 503) not_leader = protocol::NotLeaderReplyFromJson(json::parse(res->body, nullptr, false));
    if (res && !not_leader) {
      if (res->status < 200 || res->status >= 300) {
        return FailedPrecondition(fmt::format("{} {}: {} {}", method, path, res->status, res->body));
      }
      json reply = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
      if (reply.is_discarded()) return Internal(fmt::format("{} {}: reply is not JSON", method, path));
      return reply;
    }
    tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", url,
                         res ? not_leader->message : httplib::to_string(res.error()));
    auto it = std::find(urls.begin(), urls.end(), url);
    if (not_leader && std::find(urls.begin(), urls.end(), not_leader->leader_url) != urls.end()) {
      url = not_leader->leader_url;
    } else {
      url = urls[(it - urls.begin() + 1) % urls.size()];
    }
  }
  return Unavailable(fmt::format("{} {}: {}", method, path, tried));
}

}  // namespace

std::vector<LocalNodeOptions> DefaultLocalNodes(int count, int gpus) {
  std::vector<LocalNodeOptions> nodes;
  for (int i = 1; i <= count; ++i) {
    LocalNodeOptions n;
    n.name = fmt::format("node-{}", i);
    n.gpus = gpus;
    n.nvlink = gpus % 2 == 0 && gpus >= 2 ? fmt::format("2x{}", gpus / 2) : "none";
    if (count >= 3 && i == 1) n.pool = "inference-reserved";
    if (count >= 3 && i == 2) n.pool = "shared";
    nodes.push_back(n);
  }
  return nodes;
}

StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(LocalClusterOptions options) {
  if (options.nodes.empty()) return InvalidArgument("nodes: at least one node");
  if (access(options.tidal_binary.c_str(), X_OK) != 0) {
    return InvalidArgument(fmt::format("tidal binary '{}' is not executable", options.tidal_binary));
  }
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(std::move(options)));
  std::error_code ec;
  fs::create_directories(cluster->options_.work_dir + "/checkpoints", ec);
  if (ec) return Internal(fmt::format("{}: {}", cluster->options_.work_dir, ec.message()));
  cluster->admin_token_ = RandomToken();
  cluster->agent_token_ = RandomToken();
  if (cluster->options_.server_port > 0) {
    cluster->port_ = cluster->options_.server_port;
  } else {
    TIDAL_ASSIGN_OR_RETURN(cluster->port_, PickFreePort());
  }
  const bool tls = !cluster->options_.tls_cert_file.empty();
  cluster->url_ = fmt::format("{}://127.0.0.1:{}", tls ? "https" : "http", cluster->port_);
  cluster->urls_ = {cluster->url_};
  const int replicas = cluster->options_.ha_replicas;
  if (replicas == 1 || replicas < 0 || replicas > 7) return InvalidArgument("ha_replicas: 0, or 2 to 7");
  if (replicas > 0 && tls) return InvalidArgument("ha_replicas: not with TLS (replicas serve plain HTTP)");
  if (replicas > 0) {
    cluster->urls_.clear();
    cluster->replica_ports_ = {cluster->port_};
    while (static_cast<int>(cluster->replica_ports_.size()) < replicas) {
      TIDAL_ASSIGN_OR_RETURN(int port, PickFreePort());
      cluster->replica_ports_.push_back(port);
    }
    for (int port : cluster->replica_ports_) cluster->urls_.push_back(fmt::format("http://127.0.0.1:{}", port));
    cluster->url_.clear();
    for (const std::string& u : cluster->urls_) cluster->url_ += (cluster->url_.empty() ? "" : ",") + u;
  }
  TIDAL_RETURN_IF_ERROR(cluster->WriteConfig());
  if (replicas > 0) {
    TIDAL_RETURN_IF_ERROR(cluster->StartEtcd());
    cluster->replicas_.resize(replicas);
    for (int i = 0; i < replicas; ++i) TIDAL_RETURN_IF_ERROR(cluster->StartReplica(i));
    TIDAL_RETURN_IF_ERROR(cluster->WaitForLeader());
  } else {
    TIDAL_RETURN_IF_ERROR(cluster->StartServer());
  }
  for (size_t i = 0; i < cluster->options_.nodes.size(); ++i) {
    TIDAL_RETURN_IF_ERROR(cluster->StartAgent(i));
  }
  // Ready once every node has registered.
  const auto end = std::chrono::steady_clock::now() + cluster->options_.start_timeout;
  while (true) {
    auto nodes = cluster->Get("/v1/nodes");
    size_t registered = 0;
    if (nodes.ok()) {
      for (const json& n : (*nodes)["nodes"]) registered += n.value("registered", false) ? 1 : 0;
    }
    if (registered >= cluster->options_.nodes.size()) break;
    if (std::chrono::steady_clock::now() > end) {
      return Unavailable(fmt::format("only {} of {} agents registered in time; see {}/*/agent.log",
                                     registered, cluster->options_.nodes.size(),
                                     cluster->options_.work_dir));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return cluster;
}

Status LocalCluster::WriteConfig() {
  const std::string& dir = options_.work_dir;
  int serving_gpus = 0, training_gpus = 0;
  std::string nodes;
  for (const LocalNodeOptions& n : options_.nodes) {
    (n.pool == "training" ? training_gpus : serving_gpus) += n.gpus;
    const int memory_gib = [&] {
      const size_t dash = n.gpu_model.rfind('-');
      return dash == std::string::npos ? 80 : std::atoi(n.gpu_model.c_str() + dash + 1);
    }();
    nodes += fmt::format(
        "  - {{name: {}, pool: {}, gpus: {}, gpu_model: {}, gpu_memory_gib: {}, nvlink: {}}}\n",
        n.name, n.pool, n.gpus, n.gpu_model, memory_gib, n.nvlink);
  }
  std::ofstream cluster(dir + "/cluster.yaml", std::ios::trunc);
  cluster << "# Written by tidal up / LocalCluster.\n"
          << "pools: [inference-reserved, shared, training]\n"
          << "nodes:\n" << nodes
          << "queues:\n"
          // Serving may lend all of its idle guarantee: the pools keep
          // training off inference-reserved nodes, and the loan planner
          // takes shared nodes back when inference needs them.
          << fmt::format("  - {{name: serving, guaranteed_gpus: {}, "
                         "pools: [inference-reserved, shared]}}\n", serving_gpus)
          << fmt::format("  - {{name: research, guaranteed_gpus: {}, pools: [training, shared]}}\n",
                         training_gpus)
          << "projects:\n"
          << "  - {name: chat-serving, tenant: chat, tier: standard, queue: serving}\n"
          << "  - {name: llm, tenant: research, tier: standard, queue: research}\n"
          << "  - {name: sandbox, tenant: research, tier: experiment, queue: research}\n";
  std::ofstream policy(dir + "/policy.yaml", std::ios::trunc);
  policy << "# Written by tidal up / LocalCluster: the default policy with short\n"
            "# timings so that a laptop-sized demo moves in seconds.\n"
            "templates:\n"
            "  - name: default\n"
            "    tiers:\n"
            "      critical: {base: 1000, preemptibility: never, requires_approval: true}\n"
            "      standard: {base: 500, preemptibility: preemptible}\n"
            "      experiment: {base: 100, preemptibility: reclaimable}\n"
            "    fallback_tier: standard\n"
            "    attributes:\n"
            "      kind_bonus: {training: 0, inference: 500, batch_inference: -50, debug: 100}\n"
            "      non_interruptible_bonus: 100\n"
            "      checkpointed_bonus: 50\n"
            "      near_deadline_bonus: 200\n"
            "      near_deadline_window_s: 3600\n"
            "    budget: {within_guarantee: 0, borrowing: -200, over_budget: -400}\n"
            "    require_checkpoint_to_borrow: true\n"
         << fmt::format("preemption: {{default_grace_s: {}, min_runtime_s: 0, min_priority_gap: 1}}\n",
                        options_.default_grace_s)
         << fmt::format("colocation: {{mode: reactive, headroom: 0.2, scale_down_delay_s: {}, "
                        "forecast_horizon_s: 60}}\n", options_.scale_down_delay_s)
         << "backfill: true\n";
  std::ofstream server(dir + "/server.yaml", std::ios::trunc);
  server << "# Written by tidal up / LocalCluster.\n"
         << "cluster_file: cluster.yaml\n"
         << "policy_file: policy.yaml\n"
         << fmt::format("listen: 127.0.0.1:{}\n", port_)
         << fmt::format("store: sqlite:{}/tidal.db\n", dir)
         << "schedule_interval_ms: 500\n"
         << fmt::format("node_lease_s: {}\n", options_.node_lease_s)
         << fmt::format("heartbeat_interval_s: {}\n", options_.heartbeat_interval_s)
         << fmt::format("debug_idle_limit_s: {}\n", options_.debug_idle_limit_s);
  if (!options_.tls_cert_file.empty()) {
    server << fmt::format("tls_cert_file: \"{}\"\ntls_key_file: \"{}\"\n", options_.tls_cert_file,
                          options_.tls_key_file);
  }
  server
         << "tokens:\n"
         << fmt::format("  - {{name: admin, role: admin, token: \"{}\"}}\n", admin_token_)
         << fmt::format("  - {{name: agents, role: agent, token: \"{}\"}}\n", agent_token_);
  server.close();
  if (!cluster || !policy || !server) return Internal(fmt::format("writing configs in {}", dir));
  // The agents' bootstrap token, in a file only this user can read: not in
  // their environment, where their pods could read it.
  return WriteTokenFile(dir + "/agent.token", agent_token_);
}

Status LocalCluster::StartServer() {
  ProcessSpec spec;
  spec.argv = {options_.tidal_binary, "server", "--config", options_.work_dir + "/server.yaml"};
  spec.env = ParentEnv();
  spec.work_dir = options_.work_dir;
  spec.stdout_path = spec.stderr_path = options_.work_dir + "/server.log";
  spec.log_rate_bytes_per_s = 0;
  spec.log_max_bytes = 64 << 20;
  TIDAL_ASSIGN_OR_RETURN(server_, PodProcess::Start(spec));
  const auto end = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (auto exit = server_->Poll()) {
      return Unavailable(fmt::format("tidal server {}:\n{}", exit->Describe(),
                                     Tail(options_.work_dir + "/server.log")));
    }
    if (options_.tls_cert_file.empty()) {
      auto ready = HttpGet("127.0.0.1", port_, "/readyz", milliseconds(500));
      if (ready.ok() && ready->status == 200) return Status::Ok();
    } else {
      // /readyz answers text, not JSON: not a Call().
      httplib::Client client(url_);
      client.set_ca_cert_path(options_.ca_file.c_str());
      client.set_connection_timeout(0, 500'000);
      auto ready = client.Get("/readyz");
      if (ready && ready->status == 200) return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Unavailable(fmt::format("tidal server not ready at {} in time:\n{}", url_,
                                 Tail(options_.work_dir + "/server.log")));
}

std::string LocalCluster::node_dir(size_t i) const {
  return (options_.nodes_dir.empty() ? options_.work_dir : options_.nodes_dir) + "/" + options_.nodes[i].name;
}

Status LocalCluster::StartAgent(size_t i) {
  const LocalNodeOptions& node = options_.nodes[i];
  const std::string dir = node_dir(i);
  std::error_code ec;
  fs::create_directories(dir, ec);
  ProcessSpec spec;
  spec.argv = {options_.tidal_binary,
               "agent",
               "--server", url_,  // every replica's, with HA
               "--name", node.name,
               "--gpus", fmt::format("fake:{}x{},nvlink={},uuid={}", node.gpus, node.gpu_model,
                                     node.nvlink, node.name),
               "--work-dir", dir,
               "--checkpoint-root", options_.work_dir + "/checkpoints",
               "--sync-interval-ms", std::to_string(options_.agent_sync_ms),
               "--sample-interval-ms", std::to_string(options_.agent_sample_ms),
               "--tick-ms", std::to_string(options_.agent_tick_ms),
               "--default-grace-s", fmt::format("{}", options_.default_grace_s),
               "--shutdown-grace-s", "5",
               "--token-file", options_.work_dir + "/agent.token"};
  if (!options_.ca_file.empty()) {
    spec.argv.push_back("--ca-file");
    spec.argv.push_back(options_.ca_file);
  }
  // A local cluster run as root is a developer's: its pods run as root too.
  if (geteuid() == 0) spec.argv.push_back("--allow-root-pods");
  if (options_.agent_nice != 0) {
    spec.argv.insert(spec.argv.begin(), {"nice", "-n", std::to_string(options_.agent_nice)});
  }
  spec.env = ParentEnv();
  spec.work_dir = dir;
  spec.stdout_path = spec.stderr_path = dir + "/agent.log";
  spec.log_rate_bytes_per_s = 0;
  if (agents_.size() <= i) agents_.resize(i + 1);
  TIDAL_ASSIGN_OR_RETURN(agents_[i], PodProcess::Start(spec));
  return Status::Ok();
}

void LocalCluster::KillAgent(size_t i, int sig) {
  if (i >= agents_.size() || !agents_[i]) return;
  kill(agents_[i]->workload_pid(), sig);  // the agent itself, not its keeper
  WaitExit(*agents_[i], seconds(10));
}

void LocalCluster::KillServer(int sig) {
  if (!server_) return;
  server_->SignalGroup(sig);
  WaitExit(*server_, seconds(10));
  // The keeper is reaped, and the server's main thread shows as a zombie,
  // while its other threads may still be exiting and holding the store's
  // lock (server/sqlite_store.cc): wait until the lock can be taken, so that
  // a restart does not find it held.
  const std::string lock_path = options_.work_dir + "/tidal.db.lock";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  const auto end = std::chrono::steady_clock::now() + seconds(10);
  while (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (fd >= 0) close(fd);  // releases it
  server_.reset();
}

Status LocalCluster::RestartServer() {
  if (server_) return FailedPrecondition("the server is still running");
  return StartServer();
}

Status LocalCluster::InjectXid(size_t i, int gpu, int xid) {
  std::ofstream out(node_dir(i) + "/gpu-faults", std::ios::app);
  out << fmt::format("xid {} {}\n", gpu, xid);
  out.close();
  return out ? Status::Ok() : Internal("writing the fault control file");
}

StatusOr<json> LocalCluster::Get(const std::string& path) const {
  return Call(urls_, options_.ca_file, admin_token_, "GET", path, nullptr);
}

StatusOr<json> LocalCluster::Post(const std::string& path, const json& body) const {
  return Call(urls_, options_.ca_file, admin_token_, "POST", path, &body);
}

Status LocalCluster::StartEtcd() {
  if (access(options_.etcd_binary.c_str(), X_OK) != 0) {
    return FailedPrecondition(fmt::format("HA needs etcd at {} (Debian: apt-get install etcd-server)",
                                          options_.etcd_binary));
  }
  const int members = options_.ha_replicas;
  std::vector<std::pair<int, int>> ports;  // client, peer
  std::string initial;
  for (int i = 0; i < members; ++i) {
    TIDAL_ASSIGN_OR_RETURN(int client, PickFreePort());
    TIDAL_ASSIGN_OR_RETURN(int peer, PickFreePort());
    ports.emplace_back(client, peer);
    initial += fmt::format("{}e{}=http://127.0.0.1:{}", i ? "," : "", i, peer);
  }
  etcd_store_url_ = "etcd://";
  for (int i = 0; i < members; ++i) {
    const auto [client, peer] = ports[i];
    etcd_client_ports_.push_back(client);
    etcd_store_url_ += fmt::format("{}127.0.0.1:{}", i ? "," : "", client);
    const std::string dir = fmt::format("{}/etcd/e{}", options_.work_dir, i);
    std::error_code ec;
    fs::create_directories(dir, ec);
    ProcessSpec spec;
    spec.argv = {options_.etcd_binary, "--name", fmt::format("e{}", i), "--data-dir", dir + "/data",
                 "--listen-client-urls", fmt::format("http://127.0.0.1:{}", client),
                 "--advertise-client-urls", fmt::format("http://127.0.0.1:{}", client),
                 "--listen-peer-urls", fmt::format("http://127.0.0.1:{}", peer),
                 "--initial-advertise-peer-urls", fmt::format("http://127.0.0.1:{}", peer),
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "tidal-up", "--logger", "zap", "--log-level", "warn"};
    spec.env = ParentEnv();
    spec.work_dir = dir;
    spec.stdout_path = spec.stderr_path = dir + "/etcd.log";
    spec.log_rate_bytes_per_s = 0;
    etcd_.emplace_back();
    TIDAL_ASSIGN_OR_RETURN(etcd_.back(), PodProcess::Start(spec));
  }
  const auto end = std::chrono::steady_clock::now() + options_.start_timeout;
  for (int i = 0; i < members; ++i) {
    while (true) {
      auto health = HttpGet("127.0.0.1", ports[i].first, "/health", milliseconds(500));
      if (health.ok() && health->status == 200 && health->body.find("\"true\"") != std::string::npos) break;
      if (std::chrono::steady_clock::now() > end) {
        return Unavailable(fmt::format("etcd member e{} not healthy in time; see {}/etcd/e{}/etcd.log", i,
                                       options_.work_dir, i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

Status LocalCluster::StartReplica(size_t i) {
  if (i >= replicas_.size()) return InvalidArgument(fmt::format("replica {}: there are {}", i, replicas_.size()));
  if (replicas_[i]) return FailedPrecondition(fmt::format("replica {} is running", i));
  ProcessSpec spec;
  spec.argv = {options_.tidal_binary, "server", "--config", options_.work_dir + "/server.yaml",
               "--store", etcd_store_url_, "--listen", fmt::format("127.0.0.1:{}", replica_ports_[i]),
               "--advertise", urls_[i]};
  spec.env = ParentEnv();
  spec.work_dir = options_.work_dir;
  spec.stdout_path = spec.stderr_path = fmt::format("{}/server-{}.log", options_.work_dir, i);
  spec.log_rate_bytes_per_s = 0;
  spec.log_max_bytes = 64 << 20;
  TIDAL_ASSIGN_OR_RETURN(replicas_[i], PodProcess::Start(spec));
  return Status::Ok();
}

Status LocalCluster::WaitForLeader() {
  const auto end = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (leader() >= 0) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Unavailable(fmt::format("no replica leads after {} s; see {}/server-*.log",
                                 std::chrono::duration_cast<seconds>(options_.start_timeout).count(),
                                 options_.work_dir));
}

int LocalCluster::leader() const {
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (!replicas_[i]) continue;
    auto ready = HttpGet("127.0.0.1", replica_ports_[i], "/readyz", milliseconds(500));
    if (ready.ok() && ready->status == 200) return static_cast<int>(i);
  }
  return -1;
}

void LocalCluster::SignalEtcdMember(size_t i, int sig) {
  if (i < etcd_.size() && etcd_[i]) etcd_[i]->SignalGroup(sig);
}

int LocalCluster::etcd_leader() const {
  for (size_t i = 0; i < etcd_client_ports_.size(); ++i) {
    auto metrics = HttpGet("127.0.0.1", etcd_client_ports_[i], "/metrics", milliseconds(500), size_t{4} << 20);
    if (metrics.ok() && metrics->body.find("\netcd_server_is_leader 1") != std::string::npos) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

void LocalCluster::KillReplica(size_t i, int sig) {
  if (i >= replicas_.size() || !replicas_[i]) return;
  replicas_[i]->SignalGroup(sig);
  WaitExit(*replicas_[i], seconds(10));
  replicas_[i].reset();
}

json LocalCluster::LocalPods() const {
  json all = json::array();
  for (size_t i = 0; i < options_.nodes.size(); ++i) {
    // A dead agent's pods.json is stale (and its pods died with it).
    if (agent_pid(i) <= 0 || !ProcessGroupAlive(agent_pid(i))) continue;
    std::ifstream in(node_dir(i) + "/pods.json");
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("pods")) continue;
    for (json pod : j["pods"]) {
      pod["node"] = options_.nodes[i].name;
      all.push_back(pod);
    }
  }
  return all;
}

void LocalCluster::Stop() {
  for (auto& agent : agents_) {
    if (agent && !agent->Poll()) agent->SignalGroup(SIGTERM);
  }
  for (auto& agent : agents_) {
    if (agent && !WaitExit(*agent, seconds(15))) agent->SignalGroup(SIGKILL);
    agent.reset();
  }
  for (auto* group : {&replicas_, &etcd_}) {
    for (auto& p : *group) {
      if (p && !p->Poll()) {
        p->SignalGroup(SIGTERM);
        p->SignalGroup(SIGCONT);  // an etcd member a test paused
      }
    }
    for (auto& p : *group) {
      if (p && !WaitExit(*p, seconds(10))) p->SignalGroup(SIGKILL);
      p.reset();
    }
  }
  if (server_) {
    if (!server_->Poll()) server_->SignalGroup(SIGTERM);
    if (!WaitExit(*server_, seconds(10))) server_->SignalGroup(SIGKILL);
    server_.reset();
  }
}

LocalCluster::~LocalCluster() { Stop(); }

}  // namespace tidal::agent
