// The control plane: admission, cancel/approve/resize, the agent protocol,
// and the scheduling loop that runs ColocationController::Prepare and
// Scheduler::Schedule. HTTP lives in http_api.h; this class knows callers
// only as Principals.
//
// The committed state is a core StateMachine (core/state/), the same one the
// simulator runs: every change the engine can see (a submit, an exit, a
// node lost, a decision, a timer) is a typed edit applied by the machine.
// Its sink journals each applied edit and brings the API's records (who
// submitted what, run history, audits, metrics) up to date in React. A
// replay of the journal (`tidal sim replay`) therefore reruns exactly what
// the server decided.
//
// Concurrency: one mutex guards all state. A mutating call validates, applies
// its edits, queues the change in the store (under the lock, so the store
// sees changes in state order), releases the lock and waits until the change
// is durable before it returns; so a caller that got an answer knows the
// change survives a crash. Reads answer only with committed state. A pass
// runs co-location and the engine under the lock on the machine's live
// snapshot (copying 50,000 workloads costs more than the engine does); the
// loop leaves at least as long as a pass took between passes, so requests
// get at least half the time.
#ifndef TIDAL_SERVER_CONTROL_PLANE_H_
#define TIDAL_SERVER_CONTROL_PLANE_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/colocation/colocation_controller.h"
#include "core/common/status.h"
#include "core/diagnosis/slo_diagnosis.h"
#include "core/diagnosis/wait_diagnosis.h"
#include "core/engine/scheduler.h"
#include "core/state/state_machine.h"
#include "protocol/journal_record.h"
#include "protocol/pod_assignment.h"
#include "server/auth.h"
#include "server/journal_snapshot_writer.h"
#include "server/metrics.h"
#include "server/node_pods_watch.h"
#include "server/overload_guard.h"
#include "server/pod_log_store.h"
#include "server/server_config.h"
#include "server/store.h"
#include "server/workload_record.h"

namespace tidal {
struct LoanCalendarOptions;  // core/colocation/loan_calendar.h
}  // namespace tidal

namespace tidal::server {

struct ListFilter {
  std::string tenant, project, queue, kind, state;
  int limit = 500;
};

// One submit (POST /v1/workloads) or a batch (POST /v1/workloads:batch):
// admitted all or none, in one store change.
struct SubmitRequest {
  std::vector<nlohmann::json> bodies;  // one unless `batch`
  std::string idempotency_key;         // "" = none
  bool batch = false;
};

struct SubmitResult {
  // In the request's order: each workload's API form as JSON text
  // (RecordToText, written under the state lock without a tree), and ids.
  std::vector<std::string> workloads;
  std::vector<uint64_t> ids;
  bool replayed = false;  // an Idempotency-Key retry: nothing was applied
};

// How Recover builds the control plane: to lead (it journals its restart
// and serves writes), or as a follower's read view of a store copy
// (server/follower_reads.h: it writes nothing and says nothing).
enum class RecoverAs { kLeader, kReadOnlyView };

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
  Status Recover(RecoverAs as = RecoverAs::kLeader);
  bool ready() const;
  // The co-location forecaster's peak over [from, to] and whether its daily
  // profile is in use (a warm start from the stored load samples makes it so
  // after a restart).
  double PeakLoadForecast(WorkloadId service, Time from, Time to) const;
  bool HasDailyLoadProfile(WorkloadId service) const;

  // The scheduling loop thread: passes on Kick() (at most every
  // min_pass_gap) and every schedule_interval.
  void StartLoop();
  void StopLoop();
  // One pass now, on the caller's thread (tests, and the loop).
  void RunPass();
  // An event (submit, exit, approval) worth a pass soon.
  void Kick();
  // Waits until the journal snapshot in flight (if any) is durable: the
  // snapshots are written off the state lock, on a thread of their own.
  Status FlushJournalSnapshot();

