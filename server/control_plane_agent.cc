// The node-agent protocol: register, heartbeat (lease, GPU health and
// utilization), the node's desired pods, and pod events.
#include <signal.h>

#include <algorithm>
#include <bit>
#include <chrono>

#include <fmt/format.h>

#include "config/cluster_loader.h"
#include "config/field_reader.h"
#include "config/input_limits.h"
#include "server/control_plane.h"
#include "server/workload_codec.h"
#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "protocol/pod_event.h"

namespace tidal::server {

using nlohmann::json;

namespace {

constexpr int kMasterPortBase = 29500;
constexpr int kMasterPortSpan = 20000;
// Topology domains agents may add beyond the cluster file's: a rack per node
// for ten times the 10,000-node fleet the benchmarks register.
constexpr size_t kMaxZones = 1000;
constexpr size_t kMaxRacks = 100000;

// What a registration changes of the hardware pods were placed on: such a
// node's pods cannot be trusted to run on what they were given.
bool InventoryChanged(const Node& before, const Node& after) {
  return before.gpu_count != after.gpu_count || before.gpu_model != after.gpu_model ||
         before.gpu_memory_gib != after.gpu_memory_gib;
}

}  // namespace

StatusOr<Principal> ControlPlane::AuthenticateNode(const std::string& digest) const {
  std::lock_guard lock(mu_);
  auto it = node_by_credential_.find(digest);
  if (it == node_by_credential_.end()) return Unauthenticated("unknown token");
  const std::string& name = config_.catalog.cluster.nodes[it->second.value()].name;
  return Principal{"agent:" + name, Role::kNode, "", name};
}

Status ControlPlane::CheckNodeCaller(const Principal& who, const std::string& node) {
  Status allowed = CheckNodeAccess(who, node);
  if (allowed.ok()) return allowed;
  // A refused node access is a probe or a misconfigured agent: either way
  // an operator wants to see it.
  // Within the caller's failure budget only: a hostile pod holding some
  // node's credential must not be able to grow the audit log without bound.
  if (!overload_.NoteAuthFailure("principal:" + who.name, std::chrono::steady_clock::now())) {
    metrics_.Inc("tidal_http_rejected_total", {{"reason", std::string(RejectionName(Rejection::kAuthFailures))}});
    return allowed;
  }
  std::lock_guard lock(mu_);
  if (Writable().ok()) {
    Mutation m;
    AddAudit(m, who.name, "access_denied", nullptr,
             {{"node", node}, {"role", RoleName(who.role)}, {"reason", allowed.message()}}, clock_.Now());
    Enqueue(std::move(m));
  }
  return allowed;
}

void ControlPlane::IssueCredential(NodeId n, std::string* credential) {
  NodeRuntime& rt = node_rt_[n.value()];
  if (!rt.credential_sha256.empty()) node_by_credential_.erase(rt.credential_sha256);
  *credential = NewNodeCredential();
  rt.credential_sha256 = Sha256Hex(*credential);
  node_by_credential_[rt.credential_sha256] = n;
}

// Reads a registration into a Node without touching the state: a bad
// request must change nothing, and validating first is what lets
// RegisterNode avoid copying the whole cluster to roll back.
StatusOr<ControlPlane::ParsedRegistration> ControlPlane::ParseRegistration(const json& body,
                                                                           bool by_admin) const {
  TIDAL_ASSIGN_OR_RETURN(protocol::NodeRegistration reg, protocol::NodeRegistrationFromJson(body));
  const Catalog& cat = config_.catalog;
  ParsedRegistration out;
  Node& node = out.node;
  const std::string& name = reg.name;
  if (name.empty() || name.size() > 253) return config::FieldError("name", "expected 1 to 253 characters");
  out.existing = cat.FindNode(name);
  if (out.existing) {
    node = cat.cluster.nodes[out.existing->value()];
  } else {
    // A new name ends up in paths, logs and metrics labels (`../../x`).
    TIDAL_RETURN_IF_ERROR(config::CheckNodeName("name", name));
    if (cat.cluster.pools.empty()) return FailedPrecondition("pool: the cluster config declares no pools");
    node.name = name;
    auto training = cat.FindPool("training");
    node.pool = training ? *training : PoolId(0);
  }
  // Pools, labels and taints are the cluster file's (an unknown node gets
  // the default pool and none): an agent may repeat them, never change them,
  // or a node could move itself into a reserved pool, shed a taint or
  // attract workloads that select a label. An admin may set them, as the
  // cluster file does.
  if (reg.pool) {
    auto p = cat.FindPool(*reg.pool);
    if (!p) return config::FieldError("pool", fmt::format("unknown pool \"{}\"", *reg.pool));
    if (by_admin) {
      node.pool = *p;
    } else if (*p != node.pool) {
      return config::FieldError("pool", fmt::format("node \"{}\" is in pool \"{}\" by the cluster file; "
                                                    "an agent cannot change its pool",
                                                    name, cat.cluster.pools[node.pool.value()].name));
    }
  }
  if (by_admin) {
    if (reg.labels) node.labels = *reg.labels;
    if (reg.taints) node.taints = *reg.taints;
  } else {
    if (reg.labels && *reg.labels != node.labels) {
      return config::FieldError("labels", fmt::format("node \"{}\": labels come from the cluster file; "
                                                      "an agent cannot change them", name));
    }
    if (reg.taints && *reg.taints != node.taints) {
      return config::FieldError("taints", fmt::format("node \"{}\": taints come from the cluster file; "
                                                      "an agent cannot change them", name));
    }
  }
  // What an agent says of itself is shown (`tidal nodes`, the dashboard)
  // and becomes metric labels: printable and bounded, whatever a hostile
  // agent sends.
  for (const auto& [field, value] : {std::pair{"zone", &reg.zone}, std::pair{"rack", &reg.rack},
                                     std::pair{"gpu_model", &reg.gpu_model},
                                     std::pair{"driver_version", &reg.driver_version}}) {
    if (*value) TIDAL_RETURN_IF_ERROR(config::CheckLabelValue(field, **value));
  }
  if (reg.gpus) {
    for (size_t i = 0; i < reg.gpus->size(); ++i) {
      const std::string at = config::IndexPath("gpus", i);
      TIDAL_RETURN_IF_ERROR(config::CheckLabelValue(at + ".uuid", (*reg.gpus)[i].uuid));
      TIDAL_RETURN_IF_ERROR(config::CheckLabelValue(at + ".model", (*reg.gpus)[i].model));
    }
  }
  out.zone = reg.zone.value_or("");
  out.rack = reg.rack.value_or("");
  if (out.zone.empty() && !node.zone.valid()) {
    out.zone = cat.cluster.zones.empty() ? "default" : cat.cluster.zones[0].name;
  }
  if (out.rack.empty() && !node.rack.valid()) out.rack = "rack-" + name;
  // A new zone or rack name is a topology domain for good: an agent that
  // re-registers under ever new names must not grow them without end.
  if (!out.zone.empty() && !cat.FindZone(out.zone) && cat.cluster.zones.size() >= kMaxZones) {
    return config::FieldError("zone", fmt::format("the cluster already has {} zones, the most it takes", kMaxZones));
  }
  if (!out.rack.empty() && !cat.FindRack(out.rack) && cat.cluster.racks.size() >= kMaxRacks) {
    return config::FieldError("rack", fmt::format("the cluster already has {} racks, the most it takes", kMaxRacks));
  }
  if (reg.gpu_model) node.gpu_model = *reg.gpu_model;
  if (reg.gpu_memory_gib) node.gpu_memory_gib = *reg.gpu_memory_gib;
  if (reg.driver_version) node.driver_version = *reg.driver_version;
  if (reg.mig_capable) node.mig_capable = *reg.mig_capable;
  if (reg.network) {
    if (reg.network->nic_gbps) node.network.nic_gbps = *reg.network->nic_gbps;
    if (reg.network->rdma) node.network.rdma = *reg.network->rdma;
  }
  if (reg.gpus) {
    const std::vector<protocol::GpuInfo>& gpus = *reg.gpus;
    if (gpus.empty() || gpus.size() > static_cast<size_t>(kMaxGpusPerNode)) {
      return config::FieldError("gpus", fmt::format("expected 1 to {} GPUs, got {}", kMaxGpusPerNode, gpus.size()));
    }
    node.gpu_count = static_cast<int>(gpus.size());
    node.failed_gpus = 0;
    for (size_t i = 0; i < gpus.size(); ++i) {
      const int index = gpus[i].index.value_or(static_cast<int>(i));
      if (index >= node.gpu_count) {
        return config::FieldError(config::JoinPath(config::IndexPath("gpus", i), "index"),
                                  fmt::format("expected an integer from 0 to {}, got {}", node.gpu_count - 1, index));
      }
      if (!gpus[i].healthy) node.failed_gpus |= GpuMask{1} << index;
    }
    node.nvlink_domains.clear();
  }
  if (node.gpu_count <= 0) return config::FieldError("gpus", "required: the node's GPUs");
  if (reg.nvlink_domains) {
    auto domains = config::ParseNvlink(json(*reg.nvlink_domains), node.gpu_count, "nvlink_domains");
    if (!domains.ok()) return domains.status();
    node.nvlink_domains = *domains;
  }
  if (node.nvlink_domains.empty()) {
    for (int g = 0; g < node.gpu_count; ++g) node.nvlink_domains.push_back(GpuMask{1} << g);
  }
  out.address = reg.address.value_or("");
  node.health = node.failed_gpus ? Health::kDegraded : Health::kHealthy;
  return out;
}

NodeId ControlPlane::CommitRegistration(ParsedRegistration reg, const json& body) {
  Catalog& cat = config_.catalog;
  Node& node = reg.node;
  if (!reg.zone.empty()) {
    auto zone = cat.FindZone(reg.zone);
    node.zone = zone ? *zone : cat.AddZone(reg.zone);
  }
  if (!reg.rack.empty()) {
    auto rack = cat.FindRack(reg.rack);
    node.rack = rack ? *rack : cat.AddRack(reg.rack, node.zone);
  }
  NodeId id;
  if (reg.existing) {
    id = *reg.existing;
    node.id = id;
    cat.cluster.nodes[id.value()] = std::move(node);
  } else {
    id = cat.AddNode(std::move(node));
    node_rt_.emplace_back();
    node_workloads_.emplace_back();
  }
  const int gpu_count = cat.cluster.nodes[id.value()].gpu_count;
  NodeRuntime& rt = node_rt_[id.value()];
  rt.registered = true;
  rt.lost = false;
  rt.address = std::move(reg.address);
  rt.registration = body;
  rt.gpu_utilization.assign(gpu_count, -1);
  rt.gpu_memory_used_gib.assign(gpu_count, 0);
  return id;
}

void ControlPlane::PersistNode(NodeId n, Mutation& m) const {
  const Node& node = config_.catalog.cluster.nodes[n.value()];
  const NodeRuntime& rt = node_rt_[n.value()];
  if (!rt.registered) return;
  json j = {{"registration", rt.registration},
            {"cordoned", node.cordoned},
            {"failed_gpus", node.failed_gpus},
            {"lost", rt.lost},
            {"credential_sha256", rt.credential_sha256},
            {"registered_by_admin", rt.registered_by_admin}};
  m.nodes.emplace_back(node.name, j.dump());
}

StatusOr<json> ControlPlane::RegisterNode(const Principal& who, const json& body) {
  TIDAL_RETURN_IF_ERROR(RequireRole(who, {Role::kAgent, Role::kNode, Role::kAdmin}));
  if (who.role == Role::kNode) {
    // A node credential re-registers its own node only.
    TIDAL_ASSIGN_OR_RETURN(protocol::NodeRegistration named, protocol::NodeRegistrationFromJson(body));
    TIDAL_RETURN_IF_ERROR(CheckNodeCaller(who, named.name));
  }
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    TIDAL_RETURN_IF_ERROR(Writable());
    const bool by_admin = who.role == Role::kAdmin;
    TIDAL_ASSIGN_OR_RETURN(ParsedRegistration reg, ParseRegistration(body, by_admin));
    const Time now = clock_.Now();
    Mutation m;
    if (reg.existing && who.role == Role::kAgent) {
      // The bootstrap token registers a node once: after that only the
      // node's credential may describe it again, unless the node is lost (a
      // restarted agent lost its credential; the node's pods were requeued
      // with it) or the credential was never issued (a wiped store).
      const NodeRuntime& rt = node_rt_[reg.existing->value()];
      if (rt.registered && !rt.lost && !rt.credential_sha256.empty()) {
        AddAudit(m, who.name, "register_refused", nullptr,
                 {{"node", reg.node.name}, {"reason", "already registered"}}, now);
        Enqueue(std::move(m));
        return FailedPrecondition(fmt::format(
            "name: node \"{}\" is registered; only its own credential may register it again "
            "(or the bootstrap token once the node's lease has expired)", reg.node.name));
      }
    }
    ApplyScope scope(*this, m, who.name);
    if (reg.existing && !node_workloads_[reg.existing->value()].empty() &&
        InventoryChanged(config_.catalog.cluster.nodes[reg.existing->value()], reg.node)) {
      // The pods were placed on GPUs this node no longer describes: they
      // restart elsewhere, as a lost node's do.
      const NodeId n = *reg.existing;
      const Node& before = config_.catalog.cluster.nodes[n.value()];
      std::vector<uint64_t> victims(node_workloads_[n.value()].begin(), node_workloads_[n.value()].end());
      AddAudit(m, who.name, "inventory_changed", nullptr,
               {{"node", before.name}, {"gpus_before", before.gpu_count}, {"gpus", reg.node.gpu_count},
                {"gpu_model_before", before.gpu_model}, {"gpu_model", reg.node.gpu_model},
                {"victims", victims}}, now);
      applying_.reason = "inventory_changed";
      EvictPods(n);
      applying_.reason.clear();
    }
    const NodeId id = CommitRegistration(std::move(reg), body);
    node_rt_[id.value()].last_heartbeat_ms = ToMillis(now);
    node_rt_[id.value()].registered_by_admin = by_admin;
    std::string credential;
    IssueCredential(id, &credential);
    const Cluster& cluster = config_.catalog.cluster;
    if (Status s = ApplyEdit(state::RegisterNodeEdit{cluster.nodes[id.value()], cluster.zones, cluster.racks});
        !s.ok()) {
      return Internal("register: " + s.message());
    }
    // Its first lease; heartbeats renew it (ControlPlane::RenewLeases).
    (void)ApplyEdit(state::LeaseEdit{id, now + config_.node_lease});
    const Node& node = config_.catalog.cluster.nodes[id.value()];
    AddAudit(m, who.name, "register", nullptr,
             {{"node", node.name}, {"gpus", node.gpu_count}, {"gpu_model", node.gpu_model},
              {"pool", config_.catalog.cluster.pools[node.pool.value()].name}},
             now);
    seq = Enqueue(std::move(m));
    reply = protocol::RegistrationReplyToJson(
        {node.name, static_cast<int>(ToSeconds(config_.node_lease)),
         static_cast<int>(ToSeconds(config_.heartbeat_interval)), credential});
  }
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  Kick();
  return reply;
}

