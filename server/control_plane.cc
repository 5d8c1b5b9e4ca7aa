#include "server/control_plane.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "config/field_reader.h"
#include "core/priority/priority_deriver.h"
#include "protocol/journal_record.h"
#include "protocol/journal_snapshot.h"
#include "protocol/json_writer.h"
#include "protocol/workload_batch.h"
#include "server/workload_codec.h"

namespace tidal::server {

using nlohmann::json;

namespace {

bool IsTerminal(WorkloadState s) {
  return s == WorkloadState::kSucceeded || s == WorkloadState::kFailed ||
         s == WorkloadState::kCancelled;
}

}  // namespace

ControlPlane::ControlPlane(ServerConfig config, std::unique_ptr<Store> store, const Clock& clock)
    : config_(std::move(config)),
      store_(std::move(store)),
      clock_(clock),
      snapshot_writer_(*store_, metrics_),
      overload_(OverloadLimitsFor(config_)),
      scheduler_(config_.policy),
      colocation_(config_.policy),
      pod_watch_(ToMillis(clock_.Now())) {
  DefineMetrics();
}

ControlPlane::~ControlPlane() { StopLoop(); }

bool ControlPlane::ready() const {
  std::lock_guard lock(mu_);
  return ready_;
}

Status ControlPlane::Recover(RecoverAs as) {
  TIDAL_ASSIGN_OR_RETURN(Recovered rec, store_->Load());
  // The journal before the latest snapshot is gone: a snapshot that does
  // not decode (a torn or garbled row) would leave its history unreadable,
  // so the server says so instead of writing on.
  TIDAL_ASSIGN_OR_RETURN(std::optional<SnapshotRow> snapshot, store_->ReadSnapshot());
  if (snapshot) {
    auto decoded = protocol::JournalSnapshotFromText(snapshot->snapshot);
    if (!decoded.ok()) {
      return Internal(fmt::format("the store's journal snapshot (row {}) is damaged: {}", snapshot->seq,
                                  decoded.status().message()));
    }
    if (decoded->seq != snapshot->seq) {
      return Internal(fmt::format("the store's journal snapshot (row {}) says it covers record {}", snapshot->seq,
                                  decoded->seq));
    }
  }
  std::lock_guard lock(mu_);
  journal_seq_ = rec.last_journal_seq;
  since_snapshot_ = rec.journal_since_snapshot;
  const Time now = clock_.Now();
  node_rt_.resize(config_.catalog.cluster.nodes.size());
  // Not ready until its agent registers (again, for a stored registration).
  config_.catalog.cluster = state::ClusterAwaitingAgents(std::move(config_.catalog.cluster));
  for (const auto& [name, text] : rec.nodes) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("registration")) {
      return Internal(fmt::format("node {}: stored record is not a node record (a torn row?)", name));
    }
    const bool by_admin = j.value("registered_by_admin", false);
    auto reg = ParseRegistration(j["registration"], by_admin);
    if (!reg.ok()) {
      if (as == RecoverAs::kLeader) {
        std::fprintf(stderr, "tidal: stored node %s no longer applies: %s\n", name.c_str(),
                     reg.status().ToString().c_str());
      }
      continue;
    }
    const NodeId id = CommitRegistration(std::move(reg).value(), j["registration"]);
    Node& node = config_.catalog.cluster.nodes[id.value()];
    node.cordoned = j.value("cordoned", false);
    node.failed_gpus = j.value("failed_gpus", GpuMask{0});
    node_rt_[id.value()].lost = false;
    node_rt_[id.value()].registered_by_admin = by_admin;
    // The node keeps its credential across a server restart.
    if (std::string digest = j.value("credential_sha256", ""); !digest.empty()) {
      node_rt_[id.value()].credential_sha256 = digest;
      node_by_credential_[digest] = id;
    }
    // A restarted server gives every registered node a fresh lease (the
    // LeaseEdits below, once the machine exists).
    node_rt_[id.value()].last_heartbeat_ms = ToMillis(now);
    if (node.failed_gpus != 0) node.health = Health::kDegraded;
  }
  node_workloads_.assign(config_.catalog.cluster.nodes.size(), {});
  // A project's spend so far: the config's figure plus what its workloads
  // ran here before the restart (the state accrues it from now on).
  std::vector<double> ran_gpu_s(config_.catalog.projects.size(), 0);
  for (const auto& [id, text] : rec.workloads) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return Internal(fmt::format("workload {}: stored record is not JSON", id));
    auto r = RecordFromJson(j, config_.catalog);
    if (!r.ok()) return Internal(fmt::format("workload {}: {}", id, r.status().message()));
    next_id_ = std::max(next_id_, id + 1);
    auto [it, inserted] = records_.emplace(id, std::move(r).value());
    if (it->second.active()) {
      active_.insert(id);
      ++unfinished_by_tenant_[it->second.w.tenant];
    }
    IndexAllocation(it->second, true);
    const WorkloadRecord& rec_w = it->second;
    if (!rec_w.w.project.valid() || rec_w.w.project.value() >= ran_gpu_s.size()) continue;
    for (const RunInterval& run : rec_w.runs) {
      const int64_t end_ms = run.end_ms != 0 ? run.end_ms : ToMillis(now);
      ran_gpu_s[rec_w.w.project.value()] += std::max<int64_t>(0, end_ms - run.start_ms) / 1000.0 * run.gpus;
    }
  }
  for (size_t p = 0; p < ran_gpu_s.size(); ++p) config_.catalog.projects[p].used_gpu_hours += ran_gpu_s[p] / 3600.0;
  for (const IdempotencyRow& k : rec.idempotency) idempotency_[k.key] = k.workload;
  next_audit_seq_ = rec.last_audit_seq + 1;
  // The committed state: what the records hold, checked (two stored
  // allocations on one GPU, a pod on a node no longer there, fail here).
  std::vector<bool> registered(node_rt_.size());
  for (size_t i = 0; i < node_rt_.size(); ++i) registered[i] = node_rt_[i].registered;
  // The scale-ups open when it stopped, as its records kept them.
  std::vector<state::PendingScaleUp> open_scale_ups;
  for (uint64_t id : allocated_) {
    for (const ScaleUp& su : records_.at(id).scale_ups) {
      if (su.ready_ms != 0 || su.failed) continue;
      open_scale_ups.push_back({WorkloadId(id), su.from_pods, su.to_pods, TimeFromMillis(su.requested_ms)});
    }
  }
  auto state = state::RestartedState(RecoveredSnapshot(now), registered, std::move(open_scale_ups));
  if (!state.ok()) return Internal("stored state is inconsistent: " + state.status().message());
  machine_.emplace(*std::move(state), state::ServerLifecycleOptions(config_.policy), config_.policy.templates);
  slo_diag_ = diagnosis::SloDiagnosis();
  wait_tallies_.clear();
  machine_->set_sink([this](Time at, state::EditOrigin origin, const state::Edit& edit) {
    OnApplied(at, origin, edit);
  });
  // The forecaster's daily profile survives the restart: without it the
  // first day after every restart is reactive.
  TIDAL_ASSIGN_OR_RETURN(const int64_t samples, WarmStartForecaster(now));
  if (samples > 0 && as == RecoverAs::kLeader) {
    std::fprintf(stderr, "tidal: forecaster warm start from %lld stored load samples\n",
                 static_cast<long long>(samples));
  }
  // Every registered node's fresh lease, journaled after the server_start
  // record below (Enqueue puts this mutation's records first), so a replay
  // restarts with the same leases.
  for (size_t i = 0; i < node_rt_.size(); ++i) {
    if (node_rt_[i].registered) {
      (void)machine_->Apply(state::LeaseEdit{NodeId(static_cast<uint32_t>(i)), now + config_.node_lease});
    }
  }
  // The replicas that were ready, likewise: a restarted state holds none
  // (RestartedState), and an agent reports a pod ready only once. A scale-up
  // open at the restart is still open, and these make it ready again.
  for (uint64_t id : allocated_) {
    const WorkloadRecord& r = records_.at(id);
    if (r.w.kind != WorkloadKind::kInference || !r.allocation) continue;
    for (int rank : r.ready_ranks) {
      if (auto pod = r.PodOfRank(rank)) {
        (void)machine_->Apply(state::ReplicaReadyEdit{r.w.id, r.allocation->pods[*pod], true});
      }
    }
  }
  ready_ = true;
  if (as == RecoverAs::kReadOnlyView) return Status::Ok();
  // The configuration this history runs under, for `tidal sim replay`.
  Mutation meta;
  // A replay restarts where the server did (sim/journal_replay.h).
  meta.journal.push_back(protocol::JournalRecordToText(protocol::ServerStart{now}));
  meta.meta.emplace_back(kMetaCluster, config_.cluster_text);
  if (!config_.policy_text.empty()) meta.meta.emplace_back(kMetaPolicy, config_.policy_text);
  Enqueue(std::move(meta));
  return Status::Ok();
}

