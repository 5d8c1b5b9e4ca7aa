// The control plane's state machine: admission, cancel/approve/resize, the
// agent protocol, and the scheduling loop that runs ColocationController::
// Prepare and Scheduler::Schedule and applies their decisions. HTTP lives in
// http_api.h; this class knows callers only as Principals.
//
// Concurrency: one mutex guards all state. A mutating call validates, changes
// the in-memory state, queues the change in the store (under the lock, so the
// store sees changes in state order), releases the lock and waits until the
// change is durable before it returns; so a caller that got an answer knows
// the change survives a crash. The engine runs on a copy of the state,
// outside the lock; its decisions are re-checked against the state when they
// are applied (a workload cancelled meanwhile is not placed).
#ifndef TIDAL_SERVER_CONTROL_PLANE_H_
#define TIDAL_SERVER_CONTROL_PLANE_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/colocation/colocation_controller.h"
#include "core/common/status.h"
#include "core/engine/scheduler.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/server_config.h"
#include "server/store.h"
#include "server/workload_record.h"

namespace tidal::server {

struct ListFilter {
  std::string tenant, project, queue, kind, state;
  int limit = 500;
};

struct SubmitResult {
  nlohmann::json workload;
  bool replayed = false;  // an Idempotency-Key retry: nothing was applied
};

struct ReportQuery {
  int64_t from_ms = 0;
  int64_t to_ms = INT64_MAX;
  std::string tenant;   // "" = all (admins only)
  std::string project;  // "" = all
};

class ControlPlane {
 public:
  ControlPlane(ServerConfig config, std::unique_ptr<Store> store, const Clock& clock);
  ~ControlPlane();

  // Loads the store into memory. Call once before anything else.
  Status Recover();
  bool ready() const;

  // The scheduling loop thread: passes on Kick() (at most every
  // min_pass_gap) and every schedule_interval.
  void StartLoop();
  void StopLoop();
  // One pass now, on the caller's thread (tests, and the loop).
  void RunPass();
  // An event (submit, exit, approval) worth a pass soon.
  void Kick();

  StatusOr<SubmitResult> Submit(const Principal& who, const nlohmann::json& body,
                                const std::string& idempotency_key);
  StatusOr<nlohmann::json> Get(const Principal& who, uint64_t id) const;
  StatusOr<nlohmann::json> List(const Principal& who, const ListFilter& filter) const;
  StatusOr<nlohmann::json> Cancel(const Principal& who, uint64_t id);
  StatusOr<nlohmann::json> Resize(const Principal& who, uint64_t id, const nlohmann::json& body);
  StatusOr<nlohmann::json> Approve(const Principal& who, uint64_t id);
  StatusOr<nlohmann::json> Explain(const Principal& who, uint64_t id) const;
  StatusOr<nlohmann::json> DryRun(const Principal& who, const nlohmann::json& body) const;
  StatusOr<nlohmann::json> Queues(const Principal& who) const;
  StatusOr<nlohmann::json> Nodes(const Principal& who) const;
  StatusOr<nlohmann::json> Audit(const Principal& who, AuditQuery query) const;
  StatusOr<nlohmann::json> Report(const Principal& who, const ReportQuery& query) const;

  // Agent protocol (docs/api.md).
  StatusOr<nlohmann::json> RegisterNode(const Principal& who, const nlohmann::json& body);
  StatusOr<nlohmann::json> Heartbeat(const Principal& who, const std::string& node,
                                     const nlohmann::json& body);
  StatusOr<nlohmann::json> NodePods(const Principal& who, const std::string& node) const;
  StatusOr<nlohmann::json> PodStatus(const Principal& who, const std::string& node,
                                     const nlohmann::json& body);

  Metrics& metrics() { return metrics_; }
  // Counters, histograms and the state gauges, in Prometheus text format.
  std::string MetricsText() const;
  const ServerConfig& config() const { return config_; }

 private:
  struct NodeRuntime {
    bool registered = false;
    bool lost = false;
    std::string address = "127.0.0.1";
    int64_t last_heartbeat_ms = 0;
    std::vector<double> gpu_utilization;
    std::vector<double> gpu_memory_used_gib;
    nlohmann::json registration;  // the body, as stored
  };
  struct Admitted {
    WorkloadRecord record;
    std::vector<std::string> priority_lines;
  };

  // All private helpers expect mu_ held.
  StatusOr<Admitted> Admit(const Principal& who, const nlohmann::json& body, Time now) const;
  Snapshot BuildSnapshot(Time now) const;
  int QueueUsedGpus(QueueId q) const;
  GpuMask UsedGpus(NodeId node) const;
  void Persist(Mutation& m, const WorkloadRecord& r) const;
  void AddAudit(Mutation& m, const std::string& actor, const std::string& action,
                const WorkloadRecord* r, nlohmann::json detail, Time now);
  uint64_t Enqueue(Mutation m);
  WorkloadRecord* Find(uint64_t id);
  const WorkloadRecord* Find(uint64_t id) const;
  void IndexAllocation(const WorkloadRecord& r, bool add);
  // Frees a workload's GPUs and moves it to `state` (pending = requeued).
  // `reason` is taken by value: callers pass r.stop->cause, which this clears.
  void Release(WorkloadRecord& r, WorkloadState state, std::string reason, Time now,
               Mutation& m, const std::string& actor);
  void GiveNotice(WorkloadRecord& r, const std::string& cause, Time now, Time grace_deadline);
  void MarkNodeLost(NodeId n, Time now, Mutation& m);
  void ExpireAndReap(Time now, Mutation& m);
  void ApplyDecisions(const Decisions& d, const Snapshot& snap, Time now, Mutation& m);
  nlohmann::json PodsFor(NodeId node) const;
  nlohmann::json NodeToJsonLocked(NodeId n) const;
  void PersistNode(NodeId n, Mutation& m) const;
  Status ApplyRegistration(const nlohmann::json& body, NodeId* id);
  void LoopMain();

  ServerConfig config_;
  std::unique_ptr<Store> store_;
  const Clock& clock_;
  Metrics metrics_;
  Scheduler scheduler_;
  ColocationController colocation_;  // the loop thread's only

  mutable std::mutex mu_;
  bool ready_ = false;
  std::map<uint64_t, WorkloadRecord> records_;
  std::set<uint64_t> active_;
  std::vector<std::set<uint64_t>> node_workloads_;  // by NodeId
  std::vector<int> queue_used_gpus_;                 // by QueueId, kept by IndexAllocation
  std::vector<NodeRuntime> node_rt_;                  // by NodeId
  std::map<std::string, uint64_t> idempotency_;
  std::set<std::string> idempotency_in_flight_;
  uint64_t next_id_ = 1;
  int64_t next_audit_seq_ = 1;
  uint64_t last_seq_ = 0;
  std::vector<std::tuple<WorkloadId, Time, double>> observed_load_;
  std::vector<bool> lent_nodes_;
  int64_t last_pass_ms_ = 0;
  double last_pass_s_ = 0;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool kicked_ = false;
  bool stopping_ = false;
  std::thread loop_;
  std::mutex pass_mu_;  // one pass at a time
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_CONTROL_PLANE_H_