StatusOr<json> ControlPlane::Heartbeat(const Principal& who, const std::string& node_name,
                                       const json& body) {
  TIDAL_RETURN_IF_ERROR(CheckNodeCaller(who, node_name));
  TIDAL_ASSIGN_OR_RETURN(protocol::Heartbeat heartbeat, protocol::HeartbeatFromJson(body));
  uint64_t seq = 0;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    // A heartbeat's reply hands out desired pods, which a failed store
    // cannot vouch for; the agent keeps what it runs and retries.
    TIDAL_RETURN_IF_ERROR(Writable());
    auto id = config_.catalog.FindNode(node_name);
    if (!id || !node_rt_[id->value()].registered) {
      return NotFound(fmt::format("node \"{}\" is not registered; POST /v1/agent/register first", node_name));
    }
    Node& node = config_.catalog.cluster.nodes[id->value()];
    NodeRuntime& rt = node_rt_[id->value()];
    // Validate everything before changing anything.
    struct Sample { int index; bool faulty; int xid; double util; double mem; };
    std::vector<Sample> samples;
    for (size_t i = 0; i < heartbeat.gpus.size(); ++i) {
      const protocol::GpuReport& g = heartbeat.gpus[i];
      if (g.index >= node.gpu_count) {
        return config::FieldError(config::JoinPath(config::IndexPath("gpus", i), "index"),
                                  fmt::format("expected an integer from 0 to {}, got {}", node.gpu_count - 1, g.index));
      }
      samples.push_back({g.index, !g.healthy || g.xid != 0 || g.ecc_uncorrectable > 0, g.xid,
                         g.utilization.value_or(-1), g.memory_used_gib.value_or(0)});
    }
    const Time now = clock_.Now();
    Mutation m;
    ApplyScope scope(*this, m, who.name);
    rt.last_heartbeat_ms = ToMillis(now);
    if (rt.lost) {
      rt.lost = false;
      AddAudit(m, who.name, "node_back", nullptr, {{"node", node.name}}, now);
      (void)ApplyEdit(state::NodeHealthEdit{*id, node.failed_gpus ? Health::kDegraded : Health::kHealthy});
      (void)ApplyEdit(state::LeaseEdit{*id, now + config_.node_lease});
      changed = true;
    }
    GpuMask newly_failed = 0;
    for (const Sample& s : samples) {
      if (s.util >= 0) rt.gpu_utilization[s.index] = s.util;
      rt.gpu_memory_used_gib[s.index] = s.mem;
      const GpuMask bit = GpuMask{1} << s.index;
      if (s.faulty && !(node.failed_gpus & bit)) {
        newly_failed |= bit;
        metrics_.Inc("tidal_gpu_errors_total", {{"node", node.name}, {"kind", s.xid ? "xid" : "ecc_or_unhealthy"}});
        AddAudit(m, who.name, "gpu_fault", nullptr, {{"node", node.name}, {"gpu", s.index}, {"xid", s.xid}}, now);
      }
    }
    // Per-workload utilization: the mean over the GPUs it holds here. A
    // copy of the ids: an idle report applies an edit, which may reindex.
    for (uint64_t wid : std::vector<uint64_t>(node_workloads_[id->value()].begin(),
                                              node_workloads_[id->value()].end())) {
      WorkloadRecord* w = Find(wid);
      if (!w || !w->allocation) continue;
      double sum = 0;
      int n = 0;
      for (const PodPlacement& p : w->allocation->pods) {
        if (p.node != *id) continue;
        for (int g : MaskToIndices(p.gpus)) {
          if (g < static_cast<int>(rt.gpu_utilization.size()) && rt.gpu_utilization[g] >= 0) {
            sum += rt.gpu_utilization[g];
            ++n;
          }
        }
      }
      if (n > 0) {
        w->utilization = w->utilization < 0 ? sum / n : 0.8 * w->utilization + 0.2 * (sum / n);
        ReportUtilization(*w, now);
      }
    }
    if (newly_failed) {
      // A GPU fault cordons the node; the lifecycle drains it at the pass
      // this kicks (Lifecycle: notices with cause drain), so the simulator
      // and a replay drain it the same way.
      (void)ApplyEdit(state::GpuFaultEdit{*id, newly_failed});
      (void)ApplyEdit(state::NodeHealthEdit{*id, Health::kDegraded});
      changed = true;
    }
    const uint64_t queued_before = last_seq_;
    seq = Enqueue(std::move(m));
    // Only the heartbeat's own changes are waited for: a lease renewal
    // that wrote nothing does not queue behind other clients' commits.
    if (seq == queued_before) seq = 0;
  }
  if (seq != 0) TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  if (changed) Kick();
  protocol::HeartbeatReply reply;
  reply.lease_s = static_cast<int>(ToSeconds(config_.node_lease));
  // The pods only for an agent without the watch; DesiredPods waits until
  // the store has what they reflect.
  if (!heartbeat.pods_by_watch) {
    TIDAL_ASSIGN_OR_RETURN(reply.pods, DesiredPods(node_name));
  }
  return protocol::HeartbeatReplyToJson(reply);
}