StatusOr<int64_t> ControlPlane::WarmStartForecaster(Time now) {
  int64_t fed = 0;
  int64_t after = 0;
  while (true) {
    TIDAL_ASSIGN_OR_RETURN(std::vector<JournalRow> rows, store_->ReadJournal(after, 10000));
    if (rows.empty()) break;
    for (const JournalRow& row : rows) {
      after = row.seq;
      // Most rows are edits and markers; decode only the load samples.
      if (row.entry.find("\"load\"") == std::string::npos) continue;
      auto record = protocol::JournalRecordFromText(row.entry);
      if (!record.ok()) {
        return Internal(fmt::format("journal row {}: {}", row.seq, record.status().message()));
      }
      const auto* sample = std::get_if<protocol::LoadSample>(&*record);
      if (sample == nullptr || !InLoadHistoryWindow(sample->at, now)) continue;
      colocation_.ObserveLoad(sample->workload, sample->at, sample->rps);
      ++fed;
    }
  }
  return fed;
}

double ControlPlane::PeakLoadForecast(WorkloadId service, Time from, Time to) const {
  std::lock_guard pass_lock(pass_mu_);
  return colocation_.forecaster().PeakForecast(service, from, to);
}

bool ControlPlane::HasDailyLoadProfile(WorkloadId service) const {
  std::lock_guard pass_lock(pass_mu_);
  return colocation_.forecaster().HasDailyProfile(service);
}

// ---- helpers (mu_ held) ----

