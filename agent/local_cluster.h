// A whole Tidal cluster on one machine: a control plane (`tidal server` on
// an embedded SQLite store, or HA replicas on etcd) and N node agents with fake GPUs, each a child
// process on loopback with its own work directory. `tidal up` runs one for
// people; the end-to-end tests run one per test.
//
// Layout under work_dir: server.yaml, cluster.yaml, policy.yaml, tidal.db,
// server.log, checkpoints/ (shared by all nodes, as shared storage would be),
// and per node NAME/ (agent.log, pods.json, gpu-faults, pods/...; under
// nodes_dir instead when that is set).
// Children are SIGKILLed if the process that started them dies, so an
// aborted test or a killed `tidal up` leaves nothing behind.
#ifndef TIDAL_AGENT_LOCAL_CLUSTER_H_
#define TIDAL_AGENT_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/pod_process.h"
#include "core/common/status.h"
#include "core/common/time.h"

namespace tidal::agent {

struct LocalNodeOptions {
  std::string name;
  std::string pool = "training";  // inference-reserved | shared | training
  int gpus = 4;
  std::string gpu_model = "H100-80GB";
  std::string nvlink = "2x2";  // fake probe syntax: AxB or none
};

struct LocalClusterOptions {
  std::string tidal_binary;  // build/tidal
  std::string work_dir;      // created; left in place for inspection
  std::vector<LocalNodeOptions> nodes;
  int server_port = 0;       // 0 = a free port
  double node_lease_s = 4;
  double heartbeat_interval_s = 1;
  double debug_idle_limit_s = 60;
  double default_grace_s = 10;
  double scale_down_delay_s = 20;
  int agent_sync_ms = 300;
  int agent_sample_ms = 1000;
  int agent_tick_ms = 50;
  Duration start_timeout = seconds(30);
  // TLS (all three set, PEM files): the server serves https:// only, and the
  // agents and Get/Post verify its certificate against `ca_file`.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string ca_file;
  // High availability (issue #13): with ha_replicas >= 2, that many etcd
  // members (`etcd_binary`, data under work_dir/etcd/) and that many
  // servers on one etcd store, of which the elected one leads; agents and
  // Get/Post follow the leader. 0 = one server on SQLite.
  int ha_replicas = 0;
  std::string etcd_binary = "/usr/bin/etcd";
  // Where the nodes' directories go ("" = work_dir), and the agents'
  // niceness, which their pods inherit. A benchmark that runs hundreds of
  // nodes beside the server on one small machine can so give them a disk and
  // a CPU share of their own, as nodes on their own machines would have.
  std::string nodes_dir;
  int agent_nice = 0;
};

// `count` nodes named node-1.. with `gpus` each; node-1 is inference-reserved
// and node-2 shared when there are at least 3 nodes, the rest training.
std::vector<LocalNodeOptions> DefaultLocalNodes(int count, int gpus);

class LocalCluster {
 public:
  static StatusOr<std::unique_ptr<LocalCluster>> Start(LocalClusterOptions options);
  ~LocalCluster();  // Stop()

  // Stops agents (they stop their pods with notice), then the server (the
  // replicas, then etcd).
  void Stop();

  // What --server takes: the server's URL, or every replica's, comma-separated.
  const std::string& url() const { return url_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& agent_token() const { return agent_token_; }
  const LocalClusterOptions& options() const { return options_; }
  std::string node_dir(size_t i) const;
  pid_t server_pid() const { return server_ ? server_->pid() : -1; }
  pid_t agent_pid(size_t i) const { return i < agents_.size() && agents_[i] ? agents_[i]->pid() : -1; }
  // Signals one agent (kill -9 in the lost-node test); reaps it.
  void KillAgent(size_t i, int sig);
  // Signals the server (kill -9 in the crash tests) and reaps it; then
  // starts it again on the same store and port, waiting until it is ready.
  void KillServer(int sig);
  Status RestartServer();
  // HA: the replica that leads now (its /readyz answers 200), or -1.
  int leader() const;
  pid_t replica_pid(size_t i) const { return i < replicas_.size() && replicas_[i] ? replicas_[i]->pid() : -1; }
  const std::vector<std::string>& replica_urls() const { return urls_; }
  // HA: signals replica i and reaps it / starts it again on its port.
  void KillReplica(size_t i, int sig);
  Status StartReplica(size_t i);
  // HA: signals etcd member i's process group (SIGSTOP: the member stops
  // answering, as behind a partition; SIGCONT: it answers again).
  void SignalEtcdMember(size_t i, int sig);
  size_t etcd_members() const { return etcd_.size(); }
  // HA: the etcd member that is Raft leader now (etcd_server_is_leader), or -1.
  int etcd_leader() const;
  // Appends "xid GPU CODE" to node i's fake-GPU control file.
  Status InjectXid(size_t i, int gpu, int xid);

  // Admin-token API calls; non-2xx replies become errors with the body.
  StatusOr<nlohmann::json> Get(const std::string& path) const;
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) const;
  // Every pod every live agent runs (from their pods.json), with "node".
  // Agents that died are left out: their files are stale.
  nlohmann::json LocalPods() const;

 private:
  explicit LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}
  Status WriteConfig();
  Status StartServer();
  Status StartAgent(size_t i);
  Status StartEtcd();
  // Waits until one replica leads.
  Status WaitForLeader();

  LocalClusterOptions options_;
  std::string url_;
  int port_ = 0;
  std::string admin_token_;
  std::string agent_token_;
  std::unique_ptr<PodProcess> server_;
  std::vector<std::unique_ptr<PodProcess>> agents_;
  // HA: the replicas' URLs and ports (urls_ is {url_} without HA), the
  // replicas, the etcd members and the store they share.
  std::vector<std::string> urls_;
  std::vector<int> replica_ports_;
  std::vector<std::unique_ptr<PodProcess>> replicas_;
  std::vector<std::unique_ptr<PodProcess>> etcd_;
  std::vector<int> etcd_client_ports_;
  std::string etcd_store_url_;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_LOCAL_CLUSTER_H_