std::vector<protocol::PodAssignment> ControlPlane::PodsFor(NodeId node) const {
  std::vector<protocol::PodAssignment> pods;
  for (uint64_t wid : node_workloads_[node.value()]) {
    const WorkloadRecord* r = Find(wid);
    if (!r) continue;
    auto add = [&](const PodPlacement& p, int rank, int world, const std::optional<StopNotice>& notice) {
      protocol::PodAssignment pod;
      pod.key = {wid, rank, r->attempt};
      pod.name = r->w.name;
      pod.kind = std::string(WorkloadKindName(r->w.kind));
      pod.world_size = world;
      pod.gpus = MaskToIndices(p.gpus);
      pod.command = r->run.command;
      pod.env = r->run.env;
      pod.image = r->run.image;
      pod.checkpoint_dir_key = fmt::format("w{}", wid);
      pod.master_port = kMasterPortBase + static_cast<int>(wid % kMasterPortSpan);
      pod.master_addr = "127.0.0.1";
      if (r->allocation && !r->allocation->pods.empty()) {
        pod.master_addr = node_rt_[r->allocation->pods[0].node.value()].address;
      }
      if (r->run.readiness) pod.readiness = protocol::HttpEndpoint{r->run.readiness->port, r->run.readiness->path};
      if (r->run.load_endpoint) {
        pod.load_endpoint = protocol::HttpEndpoint{r->run.load_endpoint->port, r->run.load_endpoint->path};
      }
      pod.desired_run = !notice;
      if (notice) {
        pod.notice = protocol::StopNotice{notice->cause, notice->notice_ms, notice->grace_deadline_ms, SIGTERM};
        // Its price (core/model/lost_work.h) counted on that save.
        pod.notice->checkpoint = notice->AsksForCheckpoint(r->w);
      }
      pods.push_back(std::move(pod));
    };
    if (!r->allocation) continue;
    // Leaving pods keep their rank; world_size counts the pods that stay.
    const auto& all = r->allocation->pods;
    const auto& leaving = r->allocation->leaving;
    const int world = static_cast<int>(all.size() - leaving.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const int rank = r->RankOf(i);
      if (all[i].node != node || r->exited_ranks.count(rank)) continue;
      const bool is_leaving = std::find(leaving.begin(), leaving.end(), all[i]) != leaving.end();
      add(all[i], rank, world, r->stop ? r->stop : is_leaving ? r->shrink_notice : std::nullopt);
    }
  }
  return pods;
}