WorkloadRecord* ControlPlane::Find(uint64_t id) {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

const WaitDecision* ControlPlane::LastWait(const WorkloadRecord& r) const {
  if (!r.active() || r.allocation) return nullptr;
  if (!last_waits_indexed_) {
    last_wait_index_.clear();
    last_wait_index_.reserve(last_waits_.size());
    for (uint32_t i = 0; i < last_waits_.size(); ++i) last_wait_index_[last_waits_[i].workload.value()] = i;
    last_waits_indexed_ = true;
  }
  auto it = last_wait_index_.find(r.w.id.value());
  return it == last_wait_index_.end() ? nullptr : &last_waits_[it->second];
}

json ControlPlane::RecordJson(const WorkloadRecord& r) const { return RecordToJson(r, config_.catalog, LastWait(r)); }

const WorkloadRecord* ControlPlane::Find(uint64_t id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

Status ControlPlane::ApplyEdit(const state::Edit& edit, state::EditOrigin origin) {
  machine_->AdvanceTo(clock_.Now());
  return machine_->Apply(edit, origin);
}

// A record changed by several edits of one request or pass is written once,
// at Enqueue, as it is then.
void ControlPlane::MarkChanged(const WorkloadRecord& r) {
  to_persist_.insert(r.w.id.value());
}

void ControlPlane::AddAudit(Mutation& m, const std::string& actor, const std::string& action,
                            const WorkloadRecord* r, json detail, Time now) {
  AuditRow row;
  row.seq = next_audit_seq_++;
  row.time_ms = ToMillis(now);
  row.actor = actor;
  row.action = action;
  if (r) {
    row.workload = r->w.id.value();
    row.tenant = r->w.tenant;
    row.project = config_.catalog.ProjectName(r->w.project);
    if (!detail.contains("queue")) detail["queue"] = config_.catalog.QueueName(r->w.queue);
    if (!detail.contains("kind")) detail["kind"] = WorkloadKindName(r->w.kind);
  }
  row.detail_json = protocol::DumpReserved(detail, 256);
  m.audit.push_back(std::move(row));
}

Status ControlPlane::Writable() const {
  Status health = store_->health();
  if (health.ok() || store_->in_outage()) return health;
  return Unavailable(fmt::format("store failed, the server is read-only until restarted: {}",
                                 health.message()));
}

Status ControlPlane::ReadBarrier(uint64_t seq) const {
  Status durable = store_->WaitDurable(seq);
  // Read-only mode: reads answer from memory, which may still show the one
  // change whose write failed (its caller got 503; a restart drops it).
  if (!durable.ok() && !store_->health().ok()) return Status::Ok();
  return durable;
}

Status ControlPlane::FlushJournalSnapshot() {
  const uint64_t seq = snapshot_writer_.Flush();
  return seq == 0 ? Status::Ok() : store_->WaitDurable(seq);
}

int64_t ControlPlane::SnapshotInterval() const {
  // A snapshot costs the whole state (copied under the lock, then encoded);
  // the records it replaces cost one replay each. So at least as many
  // records as the state has workloads and nodes go between two snapshots:
  // a deep backlog is not re-encoded every few seconds under a flood of
  // submits (12 % of the server beside 10,000 agents), and a recovery
  // replays at most about as many records as the snapshot holds objects.
  const Snapshot& s = machine_->state().snapshot();
  return std::max<int64_t>(config_.snapshot_every_records,
                           static_cast<int64_t>(s.workloads.size() + s.cluster.nodes.size()));
}

uint64_t ControlPlane::Enqueue(Mutation m) {
  for (uint64_t id : to_persist_) {
    if (const WorkloadRecord* r = Find(id)) {
      m.workloads.emplace_back(id, RecordToStoredText(*r, config_.catalog));
      // What the record's nodes list may have changed (its notice, exited
      // ranks, attempt); IndexAllocation covers pods added or removed.
      if (r->allocation) {
        for (const PodPlacement& p : r->allocation->pods) pod_watch_.Changed(p.node.value());
      }
    }
  }
  to_persist_.clear();
  for (std::string& entry : journal_) {
    if (!entry.empty()) m.journal.push_back(std::move(entry));
  }
  journal_.clear();
  journal_seq_ += static_cast<int64_t>(m.journal.size());
  since_snapshot_ += static_cast<int64_t>(m.journal.size());
  const bool records = !m.journal.empty();
  if (!m.empty()) last_seq_ = store_->Enqueue(std::move(m));
  // A snapshot of the state after the last record just enqueued (every
  // record is journaled as its edit applies, and the state lock is held).
  // Only the copy is made here, under the lock; the writer encodes it and
  // enqueues it after these records. While the previous snapshot is still
  // in flight, the count goes on and a later mutation takes the copy.
  if (records && machine_ && since_snapshot_ >= SnapshotInterval() && snapshot_writer_.idle()) {
    const auto copy_start = std::chrono::steady_clock::now();
    std::vector<bool> registered(node_rt_.size());
    for (size_t i = 0; i < node_rt_.size(); ++i) registered[i] = node_rt_[i].registered;
    // The forecaster's warm start at the next restart reads the load
    // samples the compaction keeps.
    protocol::JournalSnapshot snapshot = protocol::SnapshotOf(journal_seq_, machine_->state(), std::move(registered));
    // The controller changes only inside a pass, which is one mutation, so
    // its memory here goes with the records just enqueued.
    snapshot.colocation = colocation_.memory();
    if (snapshot_writer_.Offer(std::move(snapshot), ToMillis(machine_->state().now() - kLoadHistoryWindow))) {
      since_snapshot_ = 0;
    }
    metrics_.Observe("tidal_journal_snapshot_copy_seconds", {},
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count());
  }
  return last_seq_;
}

void ControlPlane::IndexAllocation(const WorkloadRecord& r, bool add) {
  if (!r.allocation) return;
  if (add) {
    allocated_.insert(r.w.id.value());
  } else {
    allocated_.erase(r.w.id.value());
  }
  for (const PodPlacement& p : r.allocation->pods) {
    if (p.node.value() >= node_workloads_.size()) continue;
    pod_watch_.Changed(p.node.value());
    if (add) {
      node_workloads_[p.node.value()].insert(r.w.id.value());
    } else {
      node_workloads_[p.node.value()].erase(r.w.id.value());
    }
  }
}

GpuMask ControlPlane::UsedGpus(NodeId node) const { return machine_->state().used_gpus(node); }

bool ControlPlane::IsLent(NodeId node) const { return machine_->state().snapshot().is_lent(node); }

void ControlPlane::CloseRuns(WorkloadRecord& r, int64_t now_ms, const std::string& reason) {
  for (RunInterval& run : r.runs) {
    if (run.end_ms != 0) continue;
    run.end_ms = now_ms;
    run.end_reason = reason;
  }
}

void ControlPlane::RemovePod(WorkloadRecord& r, size_t pod) {
  const int rank = r.RankOf(pod);
  if (KeepsRanks(r.w.kind)) {
    r.exited_ranks.erase(rank);
    r.ready_ranks.erase(rank);
    r.replica_load.erase(rank);
    if (pod < r.pod_ranks.size()) r.pod_ranks.erase(r.pod_ranks.begin() + static_cast<std::ptrdiff_t>(pod));
  } else {
    // The pods after it move down a rank.
    auto shift = [rank](std::set<int>& ranks) {
      std::set<int> out;
      for (int x : ranks) {
        if (x != rank) out.insert(x > rank ? x - 1 : x);
      }
      ranks = std::move(out);
    };
    shift(r.exited_ranks);
    shift(r.ready_ranks);
    std::map<int, WorkloadRecord::ReplicaLoad> load;
    for (auto& [x, l] : r.replica_load) {
      if (x != rank) load[x > rank ? x - 1 : x] = l;
    }
    r.replica_load = std::move(load);
  }
  auto& pods = r.allocation->pods;
  const PodPlacement gone = pods[pod];
  pods.erase(pods.begin() + static_cast<std::ptrdiff_t>(pod));
  auto& leaving = r.allocation->leaving;
  if (auto it = std::find(leaving.begin(), leaving.end(), gone); it != leaving.end()) leaving.erase(it);
}

int ControlPlane::QueueUsedGpus(QueueId q) const {
  return q.value() < config_.catalog.queues.size() ? machine_->state().queue_used_gpus(q) : 0;
}

PreemptionRecord* ControlPlane::OpenPreemption(WorkloadRecord& r) {
  if (!r.stop || r.preemptions.empty()) return nullptr;
  PreemptionRecord& p = r.preemptions.back();
  return p.time_ms == r.stop->notice_ms && p.recovery_s < 0 ? &p : nullptr;
}

// ---- admission ----

// Impossible requests, refused at submit as a bad field: no node is large
// enough, the cluster is smaller than the gang minimum, or no node has the
// GPU model or the labels asked for. Against every node the cluster knows,
// whatever its health or use now (those pass).
Status ControlPlane::CheckFeasible(const Workload& w) const {
  const auto& nodes = config_.catalog.cluster.nodes;
  if (nodes.empty()) return Status::Ok();  // no cluster yet: nothing to judge by
  // A node's GPU count changes only when it registers, which moves the
  // state's cluster version.
  const uint64_t version = machine_->state().snapshot().cluster_version;
  if (cluster_size_.cluster_version != version || cluster_size_.nodes != nodes.size()) {
    cluster_size_ = ClusterSize{version, nodes.size(), 0, 0};
    for (const Node& n : nodes) {
      cluster_size_.largest_node_gpus = std::max(cluster_size_.largest_node_gpus, n.gpu_count);
      cluster_size_.total_gpus += n.gpu_count;
    }
  }
  const int largest_node = cluster_size_.largest_node_gpus;
  const int total = cluster_size_.total_gpus;
  if (w.gpus_per_pod > largest_node) {
    return InvalidArgument(fmt::format("gpus_per_replica: {} GPUs per replica, but the largest node has {}",
                                       w.gpus_per_pod, largest_node));
  }
  if (w.min_gpus() > total) {
    return InvalidArgument(fmt::format("min_replicas: the gang needs {} GPUs ({} x {}), but the cluster has {}",
                                       w.min_gpus(), w.min_pods, w.gpus_per_pod, total));
  }
  const PlacementConstraints& c = w.constraints;
  if (c.required_gpu_models.empty() && c.node_selector.empty()) return Status::Ok();  // the largest node holds a pod
  if (!c.required_gpu_models.empty()) {
    std::set<std::string> models;
    for (const Node& n : nodes) models.insert(n.gpu_model);
    bool any = false;
    for (const std::string& m : c.required_gpu_models) any = any || models.count(m);
    if (!any) {
      std::string want, have;
      for (const std::string& m : c.required_gpu_models) want += (want.empty() ? "" : " or ") + m;
      for (const std::string& m : models) have += (have.empty() ? "" : ", ") + m;
      return InvalidArgument(fmt::format("gpu_models.required: no node has {} (the cluster has {})", want, have));
    }
  }
  for (const auto& [key, value] : c.node_selector) {
    bool any = false;
    for (const Node& n : nodes) {
      auto it = n.labels.find(key);
      any = any || (it != n.labels.end() && it->second == value);
    }
    if (!any) return InvalidArgument(fmt::format("node_selector.{}: no node has the label {}={}", key, key, value));
  }
  // Each label and model exists somewhere, but maybe not together.
  bool any_node = false;
  for (const Node& n : nodes) {
    if (!c.required_gpu_models.empty() &&
        std::find(c.required_gpu_models.begin(), c.required_gpu_models.end(), n.gpu_model) == c.required_gpu_models.end()) {
      continue;
    }
    bool labels = true;
    for (const auto& [key, value] : c.node_selector) {
      auto it = n.labels.find(key);
      labels = labels && it != n.labels.end() && it->second == value;
    }
    if (labels && n.gpu_count >= w.gpus_per_pod) any_node = true;
  }
  if (!any_node) {
    return InvalidArgument(fmt::format("node_selector: no node with {} GPUs has all of these labels{}", w.gpus_per_pod,
                                       c.required_gpu_models.empty() ? "" : " and one of the required GPU models"));
  }
  return Status::Ok();
}

StatusOr<ControlPlane::Admitted> ControlPlane::Admit(const Principal& who, const json& body,
                                                     Time now, bool check_feasible) const {
  TIDAL_ASSIGN_OR_RETURN(SubmitNames names, ReadSubmitNames(body));
  const Catalog& cat = config_.catalog;
  // Tenant: a user submits only as its own tenant.
  std::string tenant = names.tenant;
  if (who.role == Role::kUser) {
    if (!tenant.empty() && tenant != who.tenant) {
      return PermissionDenied(fmt::format("tenant: token of tenant \"{}\" may not submit as \"{}\"",
                                          who.tenant, tenant));
    }
    tenant = who.tenant;
  }
  // Project: named, or the tenant's only one.
  std::optional<ProjectId> project;
  if (!names.project.empty()) {
    project = cat.FindProject(names.project);
    if (!project) return InvalidArgument(fmt::format("project: unknown project \"{}\"", names.project));
  } else {
    std::vector<ProjectId> own;
    for (const Project& p : cat.projects) {
      if (p.tenant == tenant) own.push_back(p.id);
    }
    if (own.size() != 1) {
      std::string list;
      for (ProjectId p : own) list += (list.empty() ? "" : ", ") + cat.project(p).name;
      return InvalidArgument(tenant.empty()
                                 ? std::string("project: required")
                                 : fmt::format("project: required (tenant \"{}\" has {} projects{}{})",
                                               tenant, own.size(), own.empty() ? "" : ": ", list));
    }
    project = own[0];
  }
  const Project& proj = cat.project(*project);
  if (tenant.empty()) tenant = proj.tenant;
  if (proj.tenant != tenant) {
    const std::string msg = fmt::format("project: project \"{}\" belongs to tenant \"{}\", not \"{}\"",
                                        proj.name, proj.tenant, tenant);
    return who.role == Role::kUser ? PermissionDenied(msg) : InvalidArgument(msg);
  }
  // Queue: named, or the project's default.
  QueueId queue = proj.default_queue;
  if (!names.queue.empty()) {
    auto q = cat.FindQueue(names.queue);
    if (!q) return InvalidArgument(fmt::format("queue: unknown queue \"{}\"", names.queue));
    queue = *q;
  }
  if (!queue.valid()) {
    return InvalidArgument(fmt::format("queue: required (project \"{}\" has no default queue)", proj.name));
  }
  // Entitlements: a queue is another team's quota and pools, a kind carries a
  // priority bonus and a preemptibility class; the cluster file grants both.
  const config::NameScope scope{&cat.cluster, &cat.queues, &cat.projects, nullptr};
  if (!proj.MayUseQueue(queue)) {
    return PermissionDenied(fmt::format("queue: project \"{}\" may not use queue \"{}\" (allowed: {})",
                                        proj.name, cat.QueueName(queue),
                                        config::AllowedQueuesText(proj, scope)));
  }
  if (auto kind = ParseKind(names.kind.empty() ? "training" : names.kind); kind && !proj.MaySubmitKind(*kind)) {
    std::string allowed;
    for (WorkloadKind k : proj.allowed_kinds) allowed += (allowed.empty() ? "" : ", ") + std::string(WorkloadKindName(k));
    return PermissionDenied(fmt::format("kind: project \"{}\" may not submit kind {} (allowed: {})",
                                        proj.name, WorkloadKindName(*kind), allowed));
  }
  TIDAL_ASSIGN_OR_RETURN(SubmitSpec spec, ParseSubmit(body, cat, proj.name, now));
  Workload& w = spec.record.w;
  w.tenant = tenant;
  w.project = *project;
  w.queue = queue;
  w.submit_time = now;
  // Project and kind defaults for what the submitter left out.
  RunSpec& run = spec.record.run;
  if (auto d = config_.project_defaults.find(proj.name); d != config_.project_defaults.end()) {
    if (!spec.has_image) run.image = d->second.image;
    if (!spec.has_dataset) run.dataset = d->second.dataset;
    if (!spec.has_model_version) run.model_version = d->second.model_version;
    if (auto k = d->second.kinds.find(w.kind); k != d->second.kinds.end()) {
      if (!spec.has_checkpoint && k->second.checkpoint_interval) {
        w.training.checkpoint_interval = *k->second.checkpoint_interval;
      }
      if (!spec.has_max_runtime && k->second.max_runtime) {
        w.debug.max_runtime = *k->second.max_runtime;
      }
      if (!spec.has_gpus_per_replica && k->second.gpus_per_replica) {
        w.gpus_per_pod = *k->second.gpus_per_replica;
      }
    }
  }
  // Training and batch jobs say how many GPUs a replica needs (a default of
  // 1 would silently run a multi-GPU job on one), unless the project's
  // defaults in the server config say it for them.
  bool has_gpus = spec.has_gpus_per_replica;
  if (auto d = config_.project_defaults.find(proj.name); d != config_.project_defaults.end()) {
    if (auto k = d->second.kinds.find(w.kind); k != d->second.kinds.end()) {
      has_gpus = has_gpus || k->second.gpus_per_replica.has_value();
    }
  }
  if (!has_gpus && (w.kind == WorkloadKind::kTraining || w.kind == WorkloadKind::kBatchInference)) {
    return InvalidArgument(fmt::format("gpus_per_replica: required for kind {} (1 to {})",
                                       WorkloadKindName(w.kind), config::kMaxGpusPerPod));
  }
  run.labels["tidal.io/tenant"] = tenant;
  run.labels["tidal.io/project"] = proj.name;
  run.budget_gpu_hours = proj.budget_gpu_hours;
  if (w.kind == WorkloadKind::kInference && w.inference.replica_capacity_rps <= 0) {
    return InvalidArgument("replica_capacity_rps: required for inference (requests/s one replica serves)");
  }
  if (check_feasible) TIDAL_RETURN_IF_ERROR(CheckFeasible(w));
  // Priority: derived, never given.
  const Queue& q = cat.queue(queue);
  // The project as the state has it: its spend accrues as its workloads run.
  const Project& spent = machine_->state().snapshot().projects[w.project.value()];
  const BudgetState budget = ComputeBudgetState(spent, q, QueueUsedGpus(queue));
  auto priority = DerivePriority(config_.policy.templates, w, spent, budget, now);
  if (!priority.ok()) return InvalidArgument("priority: " + priority.status().message());
  w.priority = *priority;
  w.state = w.priority.awaiting_approval ? WorkloadState::kAwaitingApproval : WorkloadState::kPending;
  spec.record.submitted_by = who.name;
  return Admitted{std::move(spec.record), w.priority.derivation};
}

StatusOr<SubmitResult> ControlPlane::Submit(const Principal& who, const SubmitRequest& request) {
  SubmitResult result;
  TIDAL_ASSIGN_OR_RETURN(const uint64_t seq, EnqueueSubmit(who, request, &result));
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  if (!result.replayed) Kick();
  return result;
}

void ControlPlane::SubmitAsync(const Principal& who, const SubmitRequest& request, const SubmitEncoder& encode,
                               SubmitCallback done) {
  SubmitResult result;
  StatusOr<uint64_t> seq = EnqueueSubmit(who, request, &result);
  if (!seq.ok()) return done(seq.status());
  EncodedSubmit reply{encode(result), result.replayed};
  store_->WhenDurable(*seq, [this, reply = std::move(reply), done = std::move(done)](Status durable) mutable {
    if (!durable.ok()) return done(durable);
    if (!reply.replayed) Kick();
    done(std::move(reply));
  });
}

StatusOr<uint64_t> ControlPlane::EnqueueSubmit(const Principal& who, const SubmitRequest& request,
                                               SubmitResult* out) {
  const std::vector<json>& bodies = request.bodies;
  TIDAL_CHECK(!bodies.empty() && (request.batch || bodies.size() == 1));
  // Each workload gets an idempotency row. A single submit's key is the
  // caller's; a batch's items are keyed apart, so that a retry is checked
  // item by item and a batch cannot replay a single submit's result.
  auto key_of = [&](size_t i) {
    std::string key = who.name + "\n" + request.idempotency_key;
    return request.batch ? key + "\n#" + std::to_string(i) : key;
  };
  // An error about one item of a batch names it ("workloads[3].replicas").
  auto about = [&](Status s, size_t i) { return request.batch ? protocol::InBatchItem(s, i) : s; };
  std::lock_guard lock(mu_);
  if (!ready_) return Unavailable("server is recovering");
  TIDAL_RETURN_IF_ERROR(Writable());
  if (!request.idempotency_key.empty() && idempotency_.count(key_of(0))) {
    // A retry: answered with what the first request created, which may not
    // be durable yet (the caller waits for the last change queued).
    auto differs = [&](std::string detail) {
      return AlreadyExists(fmt::format(
          "Idempotency-Key: key \"{}\" was already used for {}; use a new key for a new request",
          request.idempotency_key, detail));
    };
    if (request.batch && idempotency_.count(key_of(bodies.size()))) {
      return differs("a batch of more workloads");
    }
    for (size_t i = 0; i < bodies.size(); ++i) {
      auto it = idempotency_.find(key_of(i));
      if (it == idempotency_.end()) return differs("a batch of fewer workloads");
      const WorkloadRecord* first = Find(it->second);
      if (first == nullptr) return Internal(fmt::format("idempotency row names workload {}, which is unknown", it->second));
      if (!first->request_digest.empty() && first->request_digest != RequestDigest(bodies[i])) {
        return differs(request.batch ? fmt::format("workload {} (workloads[{}]) with a different body",
                                                   first->w.id.value(), i)
                                     : fmt::format("workload {} with a different body", first->w.id.value()));
      }
      out->workloads.push_back(RecordToText(*first, config_.catalog, LastWait(*first)));
      out->ids.push_back(first->w.id.value());
    }
    out->replayed = true;
    return last_seq_;
  }
  // All or none: every item is admitted before anything is applied.
  const Time now = clock_.Now();
  std::vector<Admitted> admitted;
  admitted.reserve(bodies.size());
  std::map<std::string, int> adding;  // tenant -> workloads this request adds
  for (size_t i = 0; i < bodies.size(); ++i) {
    StatusOr<Admitted> a = Admit(who, bodies[i], now);
    if (!a.ok()) return about(a.status(), i);
    ++adding[a->record.w.tenant];
    admitted.push_back(std::move(*a));
  }
  for (const auto& [tenant, count] : adding) {
    const int unfinished = unfinished_by_tenant_[tenant];
    if (unfinished + count <= config_.tenant_max_unfinished) continue;
    metrics_.Inc("tidal_http_rejected_total", {{"reason", std::string(RejectionName(Rejection::kUnfinishedCap))}});
    return ResourceExhausted(
        count == 1 ? fmt::format("tenant {} has {} unfinished workloads, the server's limit "
                                 "(tenant_max_unfinished); submit more as these finish",
                                 tenant, unfinished)
                   : fmt::format("tenant {} has {} unfinished workloads and the batch adds {}, over the "
                                 "server's limit of {} (tenant_max_unfinished); submit more as these finish",
                                 tenant, unfinished, count, config_.tenant_max_unfinished));
  }
  Mutation m;
  ApplyScope scope(*this, m, who.name);
  for (size_t i = 0; i < admitted.size(); ++i) {
    WorkloadRecord& r = admitted[i].record;
    r.w.id = WorkloadId(next_id_++);
    AddAudit(m, who.name, "admit", &r,
             {{"state", WorkloadStateName(r.w.state)},
              {"gpus", r.w.pods * r.w.gpus_per_pod},
              {"image", r.run.image}},
             now);
    AddAudit(m, "admission", "priority", &r,
             {{"value", r.w.priority.value},
              {"template", r.w.priority.template_name},
              {"derivation", r.w.priority.derivation},
              {"awaiting_approval", r.w.priority.awaiting_approval}},
             now);
    if (!request.idempotency_key.empty()) {
      r.request_digest = RequestDigest(bodies[i]);
      m.idempotency.push_back({key_of(i), r.w.id.value()});
      idempotency_[key_of(i)] = r.w.id.value();
    }
    out->workloads.push_back(RecordToText(r, config_.catalog, /*wait=*/nullptr));  // not yet in a pass
    out->ids.push_back(r.w.id.value());
    m.workloads.emplace_back(r.w.id.value(), RecordToStoredText(r, config_.catalog));
    metrics_.Inc("tidal_workloads_submitted_total",
                 {{"queue", config_.catalog.QueueName(r.w.queue)},
                  {"kind", std::string(WorkloadKindName(r.w.kind))}});
    const uint64_t id = r.w.id.value();
    r.queued_ms = ToMillis(now);
    active_.insert(id);
    ++unfinished_by_tenant_[r.w.tenant];
    // One copy of the workload, for the edit (the record keeps its own).
    const state::Edit submit = state::SubmitEdit{r.w};
    records_.emplace(id, std::move(r));
    if (Status s = ApplyEdit(submit); !s.ok()) {
      return Internal("submit: " + s.message());  // admission checked everything the state checks
    }
  }
  return Enqueue(std::move(m));
}

// Reads reply only with state the store already has (WaitDurable on the
// last queued change): a client must never see a placement that a crash
// would take back, nor a state whose audit rows are not yet queryable.
StatusOr<json> ControlPlane::Get(const Principal& who, uint64_t id) const {
  json reply;
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    const WorkloadRecord* r = Find(id);
    if (!r) return NotFound(fmt::format("workload {} not found", id));
    TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, r->w.tenant));
    reply = RecordJson(*r);
    seq = last_seq_;
  }
  TIDAL_RETURN_IF_ERROR(ReadBarrier(seq));
  return reply;
}