  StatusOr<SubmitResult> Submit(const Principal& who, const SubmitRequest& request);
  // Submit without waiting, the HTTP layer's submit route: no handler
  // thread sleeps on the fsync. `encode` turns the result into the reply's
  // text on the caller's thread while the store commits; `done` gets that
  // text once it is durable, on the store's writer thread (which every
  // durable change waits behind, so it only hands the text on), or the
  // refusal at once.
  struct EncodedSubmit {
    std::string text;
    bool replayed = false;
  };
  using SubmitEncoder = std::function<std::string(SubmitResult&)>;
  using SubmitCallback = std::function<void(StatusOr<EncodedSubmit>)>;
  void SubmitAsync(const Principal& who, const SubmitRequest& request, const SubmitEncoder& encode,
                   SubmitCallback done);
  StatusOr<nlohmann::json> Get(const Principal& who, uint64_t id) const;
  StatusOr<nlohmann::json> List(const Principal& who, const ListFilter& filter) const;
  StatusOr<nlohmann::json> Cancel(const Principal& who, uint64_t id);
  StatusOr<nlohmann::json> Resize(const Principal& who, uint64_t id, const nlohmann::json& body);
  StatusOr<nlohmann::json> Approve(const Principal& who, uint64_t id);
  // An operator cordons a node (no new work lands there; what runs stays) or
  // uncordons it (work lands again on its GPUs that have not failed). Admin
  // only; the reply is the node as GET /v1/nodes shows it.
  StatusOr<nlohmann::json> Cordon(const Principal& who, const std::string& node, bool cordoned);
  StatusOr<nlohmann::json> Explain(const Principal& who, uint64_t id) const;
  StatusOr<nlohmann::json> DryRun(const Principal& who, const nlohmann::json& body) const;
  StatusOr<nlohmann::json> Queues(const Principal& who) const;
  StatusOr<nlohmann::json> Nodes(const Principal& who) const;
  // The loan calendar from now (core/colocation/loan_calendar.h), as
  // protocol/loan_calendar.h encodes it. A user sees every shared node's
  // plan but only their own tenant's services.
  StatusOr<nlohmann::json> Loans(const Principal& who, const LoanCalendarOptions& options) const;
  StatusOr<nlohmann::json> Audit(const Principal& who, AuditQuery query) const;
  StatusOr<nlohmann::json> Report(const Principal& who, const ReportQuery& query) const;

  // Agent protocol (docs/api.md). Registration takes the bootstrap (agent)
  // token, a node's own credential or an admin; the rest a node's own
  // credential or an admin (403, audited, otherwise).
  StatusOr<nlohmann::json> RegisterNode(const Principal& who, const nlohmann::json& body);
  StatusOr<nlohmann::json> Heartbeat(const Principal& who, const std::string& node,
                                     const nlohmann::json& body);
  StatusOr<nlohmann::json> NodePods(const Principal& who, const std::string& node);
  // The long-poll form (server/node_pods_watch.h): `done` gets the node's
  // pods once their version differs from `version`, or after `wait` as they
  // are. It is called on this thread when the answer is immediate (a
  // different version, a refusal), else from the watch's thread.
  using PodsCallback = std::function<void(StatusOr<nlohmann::json>)>;
  void WatchNodePods(const Principal& who, const std::string& node, const std::string& version, Duration wait,
                     PodsCallback done);
  // Answers every parked watch now (the HTTP layer's shutdown: their
  // responders must not outlive it).
  void AnswerPodWatches();
  // The node a credential issued at registration belongs to, by the
  // credential's digest (BearerTokenDigest of the request's Authorization
  // header); Unauthenticated when unknown.
  StatusOr<Principal> AuthenticateNode(const std::string& token_sha256_hex) const;
  StatusOr<nlohmann::json> PodStatus(const Principal& who, const std::string& node,
                                     const nlohmann::json& body);
  // Pod output (control_plane_logs.cc): an agent's upload
  // (protocol::PodLogBatch), taken for ranks placed on its node (or whose
  // log that node began); and a page of one rank's output for a caller who
  // may see the workload.
  StatusOr<nlohmann::json> PodLogs(const Principal& who, const std::string& node,
                                   const nlohmann::json& body);
  StatusOr<nlohmann::json> WorkloadLogs(const Principal& who, uint64_t id, int rank,
                                        int64_t from_offset) const;