StatusOr<std::vector<protocol::PodAssignment>> ControlPlane::DesiredPods(const std::string& node_name,
                                                                         std::string* version) const {
  uint64_t seq = 0;
  std::vector<protocol::PodAssignment> pods;
  {
    std::lock_guard lock(mu_);
    auto id = config_.catalog.FindNode(node_name);
    if (!id) return NotFound(fmt::format("node \"{}\" is not known", node_name));
    pods = PodsFor(*id);
    if (version) *version = pod_watch_.Version(id->value());
    seq = last_seq_;
  }
  // Never hand out a placement the store does not have yet.
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  return pods;
}

StatusOr<json> ControlPlane::NodePods(const Principal& who, const std::string& node_name) {
  TIDAL_RETURN_IF_ERROR(CheckNodeCaller(who, node_name));
  protocol::PodAssignmentList list;
  TIDAL_ASSIGN_OR_RETURN(list.pods, DesiredPods(node_name, &list.version));
  return protocol::PodAssignmentListToJson(list);
}

void ControlPlane::WatchNodePods(const Principal& who, const std::string& node_name, const std::string& version,
                                 Duration wait, PodsCallback done) {
  if (Status s = CheckNodeCaller(who, node_name); !s.ok()) return done(s);
  auto answer = [this, who, node_name, done] { done(NodePods(who, node_name)); };
  {
    std::lock_guard lock(mu_);
    auto id = config_.catalog.FindNode(node_name);
    if (!id) return done(NotFound(fmt::format("node \"{}\" is not known", node_name)));
    if (pod_watch_.Park(id->value(), version, NodePodsWatch::Clock::now() + wait, answer)) return;
  }
  answer();
}