StatusOr<json> ControlPlane::List(const Principal& who, const ListFilter& f) const {
  std::string tenant = f.tenant;
  if (who.role == Role::kUser) {
    if (!tenant.empty() && tenant != who.tenant) TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, tenant));
    tenant = who.tenant;
  }
  if (!f.kind.empty() && !ParseKind(f.kind)) {
    return InvalidArgument(fmt::format("kind: unknown kind \"{}\"", f.kind));
  }
  if (!f.state.empty() && !ParseState(f.state)) {
    return InvalidArgument(fmt::format("state: unknown state \"{}\"", f.state));
  }
  {
    std::lock_guard lock(mu_);
    if (!f.queue.empty() && !config_.catalog.FindQueue(f.queue)) {
      return InvalidArgument(fmt::format("queue: unknown queue \"{}\"", f.queue));
    }
    if (!f.project.empty() && !config_.catalog.FindProject(f.project)) {
      return InvalidArgument(fmt::format("project: unknown project \"{}\"", f.project));
    }
  }
  // Newest first, in slices of kListSlice records looked at per hold of the
  // state lock: a list of 10,000 workloads (or a filter that matches few of
  // 50,000) would otherwise hold every submit, heartbeat and pass for 100 ms
  // and more. Each record is read whole under the lock; one created after
  // the list began is not in it, as if the list had come first.
  constexpr int kListSlice = 256;
  json out = json::array();
  uint64_t seq = 0;
  std::optional<uint64_t> next_id = std::numeric_limits<uint64_t>::max();  // the highest id still to look at
  while (next_id.has_value() && static_cast<int>(out.size()) < f.limit) {
    std::lock_guard lock(mu_);
    seq = last_seq_;
    auto it = std::make_reverse_iterator(records_.upper_bound(*next_id));
    next_id.reset();
    for (int looked = 0; it != records_.rend(); ++it) {
      if (++looked > kListSlice) {
        next_id = it->first;
        break;
      }
      const WorkloadRecord& r = it->second;
      if (!tenant.empty() && r.w.tenant != tenant) continue;
      if (!f.project.empty() && config_.catalog.ProjectName(r.w.project) != f.project) continue;
      if (!f.queue.empty() && config_.catalog.QueueName(r.w.queue) != f.queue) continue;
      if (!f.kind.empty() && WorkloadKindName(r.w.kind) != f.kind) continue;
      if (!f.state.empty() && WorkloadStateName(r.w.state) != f.state) continue;
      out.push_back(RecordJson(r));
      if (static_cast<int>(out.size()) >= f.limit) break;
    }
  }
  TIDAL_RETURN_IF_ERROR(ReadBarrier(seq));
  return json{{"workloads", out}};
}