  Metrics& metrics() { return metrics_; }
  // Seats, submit rates and failed-authentication budgets (the HTTP layer
  // asks it; node-access refusals are audited within it).
  OverloadGuard& overload() { return overload_; }
  // Counters, histograms and the state gauges, in Prometheus text format.
  // `http_connections`: the HTTP layer's open connections (-1: no HTTP
  // layer, e.g. in-process tests; the gauge is left out).
  std::string MetricsText(int http_connections = -1) const;
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
    std::string credential_sha256;  // of the credential last issued; "" = none
    // An admin's registration may set pool, labels and taints; an agent's
    // only repeats the cluster file's.
    bool registered_by_admin = false;
  };
  struct Admitted {
    WorkloadRecord record;
    std::vector<std::string> priority_lines;
  };

  // What the edits being applied belong to: the store change they join, who
  // made them (for audits), and the decisions they come from (for the audit
  // details an edit does not carry). Set by ApplyScope around each apply.
  struct Applying {
    Mutation* m = nullptr;
    std::string actor;
    std::string reason;  // why a requeue or release happens ("" = from the edit)
    const Decisions* decisions = nullptr;
    std::set<uint64_t> resized;  // resize audits already written this batch
  };
  // Sets what the edits applied in its lifetime belong to; mu_ held.
  class ApplyScope {
   public:
    ApplyScope(ControlPlane& cp, Mutation& m, std::string actor) : cp_(cp), saved_(std::move(cp.applying_)) {
      cp_.applying_ = Applying{};
      cp_.applying_.m = &m;
      cp_.applying_.actor = std::move(actor);
    }
    ~ApplyScope() { cp_.applying_ = std::move(saved_); }
    ApplyScope(const ApplyScope&) = delete;
    ApplyScope& operator=(const ApplyScope&) = delete;

   private:
    ControlPlane& cp_;
    Applying saved_;
  };

  // Private helpers expect mu_ held unless they say otherwise.
  // `check_feasible` false: the caller (a dry run) calls CheckFeasible
  // itself, to answer "never" rather than refuse.
  StatusOr<Admitted> Admit(const Principal& who, const nlohmann::json& body, Time now,
                           bool check_feasible = true) const;
  // Refuses work no node or the whole cluster could ever hold. Under mu_.
  Status CheckFeasible(const Workload& w) const;
  // Journal records between two journal snapshots: snapshot_every_records,
  // or the state's workloads and nodes if more. Under mu_.
  int64_t SnapshotInterval() const;
  // The engine's view of the stored records at recovery.
  Snapshot RecoveredSnapshot(Time now) const;
  // Feeds the journal's load samples of the last kLoadHistoryWindow to the
  // co-location forecaster (Recover); returns how many.
  StatusOr<int64_t> WarmStartForecaster(Time now);
  // Applies one edit at the clock's now (mu_ held, inside an ApplyScope).
  Status ApplyEdit(const state::Edit& edit, state::EditOrigin origin = state::EditOrigin::kWorld);
  // The machine's sink: journals the edit and updates the records.
  void OnApplied(Time at, state::EditOrigin origin, const state::Edit& edit);
  void React(state::EditOrigin origin, const state::Edit& edit);
  void ReactPlace(WorkloadRecord& r, const state::PlaceEdit& e);
  void ReactNotice(WorkloadRecord& r, state::EditOrigin origin, const state::NoticeEdit& e);
  void ReactResize(WorkloadRecord& r, const state::Edit& edit);
  void ReactNode(NodeId n);
  // Metrics (control_plane_metrics.cc): the families, their series at 0 for
  // every label set known from the catalog, and the co-location loans.
  void DefineMetrics();
  void ZeroKnownSeries() const;
  void ZeroNodeSeries(const std::string& node) const;
  void CountLoan(NodeId node, bool lend, Time now);
  void LoanGauges(GaugeWriter& g, Time now) const;
  // Copies the machine's workload and allocation into the record.
  void SyncRecord(WorkloadRecord& r);
  void JournalMarker(protocol::PassPhase phase);
  int QueueUsedGpus(QueueId q) const;
  GpuMask UsedGpus(NodeId node) const;
  bool IsLent(NodeId node) const;
  // Marks the record for the next Enqueue's write and the next priority
  // refresh.
  void MarkChanged(const WorkloadRecord& r);
  void AddAudit(Mutation& m, const std::string& actor, const std::string& action,
                const WorkloadRecord* r, nlohmann::json detail, Time now);
  uint64_t Enqueue(Mutation m);
  // Ok, or 503 naming the store's failure: every mutating call checks it
  // before it changes anything (read-only mode). mu_ may be held.
  Status Writable() const;
  // What reads wait on: WaitDurable, except that a failed store still lets
  // reads answer (from memory). mu_ not held.
  Status ReadBarrier(uint64_t seq) const;
  WorkloadRecord* Find(uint64_t id);
  // A workload `who` may change: found, of its tenant, not yet ended.
  StatusOr<WorkloadRecord*> FindChangeable(const Principal& who, uint64_t id);
  // Replies once change `seq` is durable, and wakes the loop. mu_ not held.
  StatusOr<nlohmann::json> Acknowledge(uint64_t seq, nlohmann::json reply);
  const WorkloadRecord* Find(uint64_t id) const;
  // The last pass's explanation of a pending workload; nullptr for one that
  // is not pending or was not in that pass. mu_ held.
  const WaitDecision* LastWait(const WorkloadRecord& r) const;
  // The API form of a record, with its last wait.
  nlohmann::json RecordJson(const WorkloadRecord& r) const;
  void IndexAllocation(const WorkloadRecord& r, bool add);
  // Ends the open run intervals (usage reports, project budget spent).
  void CloseRuns(WorkloadRecord& r, int64_t now_ms, const std::string& reason);
  // The record's side of a pod exit: the allocation's pod `pod` and its
  // rank's state go. Where ranks are not kept (server/pod_ranks.h), the
  // later pods' ranks move down by one, as their places in the list did.
  void RemovePod(WorkloadRecord& r, size_t pod);
  // The preemption the current stop notice belongs to, if any.
  PreemptionRecord* OpenPreemption(WorkloadRecord& r);
  // Re-derives priorities whose inputs changed (budget state, deadlines).
  void RecordReplicaLoad(WorkloadRecord& w, int rank, double rps, double p95, double p99, Time at);
  // The record's side of a requeue or release (the machine has freed the
  // GPUs): run history, the preemption's exit, the audit.
  // `reason` is taken by value: callers pass r.stop->cause, which this clears.
  void ReleaseView(WorkloadRecord& r, WorkloadState state, std::string reason, Time now);
  // Ends a stopped workload whose pods are gone: requeued, or cancelled when
  // its notice (or a cancel during it) said it ends for good.
  void EndStopped(WorkloadRecord& r);
  // The record's side of the lifecycle declaring `n` lost (its lease ran
  // out): the runtime flag, the metric and the audit, before the lifecycle's
  // requeues of its work apply.
  void ReactNodeLost(NodeId n, Time now);
  // The lease inputs of the lifecycle: before each pass's tick, a node whose
  // applied lease falls due and that heartbeated since gets a LeaseEdit to
  // its last heartbeat plus the lease (journaled). Heartbeats between two
  // due leases change memory only, so the journal grows by about one lease
  // per node per lease period, not one record per heartbeat.
  void RenewLeases(Time now);
  // The idle input of the lifecycle: a debug session whose smoothed
  // utilization crossed idle_utilization gets an IdleEdit (reclaim at now +
  // debug_idle_limit when it went idle, none when it is busy again); a
  // sample that crosses nothing changes memory only.
  void ReportUtilization(WorkloadRecord& r, Time now);
  // Every pod on `n` is gone: gangs with a pod there requeue whole, pods a
  // shrink was removing just exit. Inside an ApplyScope; applying_.reason
  // says why.
  void EvictPods(NodeId n);
  // Ok when `who` may touch node `node`'s objects; else the 403, audited.
  // mu_ not held.
  Status CheckNodeCaller(const Principal& who, const std::string& node);
  // A fresh credential for `n`, replacing the one issued before.
  void IssueCredential(NodeId n, std::string* credential);
  // A scale-up the lifecycle judged (ready, or timed out).
  void ReactScaleUpEnd(WorkloadRecord& r, const state::ScaleUpEndEdit& e, Time now);
  void ApplyDecisions(Decisions d);
  std::vector<protocol::PodAssignment> PodsFor(NodeId node) const;
  // Submit up to its store change: admits every workload, then applies and
  // enqueues them together; returns the seq to wait for (the last queued,
  // for an idempotent replay).
  StatusOr<uint64_t> EnqueueSubmit(const Principal& who, const SubmitRequest& request, SubmitResult* result);
  // The node's desired pods, once the store has everything they reflect.
  StatusOr<std::vector<protocol::PodAssignment>> DesiredPods(const std::string& node,
                                                             std::string* version = nullptr) const;
  nlohmann::json NodeToJsonLocked(NodeId n) const;
  void PersistNode(NodeId n, Mutation& m) const;
  struct ParsedRegistration {
    Node node;
    std::optional<NodeId> existing;
    std::string zone, rack;  // "" = keep the node's
    std::string address = "127.0.0.1";
  };
  StatusOr<ParsedRegistration> ParseRegistration(const nlohmann::json& body, bool by_admin) const;
  NodeId CommitRegistration(ParsedRegistration reg, const nlohmann::json& body);
  void LoopMain();

  ServerConfig config_;
  PodLogStore pod_logs_;  // its own lock; not under mu_
  std::unique_ptr<Store> store_;
  const Clock& clock_;
  // Mutable: a scrape (const) adds the 0 series of queues and nodes it finds.
  mutable Metrics metrics_;
  JournalSnapshotWriter snapshot_writer_;  // after store_ and metrics_, which it writes
  OverloadGuard overload_;
  Scheduler scheduler_;
  ColocationController colocation_;  // under pass_mu_

  mutable std::mutex mu_;
  bool ready_ = false;
  std::map<uint64_t, WorkloadRecord> records_;
  // CheckFeasible's largest node and total GPUs, as of a cluster version:
  // each submit asks, and a walk of 10,000 nodes under the lock took 9 % of
  // the server's time beside 10,000 agents.
  struct ClusterSize {
    uint64_t cluster_version = 0;  // 0 = not computed
    size_t nodes = 0;
    int largest_node_gpus = 0;
    int total_gpus = 0;
  };
  mutable ClusterSize cluster_size_;
  std::set<uint64_t> active_;
  // Unfinished workloads (those in active_) by tenant: what
  // tenant_max_unfinished bounds.
  std::map<std::string, int> unfinished_by_tenant_;
  std::set<uint64_t> allocated_;  // ids holding GPUs, kept by IndexAllocation
  std::set<uint64_t> to_persist_;  // ids whose record the next Enqueue writes
  std::vector<std::set<uint64_t>> node_workloads_;  // by NodeId
  std::vector<NodeRuntime> node_rt_;                  // by NodeId
  std::map<std::string, NodeId> node_by_credential_;  // SHA-256 hex of a node credential -> node
  std::map<std::string, uint64_t> idempotency_;
  uint64_t next_id_ = 1;
  int64_t next_audit_seq_ = 1;
  uint64_t last_seq_ = 0;
  // The seq the store gave (or will give) the last journal record enqueued,
  // and the records since the latest snapshot: the Enqueue that brings it
  // to config_.snapshot_every_records hands a copy of the state to
  // snapshot_writer_ (or a later one, while a snapshot is in flight).
  int64_t journal_seq_ = 0;
  int64_t since_snapshot_ = 0;
  std::vector<std::tuple<WorkloadId, Time, double>> observed_load_;
  // The committed state (built at Recover); its sink is OnApplied.
  std::optional<state::StateMachine> machine_;
  Applying applying_;
  // The last pass's waits (ApplyDecisions), and their index by workload id,
  // built by the first LastWait after the pass.
  std::vector<WaitDecision> last_waits_;
  mutable std::unordered_map<uint64_t, uint32_t> last_wait_index_;
  mutable bool last_waits_indexed_ = false;
  // Diagnosis (core/diagnosis, as the simulator's): the SLO diagnosis is
  // told every applied edit (OnApplied); each waiting training workload's
  // wait is charged to the engine's reasons pass by pass.
  diagnosis::SloDiagnosis slo_diag_;
  std::unordered_map<uint64_t, diagnosis::WaitTally> wait_tallies_;
  // Encoded journal records of the edits applied since the last Enqueue.
  std::vector<std::string> journal_;
  int64_t last_pass_ms_ = 0;
  // Open loans by node (when lent) and the GPU-hours of loans that ended, by
  // pool, for tidal_lent_gpu_hours_total / tidal_returned_gpu_hours_total.
  std::map<uint32_t, int64_t> lent_since_ms_;
  std::map<std::string, double> returned_gpu_hours_;
  double last_pass_s_ = 0;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool kicked_ = false;
  bool stopping_ = false;
  std::thread loop_;
  mutable std::mutex pass_mu_;  // one pass at a time; taken before mu_
  // Last: its destructor answers parked watches, which read the rest.
  NodePodsWatch pod_watch_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_CONTROL_PLANE_H_