void ControlPlane::AnswerPodWatches() { pod_watch_.AnswerAll(); }

StatusOr<json> ControlPlane::PodStatus(const Principal& who, const std::string& node_name,
                                       const json& body) {
  TIDAL_RETURN_IF_ERROR(CheckNodeCaller(who, node_name));
  TIDAL_ASSIGN_OR_RETURN(protocol::PodEventBatch batch, protocol::PodEventBatchFromJson(body));
  uint64_t seq = 0;
  int accepted = 0;
  bool freed = false;
  {
    std::lock_guard lock(mu_);
    TIDAL_RETURN_IF_ERROR(Writable());
    auto node = config_.catalog.FindNode(node_name);
    if (!node) return NotFound(fmt::format("node \"{}\" is not known", node_name));
    const Time now = clock_.Now();
    const std::string actor = "agent:" + node_name;
    Mutation m;
    ApplyScope scope(*this, m, actor);
    for (const protocol::PodEvent& ev : batch.events) {
      const uint64_t workload = ev.key.workload;
      const int rank = ev.key.rank;
      WorkloadRecord* w = Find(workload);
      if (!w || !node_workloads_[node->value()].count(workload)) continue;  // stale: ignore
      // An event about an earlier placement (the agent had not yet seen the
      // requeue) must not touch the new one.
      if (ev.key.attempt > 0 && ev.key.attempt != w->attempt) continue;
      const std::optional<size_t> pod_index = w->PodOfRank(rank);
      if (!pod_index || w->allocation->pods[*pod_index].node != *node) {
        continue;  // not a pod of this node (any more)
      }
      const PodPlacement pod = w->allocation->pods[*pod_index];
      ++accepted;
      const Time at = ev.time_ms > 0 ? TimeFromMillis(ev.time_ms) : now;
      bool dirty = false;
      if (ev.checkpoint_time_ms > 0 && TimeFromMillis(ev.checkpoint_time_ms) > w->allocation->last_checkpoint) {
        (void)ApplyEdit(state::CheckpointEdit{w->w.id, TimeFromMillis(ev.checkpoint_time_ms)});
      }
      if (ev.utilization) {
        const double util = *ev.utilization;
        w->utilization = w->utilization < 0 ? util : 0.8 * w->utilization + 0.2 * util;
        ReportUtilization(*w, now);
      }
      if (ev.load && ev.load->rps >= 0 && w->w.kind == WorkloadKind::kInference) {
        RecordReplicaLoad(*w, rank, ev.load->rps, ev.load->p95_ms, ev.load->p99_ms, at);
      }
      if (ev.phase == "running" && w->pod_started_ms == 0) {
        w->pod_started_ms = ToMillis(at);
        dirty = true;
      } else if (ev.phase == "ready") {
        w->ready_ranks.insert(rank);
        // The state counts ready replicas: a pending scale-up is judged
        // from them by the lifecycle (ScaleUpEndEdit), not here.
        (void)ApplyEdit(state::ReplicaReadyEdit{w->w.id, pod, true});
        dirty = true;
      } else if (ev.phase == "exited") {
        auto& leaving = w->allocation->leaving;
        if (!w->stop && std::find(leaving.begin(), leaving.end(), pod) != leaving.end()) {
          // A pod removed by a shrink is gone: its GPUs are free now.
          AddAudit(m, actor, "pod_exit", w, {{"rank", rank}, {"exit_code", ev.exit_code},
                                             {"signal", ev.signal}, {"reason", ev.reason},
                                             {"cause", "shrink"}}, at);
          (void)ApplyEdit(state::PodExitEdit{w->w.id, pod});
          freed = true;
          continue;
        }
        if (!w->stop && w->w.kind == WorkloadKind::kInference) {
          // A service outlives its replicas: one that exits is replaced (the
          // next pass grows the service back to its desired replicas), and
          // the last one requeues the service instead of failing it.
          AddAudit(m, actor, "pod_exit", w, {{"rank", rank}, {"exit_code", ev.exit_code},
                                             {"signal", ev.signal}, {"reason", ev.reason},
                                             {"cause", "replica_replaced"}}, at);
          (void)ApplyEdit(state::PodExitEdit{w->w.id, pod});
          freed = true;
          continue;
        }
        w->exited_ranks.insert(rank);
        w->replica_load.erase(rank);
        json detail = {{"rank", rank}, {"exit_code", ev.exit_code},
                       {"signal", ev.signal}, {"reason", ev.reason}};
        if (PreemptionRecord* p = OpenPreemption(*w)) {
          // A gang stopped in time only if every pod checkpointed in time.
          if (ev.stop) {
            p->checkpointed_in_time = (p->exited_pods == 0 || p->checkpointed_in_time) && ev.stop->checkpointed_in_time;
            p->killed_at_deadline = p->killed_at_deadline || ev.stop->killed_at_deadline;
            if (ev.stop->notice_time_ms > 0) p->agent_notice_ms = std::max(p->agent_notice_ms, ev.stop->notice_time_ms);
          } else {
            p->checkpointed_in_time = false;  // the agent did not say: assume not
          }
          ++p->exited_pods;
          p->exit_ms = std::max(p->exit_ms, ToMillis(at));
          detail["preemption_seq"] = p->audit_seq;
        }
        if (ev.stop) {
          detail["notice_time_ms"] = ev.stop->notice_time_ms;
          detail["killed_at_deadline"] = ev.stop->killed_at_deadline;
          detail["checkpointed_in_time"] = ev.stop->checkpointed_in_time;
        }
        AddAudit(m, actor, "pod_exit", w, std::move(detail), at);
        dirty = true;
        const bool all_exited = w->exited_ranks.size() >= w->allocation->pods.size();
        if (w->stop) {
          if (all_exited) {
            EndStopped(*w);
            freed = true;
            continue;
          }
        } else if (ev.exit_code != 0 || ev.signal != 0) {
          // One pod failed: the gang is broken. Gang-start failure if the
          // workload never got all pods running.
          if (w->w.is_gang() && w->pod_started_ms == 0) {
            ++w->gang_start_failures;
            metrics_.Inc("tidal_gang_starts_total", {{"result", "failed"}});
          }
          applying_.reason = fmt::format("rank {} exited with code {} signal {}", rank, ev.exit_code, ev.signal);
          (void)ApplyEdit(state::ReleaseEdit{w->w.id, WorkloadState::kFailed});
          applying_.reason.clear();
          freed = true;
          continue;
        } else if (all_exited) {
          applying_.reason = "completed";
          (void)ApplyEdit(state::ReleaseEdit{w->w.id, WorkloadState::kSucceeded});
          applying_.reason.clear();
          freed = true;
          continue;
        }
      }
      if (ev.phase == "running" && w->w.is_gang() && rank == 0) {
        metrics_.Inc("tidal_gang_starts_total", {{"result", "ok"}});
      }
      if (ev.cold_start_ms >= 0) {
        AddAudit(m, actor, "ready", w, {{"rank", rank}, {"cold_start_ms", ev.cold_start_ms}}, at);
      }
      if (dirty) MarkChanged(*w);
    }
    seq = Enqueue(std::move(m));
  }
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  if (freed) Kick();
  return json{{"accepted", accepted}};
}