void ControlPlane::ReleaseView(WorkloadRecord& r, WorkloadState state, std::string reason, Time now) {
  Mutation& m = *applying_.m;
  const std::string& actor = applying_.actor;
  const int64_t now_ms = ToMillis(now);
  if (r.allocation) CloseRuns(r, now_ms, reason);
  if (r.stop && r.allocation) {
    metrics_.Observe("tidal_preemption_latency_seconds", {{"cause", r.stop->cause}},
                     std::max<double>(0, (now_ms - r.stop->notice_ms) / 1000.0));
    // The preemption this stop belongs to learns how the victim went.
    if (PreemptionRecord* p = OpenPreemption(r)) {
      if (p->exit_ms == 0) p->exit_ms = now_ms;
      if (reason == "grace_expired") p->killed_at_deadline = true;
      // Asked for a save that did not land in time, it lost what it did
      // since its last checkpoint up to its exit, not the save it was
      // priced at.
      if (r.stop->AsksForCheckpoint(r.w) && !p->checkpointed_in_time) {
        p->lost_gpu_seconds = UnsavedGpuSeconds(*r.allocation, TimeFromMillis(p->exit_ms));
      }
      AddAudit(m, actor, "preempt_exit", &r,
               {{"preemption_seq", p->audit_seq},
                {"cause", p->cause},
                {"notice_time_ms", r.stop->notice_ms},
                {"grace_deadline_ms", r.stop->grace_deadline_ms},
                {"agent_notice_time_ms", p->agent_notice_ms},
                {"exit_time_ms", p->exit_ms},
                {"killed_at_deadline", p->killed_at_deadline},
                {"checkpointed_in_time", p->checkpointed_in_time},
                {"lost_gpu_seconds", p->lost_gpu_seconds},
                {"reason", reason}},
               now);
    }
  }
  r.shrink_notice.reset();
  r.replica_load.clear();
  r.stop.reset();
  r.exited_ranks.clear();
  r.ready_ranks.clear();
  r.w.state = state;
  if (IsTerminal(state)) {
    r.finish_time_ms = now_ms;
    if (active_.erase(r.w.id.value()) > 0 && --unfinished_by_tenant_[r.w.tenant] == 0) {
      unfinished_by_tenant_.erase(r.w.tenant);
    }
  } else {
    r.queued_ms = now_ms;  // requeued: waits again from now
  }
  AddAudit(m, actor, IsTerminal(state) ? "finish" : "requeue", &r,
           {{"state", WorkloadStateName(state)}, {"reason", reason}}, now);
  MarkChanged(r);
}

StatusOr<json> ControlPlane::Acknowledge(uint64_t seq, json reply) {
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  Kick();
  return reply;
}

StatusOr<WorkloadRecord*> ControlPlane::FindChangeable(const Principal& who, uint64_t id) {
  WorkloadRecord* r = Find(id);
  if (!r) return NotFound(fmt::format("workload {} not found", id));
  TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, r->w.tenant));
  if (IsTerminal(r->w.state)) {
    return FailedPrecondition(fmt::format("workload {} already {}", id, WorkloadStateName(r->w.state)));
  }
  return r;
}

StatusOr<json> ControlPlane::Cancel(const Principal& who, uint64_t id) {
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    TIDAL_RETURN_IF_ERROR(Writable());
    TIDAL_ASSIGN_OR_RETURN(WorkloadRecord* r, FindChangeable(who, id));
    const Time now = clock_.Now();
    Mutation m;
    ApplyScope scope(*this, m, who.name);
    AddAudit(m, who.name, "cancel", r, {{"previous_state", WorkloadStateName(r->w.state)}}, now);
    Status applied = Status::Ok();
    if (!r->allocation) {
      applying_.reason = "cancelled";
      applied = ApplyEdit(state::ReleaseEdit{r->w.id, WorkloadState::kCancelled});
    } else if (r->stop) {
      r->stop->requeue = false;  // already stopping: end as cancelled
      MarkChanged(*r);
    } else {
      state::NoticeEdit notice;
      notice.workload = r->w.id;
      notice.cause = PreemptCause::kCancel;
      notice.grace_deadline = now + config_.policy.preemption.default_grace;
      notice.requeue = false;
      applied = ApplyEdit(notice);
    }
    if (!applied.ok()) return Internal("cancel: " + applied.message());
    reply = RecordJson(*r);
    seq = Enqueue(std::move(m));
  }
  return Acknowledge(seq, std::move(reply));
}