// The service's load is the sum of its ready replicas' request rates (a
// replica that is not ready serves nothing yet); its latency is the
// rps-weighted mean of theirs, i.e. the latency of the average request.
void ControlPlane::RecordReplicaLoad(WorkloadRecord& w, int rank, double rps, double p95,
                                     double p99, Time at) {
  WorkloadRecord::ReplicaLoad& mine = w.replica_load[rank];
  mine.rps = rps;
  if (p95 >= 0) mine.p95_ms = p95;
  if (p99 >= 0) mine.p99_ms = p99;
  double total = 0, p95_sum = 0, p99_sum = 0, weight = 0;
  int counted = 0;
  for (const auto& [r, load] : w.replica_load) {
    if (!w.ready_ranks.empty() && !w.ready_ranks.count(r)) continue;
    total += load.rps;
    const double wt = load.rps > 0 ? load.rps : 0;
    p95_sum += wt * load.p95_ms;
    p99_sum += wt * load.p99_ms;
    weight += wt;
    ++counted;
  }
  if (counted == 0) return;
  w.load_rps = total;
  if (weight <= 0) {
    // No traffic anywhere: a plain mean.
    p95_sum = p99_sum = 0;
    for (const auto& [r, load] : w.replica_load) {
      if (!w.ready_ranks.empty() && !w.ready_ranks.count(r)) continue;
      p95_sum += load.p95_ms;
      p99_sum += load.p99_ms;
    }
    weight = counted;
  }
  w.p95_ms = p95_sum / weight;
  w.p99_ms = p99_sum / weight;
  if (p99 >= 0) {
    ++w.slo_samples;
    const bool met = w.w.inference.target_p99.count() == 0 || w.p99_ms <= w.w.inference.target_p99.count();
    if (met) ++w.slo_met;
    // A missed sample misses the time since the service's last judged one
    // (at most a minute: a gap in the reports is not a measured miss), under
    // its dominant cause (core/diagnosis, as the simulator's minutes).
    const int64_t at_ms = ToMillis(at);
    const int64_t since_ms =
        w.last_slo_sample_ms > 0 ? std::clamp<int64_t>(at_ms - w.last_slo_sample_ms, 0, 60'000) : 0;
    w.last_slo_sample_ms = std::max(w.last_slo_sample_ms, at_ms);
    if (!met && since_ms > 0 && machine_) {
      const state::State& st = machine_->state();
      const diagnosis::MissDiagnosis why = slo_diag_.DiagnoseMiss(
          st, diagnosis::MissObservation{w.w.id, at - milliseconds(since_ms), at, total, st.ready_replicas(w.w.id)});
      const double missed_s = since_ms / 1000.0;
      w.slo_miss_s_by_cause[static_cast<int>(why.cause)] += missed_s;
      metrics_.Inc("tidal_slo_miss_seconds_total", {{"cause", std::string(diagnosis::MissCauseName(why.cause))}},
                   missed_s);
      w.last_miss = why;
      w.last_miss_ms = at_ms;
      MarkChanged(w);
    }
  }
  observed_load_.emplace_back(w.w.id, at, total);
}

}  // namespace tidal::server