StatusOr<json> ControlPlane::Resize(const Principal& who, uint64_t id, const json& body) {
  TIDAL_ASSIGN_OR_RETURN(const ResizeRequest req, ParseResize(body));
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    TIDAL_RETURN_IF_ERROR(Writable());
    TIDAL_ASSIGN_OR_RETURN(WorkloadRecord* r, FindChangeable(who, id));
    Workload w = r->w;
    w.min_pods = req.min_replicas.value_or(w.min_pods);
    w.max_pods = req.max_replicas.value_or(w.max_pods);
    w.pods = req.replicas.value_or(w.pods);
    if (w.kind == WorkloadKind::kTraining || w.kind == WorkloadKind::kBatchInference ||
        w.kind == WorkloadKind::kDebug) {
      if (req.min_replicas && w.min_pods != r->w.min_pods) {
        return InvalidArgument("min_replicas: the gang minimum of a training job cannot change");
      }
      if (!r->w.is_elastic() && !req.max_replicas) {
        return FailedPrecondition(fmt::format(
            "replicas: workload {} is not elastic (min_replicas = max_replicas = {})", id, r->w.max_pods));
      }
    }
    if (w.pods < w.min_pods || w.pods > w.max_pods) {
      return InvalidArgument(fmt::format("replicas: {} is outside [min_replicas {}, max_replicas {}]",
                                         w.pods, w.min_pods, w.max_pods));
    }
    if (static_cast<int64_t>(w.max_pods) * w.gpus_per_pod > kMaxTotalGpus) {
      return InvalidArgument(fmt::format("max_replicas: {} x {} GPUs is above the limit of {}",
                                         w.max_pods, w.gpus_per_pod, kMaxTotalGpus));
    }
    const Time now = clock_.Now();
    Mutation m;
    AddAudit(m, who.name, "resize", r,
             {{"from", {{"replicas", r->w.pods}, {"min", r->w.min_pods}, {"max", r->w.max_pods}}},
              {"to", {{"replicas", w.pods}, {"min", w.min_pods}, {"max", w.max_pods}}}},
             now);
    ApplyScope scope(*this, m, who.name);
    if (Status s = ApplyEdit(state::SetTargetEdit{r->w.id, w.pods, w.min_pods, w.max_pods}); !s.ok()) {
      return Internal("resize: " + s.message());
    }
    reply = RecordJson(*r);
    seq = Enqueue(std::move(m));
  }
  return Acknowledge(seq, std::move(reply));
}

StatusOr<json> ControlPlane::Approve(const Principal& who, uint64_t id) {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kAdmin}));
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    TIDAL_RETURN_IF_ERROR(Writable());
    WorkloadRecord* r = Find(id);
    if (!r) return NotFound(fmt::format("workload {} not found", id));
    if (r->w.state != WorkloadState::kAwaitingApproval) {
      return FailedPrecondition(fmt::format("workload {} is {}, not awaiting approval", id,
                                            WorkloadStateName(r->w.state)));
    }
    const Time now = clock_.Now();
    Mutation m;
    AddAudit(m, who.name, "approve", r, {{"previous_value", r->w.priority.value}}, now);
    ApplyScope scope(*this, m, who.name);
    if (Status s = ApplyEdit(state::ApproveEdit{r->w.id}); !s.ok()) return Internal("approve: " + s.message());
    // The approved tier, derived now (audited as a priority change) rather
    // than at the next pass, so that the reply shows it.
    if (Status s = machine_->RefreshPriorities(); !s.ok()) return Internal("priority: " + s.message());
    MarkChanged(*r);
    reply = RecordJson(*r);
    seq = Enqueue(std::move(m));
  }
  return Acknowledge(seq, std::move(reply));
}

StatusOr<json> ControlPlane::Cordon(const Principal& who, const std::string& node_name, bool cordoned) {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kAdmin}));
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    TIDAL_RETURN_IF_ERROR(Writable());
    const std::optional<NodeId> id = config_.catalog.FindNode(node_name);
    if (!id) return NotFound(fmt::format("node {} not found", node_name));
    // Already so: nothing to journal, and the reply is the same.
    if (machine_->state().snapshot().cluster.node(*id).cordoned == cordoned) return NodeToJsonLocked(*id);
    const Time now = clock_.Now();
    Mutation m;
    AddAudit(m, who.name, cordoned ? "cordon" : "uncordon", nullptr, {{"node", node_name}}, now);
    ApplyScope scope(*this, m, who.name);
    if (Status s = ApplyEdit(state::CordonEdit{*id, cordoned}); !s.ok()) return Internal("cordon: " + s.message());
    reply = NodeToJsonLocked(*id);
    seq = Enqueue(std::move(m));
  }
  // Uncordoned, its free GPUs may start what waits.
  if (!cordoned) Kick();
  return Acknowledge(seq, std::move(reply));
}

// ---- loop thread ----

void ControlPlane::Kick() {
  {
    std::lock_guard lock(loop_mu_);
    kicked_ = true;
  }
  loop_cv_.notify_one();
}

void ControlPlane::StartLoop() {
  loop_ = std::thread([this] { LoopMain(); });
}

void ControlPlane::StopLoop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void ControlPlane::LoopMain() {
  std::unique_lock lock(loop_mu_);
  while (!stopping_) {
    loop_cv_.wait_for(lock, config_.schedule_interval, [&] { return stopping_ || kicked_; });
    if (stopping_) break;
    kicked_ = false;
    lock.unlock();
    const auto started = std::chrono::steady_clock::now();
    RunPass();
    const auto took = std::chrono::steady_clock::now() - started;
    lock.lock();
    // Passes at least min_pass_gap apart, so a burst of events costs one
    // pass; and at least as far apart as a pass takes, so that under a flood
    // of submits the loop uses at most half a core and leaves the rest to
    // the requests.
    const auto gap = std::max<std::chrono::steady_clock::duration>(config_.min_pass_gap, took);
    loop_cv_.wait_for(lock, gap, [&] { return stopping_; });
  }
}

}  // namespace tidal::server
