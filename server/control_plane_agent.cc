// The node-agent protocol: register, heartbeat (lease, GPU health and
// utilization), the node's desired pods, and pod events.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "config/cluster_loader.h"
#include "config/field_reader.h"
#include "config/input_limits.h"
#include "server/control_plane.h"
#include "server/workload_codec.h"

namespace tidal::server {

using config::ObjectReader;
using nlohmann::json;

namespace {

constexpr int kMasterPortBase = 29500;
constexpr int kMasterPortSpan = 20000;

Status AgentOnly(const Principal& who) { return RequireRole(who, {Role::kAgent, Role::kAdmin}); }

}  // namespace

// Reads a registration into a Node without touching the state: a bad
// request must change nothing, and validating first is what lets
// RegisterNode avoid copying the whole cluster to roll back.
StatusOr<ControlPlane::ParsedRegistration> ControlPlane::ParseRegistration(const json& body) const {
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(body, "",
                         {"name", "address", "pool", "rack", "zone", "gpu_model", "gpu_memory_gib",
                          "driver_version", "mig_capable", "network", "gpus", "nvlink_domains",
                          "labels", "taints"}));
  const Catalog& cat = config_.catalog;
  ParsedRegistration out;
  Node& node = out.node;
  std::string name;
  TIDAL_RETURN_IF_ERROR(r.String("name", &name, /*required=*/true));
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
  if (r.Has("pool")) {
    std::string pool;
    TIDAL_RETURN_IF_ERROR(r.String("pool", &pool));
    auto p = cat.FindPool(pool);
    if (!p) return config::FieldError("pool", fmt::format("unknown pool \"{}\"", pool));
    node.pool = *p;
  }
  TIDAL_RETURN_IF_ERROR(r.String("zone", &out.zone));
  TIDAL_RETURN_IF_ERROR(r.String("rack", &out.rack));
  if (out.zone.empty() && !node.zone.valid()) {
    out.zone = cat.cluster.zones.empty() ? "default" : cat.cluster.zones[0].name;
  }
  if (out.rack.empty() && !node.rack.valid()) out.rack = "rack-" + name;
  TIDAL_RETURN_IF_ERROR(r.String("gpu_model", &node.gpu_model));
  TIDAL_RETURN_IF_ERROR(r.Int("gpu_memory_gib", &node.gpu_memory_gib, 0, 1 << 20));
  TIDAL_RETURN_IF_ERROR(r.String("driver_version", &node.driver_version));
  TIDAL_RETURN_IF_ERROR(r.Bool("mig_capable", &node.mig_capable));
  if (r.Has("network")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader n, ObjectReader::Open(r.at("network"), "network", {"nic_gbps", "rdma"}));
    TIDAL_RETURN_IF_ERROR(n.Double("nic_gbps", &node.network.nic_gbps, 0, 1e6));
    TIDAL_RETURN_IF_ERROR(n.Bool("rdma", &node.network.rdma));
  }
  if (r.Has("gpus")) {
    TIDAL_RETURN_IF_ERROR(config::ExpectArray(r.at("gpus"), "gpus"));
    const json& gpus = r.at("gpus");
    if (gpus.empty() || gpus.size() > static_cast<size_t>(kMaxGpusPerNode)) {
      return config::FieldError("gpus", fmt::format("expected 1 to {} GPUs, got {}", kMaxGpusPerNode, gpus.size()));
    }
    node.gpu_count = static_cast<int>(gpus.size());
    node.failed_gpus = 0;
    for (size_t i = 0; i < gpus.size(); ++i) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader g, ObjectReader::Open(gpus[i], config::IndexPath("gpus", i),
                                                                {"index", "uuid", "healthy", "model", "memory_gib"}));
      int index = static_cast<int>(i);
      TIDAL_RETURN_IF_ERROR(g.Int("index", &index, 0, node.gpu_count - 1));
      bool healthy = true;
      TIDAL_RETURN_IF_ERROR(g.Bool("healthy", &healthy));
      if (!healthy) node.failed_gpus |= GpuMask{1} << index;
    }
    node.nvlink_domains.clear();
  }
  if (node.gpu_count <= 0) return config::FieldError("gpus", "required: the node's GPUs");
  if (r.Has("nvlink_domains")) {
    auto domains = config::ParseNvlink(r.at("nvlink_domains"), node.gpu_count, "nvlink_domains");
    if (!domains.ok()) return domains.status();
    node.nvlink_domains = *domains;
  }
  if (node.nvlink_domains.empty()) {
    for (int g = 0; g < node.gpu_count; ++g) node.nvlink_domains.push_back(GpuMask{1} << g);
  }
  if (r.Has("labels")) {
    node.labels.clear();
    TIDAL_RETURN_IF_ERROR(r.StringMap("labels", &node.labels));
  }
  if (r.Has("taints")) {
    TIDAL_RETURN_IF_ERROR(config::ExpectArray(r.at("taints"), "taints"));
    node.taints.clear();
    size_t i = 0;
    for (const json& t : r.at("taints")) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, ObjectReader::Open(t, config::IndexPath("taints", i++), {"key", "value"}));
      Taint taint;
      TIDAL_RETURN_IF_ERROR(tr.String("key", &taint.key, true));
      TIDAL_RETURN_IF_ERROR(tr.String("value", &taint.value));
      node.taints.push_back(taint);
    }
  }
  TIDAL_RETURN_IF_ERROR(r.String("address", &out.address));
  node.health = node.failed_gpus ? Health::kDegraded : Health::kHealthy;
  return out;
}

NodeId ControlPlane::CommitRegistration(ParsedRegistration reg, const json& body) {
  Catalog& cat = config_.catalog;
  cluster_dirty_ = true;
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
    if (!lent_nodes_.empty()) lent_nodes_.push_back(false);
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
            {"lost", rt.lost}};
  m.nodes.emplace_back(node.name, j.dump());
}

StatusOr<json> ControlPlane::RegisterNode(const Principal& who, const json& body) {
  TIDAL_RETURN_IF_ERROR(AgentOnly(who));
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    TIDAL_ASSIGN_OR_RETURN(ParsedRegistration reg, ParseRegistration(body));
    const NodeId id = CommitRegistration(std::move(reg), body);
    const Time now = clock_.Now();
    node_rt_[id.value()].last_heartbeat_ms = ToMillis(now);
    Mutation m;
    PersistNode(id, m);
    const Node& node = config_.catalog.cluster.nodes[id.value()];
    AddAudit(m, who.name, "register", nullptr,
             {{"node", node.name}, {"gpus", node.gpu_count}, {"gpu_model", node.gpu_model},
              {"pool", config_.catalog.cluster.pools[node.pool.value()].name}},
             now);
    seq = Enqueue(std::move(m));
    reply = {{"node", node.name},
             {"lease_s", ToSeconds(config_.node_lease)},
             {"heartbeat_interval_s", ToSeconds(config_.heartbeat_interval)}};
  }
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  Kick();
  return reply;
}

StatusOr<json> ControlPlane::Heartbeat(const Principal& who, const std::string& node_name,
                                       const json& body) {
  TIDAL_RETURN_IF_ERROR(AgentOnly(who));
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(body, "", {"gpus"}));
  uint64_t seq = 0;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    auto id = config_.catalog.FindNode(node_name);
    if (!id || !node_rt_[id->value()].registered) {
      return NotFound(fmt::format("node \"{}\" is not registered; POST /v1/agent/register first", node_name));
    }
    Node& node = config_.catalog.cluster.nodes[id->value()];
    NodeRuntime& rt = node_rt_[id->value()];
    // Validate everything before changing anything.
    struct Sample { int index; bool faulty; int xid; double util; double mem; };
    std::vector<Sample> samples;
    if (r.Has("gpus")) {
      TIDAL_RETURN_IF_ERROR(config::ExpectArray(r.at("gpus"), "gpus"));
      size_t i = 0;
      for (const json& g : r.at("gpus")) {
        TIDAL_ASSIGN_OR_RETURN(ObjectReader gr, ObjectReader::Open(g, config::IndexPath("gpus", i++),
            {"index", "healthy", "xid", "ecc_uncorrectable", "utilization", "memory_used_gib"}));
        Sample s{0, false, 0, -1, 0};
        TIDAL_RETURN_IF_ERROR(gr.Int("index", &s.index, 0, node.gpu_count - 1, true));
        bool healthy = true;
        int ecc = 0;
        TIDAL_RETURN_IF_ERROR(gr.Bool("healthy", &healthy));
        TIDAL_RETURN_IF_ERROR(gr.Int("xid", &s.xid, 0, 1 << 20));
        TIDAL_RETURN_IF_ERROR(gr.Int("ecc_uncorrectable", &ecc, 0, INT32_MAX));
        TIDAL_RETURN_IF_ERROR(gr.Double("utilization", &s.util, 0, 1));
        TIDAL_RETURN_IF_ERROR(gr.Double("memory_used_gib", &s.mem, 0, 1e6));
        s.faulty = !healthy || s.xid != 0 || ecc > 0;
        samples.push_back(s);
      }
    }
    const Time now = clock_.Now();
    Mutation m;
    rt.last_heartbeat_ms = ToMillis(now);
    if (rt.lost) {
      rt.lost = false;
      cluster_dirty_ = true;
      node.health = node.failed_gpus ? Health::kDegraded : Health::kHealthy;
      AddAudit(m, who.name, "node_back", nullptr, {{"node", node.name}}, now);
      PersistNode(*id, m);
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
    // Per-workload utilization: the mean over the GPUs it holds here.
    for (uint64_t wid : node_workloads_[id->value()]) {
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
      if (n > 0) w->utilization = w->utilization < 0 ? sum / n : 0.8 * w->utilization + 0.2 * (sum / n);
    }
    if (newly_failed) {
      // A GPU fault drains the node: nothing new lands there and its
      // workloads get notice and restart elsewhere.
      node.failed_gpus |= newly_failed;
      node.cordoned = true;
      cluster_dirty_ = true;
      node.health = Health::kDegraded;
      PersistNode(*id, m);
      for (uint64_t wid : std::vector<uint64_t>(node_workloads_[id->value()].begin(),
                                                node_workloads_[id->value()].end())) {
        WorkloadRecord* w = Find(wid);
        if (!w || !w->allocation || w->stop) continue;
        GiveNotice(*w, "drain", now, now + config_.policy.preemption.default_grace);
        w->preemptions.push_back({ToMillis(now), next_audit_seq_, "drain", 0,
                                  w->allocation->gpu_count() * ToSeconds(now - w->allocation->last_checkpoint), -1});
        AddAudit(m, "scheduler", "preempt", w, {{"cause", "drain"}, {"node", node.name},
                                                {"lost_gpu_seconds", w->preemptions.back().lost_gpu_seconds}}, now);
        metrics_.Inc("tidal_preemptions_total", {{"cause", "drain"}, {"kind", std::string(WorkloadKindName(w->w.kind))}});
        Persist(m, *w);
      }
      changed = true;
    }
    seq = Enqueue(std::move(m));
  }
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  if (changed) Kick();
  TIDAL_ASSIGN_OR_RETURN(json pods, NodePods(who, node_name));
  pods["lease_s"] = ToSeconds(config_.node_lease);
  return pods;
}

json ControlPlane::PodsFor(NodeId node) const {
  json pods = json::array();
  for (uint64_t wid : node_workloads_[node.value()]) {
    const WorkloadRecord* r = Find(wid);
    if (!r) continue;
    auto add = [&](const PodPlacement& p, int rank, int world, const std::optional<StopNotice>& notice) {
      json pod = {{"workload", wid},
                  {"name", r->w.name},
                  {"kind", WorkloadKindName(r->w.kind)},
                  {"rank", rank},
                  {"attempt", r->attempt},
                  {"world_size", world},
                  {"gpus", MaskToIndices(p.gpus)},
                  {"command", r->run.command},
                  {"env", r->run.env},
                  {"image", r->run.image},
                  {"checkpoint_dir_key", fmt::format("w{}", wid)},
                  {"master_port", kMasterPortBase + static_cast<int>(wid % kMasterPortSpan)}};
      std::string master = "127.0.0.1";
      if (r->allocation && !r->allocation->pods.empty()) {
        master = node_rt_[r->allocation->pods[0].node.value()].address;
      }
      pod["master_addr"] = master;
      pod["readiness"] = r->run.readiness ? json{{"port", r->run.readiness->port}, {"path", r->run.readiness->path}} : json(nullptr);
      pod["load_endpoint"] = r->run.load_endpoint ? json{{"port", r->run.load_endpoint->port}, {"path", r->run.load_endpoint->path}} : json(nullptr);
      pod["desired"] = notice ? "stop" : "run";
      pod["notice"] = notice ? json{{"cause", notice->cause},
                                    {"notice_time_ms", notice->notice_ms},
                                    {"grace_deadline_ms", notice->grace_deadline_ms},
                                    {"signal", "SIGTERM"}}
                             : json(nullptr);
      pods.push_back(pod);
    };
    if (!r->allocation) continue;
    // Leaving pods keep their rank; world_size counts the pods that stay.
    const auto& all = r->allocation->pods;
    const auto& leaving = r->allocation->leaving;
    const int world = static_cast<int>(all.size() - leaving.size());
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
      if (all[i].node != node || r->exited_ranks.count(i)) continue;
      const bool is_leaving = std::find(leaving.begin(), leaving.end(), all[i]) != leaving.end();
      add(all[i], i, world, r->stop ? r->stop : is_leaving ? r->shrink_notice : std::nullopt);
    }
  }
  return pods;
}

StatusOr<json> ControlPlane::NodePods(const Principal& who, const std::string& node_name) const {
  TIDAL_RETURN_IF_ERROR(AgentOnly(who));
  uint64_t seq = 0;
  json reply;
  {
    std::lock_guard lock(mu_);
    auto id = config_.catalog.FindNode(node_name);
    if (!id) return NotFound(fmt::format("node \"{}\" is not known", node_name));
    reply = {{"pods", PodsFor(*id)}};
    seq = last_seq_;
  }
  // Never hand out a placement the store does not have yet.
  TIDAL_RETURN_IF_ERROR(store_->WaitDurable(seq));
  return reply;
}

StatusOr<json> ControlPlane::PodStatus(const Principal& who, const std::string& node_name,
                                       const json& body) {
  TIDAL_RETURN_IF_ERROR(AgentOnly(who));
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(body, "", {"events"}));
  if (!r.Has("events")) return config::FieldError("events", "required field is missing");
  TIDAL_RETURN_IF_ERROR(config::ExpectArray(r.at("events"), "events"));
  struct Event {
    uint64_t workload = 0;
    int rank = 0;
    int64_t attempt = -1;  // -1 = not sent
    std::string phase;
    int64_t time_ms = 0;
    int exit_code = 0, signal = 0;
    std::string reason;
    int64_t checkpoint_ms = 0;
    int64_t cold_start_ms = -1;
    int64_t notice_ms = 0;
    bool has_stop_outcome = false;
    bool killed_at_deadline = false, checkpointed_in_time = false;
    double rps = -1, p95 = -1, p99 = -1, util = -1;
  };
  std::vector<Event> events;
  size_t i = 0;
  for (const json& e : r.at("events")) {
    const std::string path = config::IndexPath("events", i++);
    TIDAL_ASSIGN_OR_RETURN(ObjectReader er, ObjectReader::Open(e, path,
        {"workload", "rank", "attempt", "phase", "time_ms", "exit_code", "signal", "reason",
         "checkpoint_time_ms", "cold_start_ms", "load", "utilization", "notice_time_ms",
         "killed_at_deadline", "checkpointed_in_time"}));
    Event ev;
    if (!er.Has("workload")) return config::FieldError(er.FieldPath("workload"), "required field is missing");
    int64_t workload = 0;
    TIDAL_RETURN_IF_ERROR(er.Int64("workload", &workload, 1, INT64_MAX));
    ev.workload = static_cast<uint64_t>(workload);
    TIDAL_RETURN_IF_ERROR(er.Int("rank", &ev.rank, 0, kMaxTotalGpus, true));
    TIDAL_RETURN_IF_ERROR(er.Int64("attempt", &ev.attempt, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(er.String("phase", &ev.phase));
    if (!ev.phase.empty() && ev.phase != "running" && ev.phase != "ready" && ev.phase != "exited") {
      return config::FieldError(er.FieldPath("phase"), "expected one of running|ready|exited, got \"" + ev.phase + "\"");
    }
    TIDAL_RETURN_IF_ERROR(er.Int64("time_ms", &ev.time_ms, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(er.Int("exit_code", &ev.exit_code, -255, 255));
    TIDAL_RETURN_IF_ERROR(er.Int("signal", &ev.signal, 0, 128));
    TIDAL_RETURN_IF_ERROR(er.String("reason", &ev.reason));
    TIDAL_RETURN_IF_ERROR(er.Int64("checkpoint_time_ms", &ev.checkpoint_ms, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(er.Int64("cold_start_ms", &ev.cold_start_ms, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(er.Int64("notice_time_ms", &ev.notice_ms, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(er.Bool("killed_at_deadline", &ev.killed_at_deadline));
    TIDAL_RETURN_IF_ERROR(er.Bool("checkpointed_in_time", &ev.checkpointed_in_time));
    ev.has_stop_outcome = er.Has("notice_time_ms") || er.Has("killed_at_deadline") ||
                          er.Has("checkpointed_in_time");
    TIDAL_RETURN_IF_ERROR(er.Double("utilization", &ev.util, 0, 1));
    if (er.Has("load")) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader lr, ObjectReader::Open(er.at("load"), er.FieldPath("load"), {"rps", "p95_ms", "p99_ms"}));
      TIDAL_RETURN_IF_ERROR(lr.Double("rps", &ev.rps, 0, 1e9));
      TIDAL_RETURN_IF_ERROR(lr.Double("p95_ms", &ev.p95, 0, 1e9));
      TIDAL_RETURN_IF_ERROR(lr.Double("p99_ms", &ev.p99, 0, 1e9));
    }
    events.push_back(ev);
  }
  uint64_t seq = 0;
  int accepted = 0;
  bool freed = false;
  {
    std::lock_guard lock(mu_);
    auto node = config_.catalog.FindNode(node_name);
    if (!node) return NotFound(fmt::format("node \"{}\" is not known", node_name));
    const Time now = clock_.Now();
    const std::string actor = "agent:" + node_name;
    Mutation m;
    for (const Event& ev : events) {
      WorkloadRecord* w = Find(ev.workload);
      if (!w || !node_workloads_[node->value()].count(ev.workload)) continue;  // stale: ignore
      // An event about an earlier placement (the agent had not yet seen the
      // requeue) must not touch the new one.
      if (ev.attempt >= 0 && ev.attempt != w->attempt) continue;
      if (!w->allocation || ev.rank >= static_cast<int>(w->allocation->pods.size()) ||
          w->allocation->pods[ev.rank].node != *node) {
        continue;  // not a pod of this node (any more)
      }
      ++accepted;
      const Time at = ev.time_ms > 0 ? TimeFromMillis(ev.time_ms) : now;
      bool dirty = false;
      if (ev.checkpoint_ms > 0) {
        w->allocation->last_checkpoint = std::max(w->allocation->last_checkpoint, TimeFromMillis(ev.checkpoint_ms));
        dirty = true;
      }
      if (ev.util >= 0) w->utilization = w->utilization < 0 ? ev.util : 0.8 * w->utilization + 0.2 * ev.util;
      if (ev.rps >= 0 && w->w.kind == WorkloadKind::kInference) {
        RecordReplicaLoad(*w, ev.rank, ev.rps, ev.p95, ev.p99, at);
      }
      if (ev.phase == "running" && w->pod_started_ms == 0) {
        w->pod_started_ms = ToMillis(at);
        dirty = true;
      } else if (ev.phase == "ready") {
        w->ready_ranks.insert(ev.rank);
        if (!w->scale_ups.empty()) {
          ScaleUp& su = w->scale_ups.back();
          if (su.ready_ms == 0 && !su.failed && static_cast<int>(w->ready_ranks.size()) >= su.to_pods) {
            su.ready_ms = ToMillis(at);
            if (su.placed_ms == 0) su.placed_ms = su.ready_ms;
            metrics_.Inc("tidal_scale_ups_total", {{"result", "ok"}});
            metrics_.Observe("tidal_scale_up_time_to_capacity_seconds", {},
                             (su.ready_ms - su.requested_ms) / 1000.0);
          }
        }
        dirty = true;
      } else if (ev.phase == "exited") {
        auto& leaving = w->allocation->leaving;
        const PodPlacement pod = w->allocation->pods[ev.rank];
        if (!w->stop && std::find(leaving.begin(), leaving.end(), pod) != leaving.end()) {
          // A pod removed by a shrink is gone: its GPUs are free now.
          IndexAllocation(*w, false);
          RemoveRank(*w, ev.rank);
          if (leaving.empty()) w->shrink_notice.reset();
          IndexAllocation(*w, true);
          AddAudit(m, actor, "pod_exit", w, {{"rank", ev.rank}, {"exit_code", ev.exit_code},
                                             {"signal", ev.signal}, {"reason", ev.reason},
                                             {"cause", "shrink"}}, at);
          freed = true;
          Persist(m, *w);
          continue;
        }
        if (!w->stop && w->w.kind == WorkloadKind::kInference) {
          // A service outlives its replicas: one that exits is replaced (the
          // next pass grows the service back to its desired replicas), and
          // the last one requeues the service instead of failing it.
          AddAudit(m, actor, "pod_exit", w, {{"rank", ev.rank}, {"exit_code", ev.exit_code},
                                             {"signal", ev.signal}, {"reason", ev.reason},
                                             {"cause", "replica_replaced"}}, at);
          if (w->allocation->pods.size() > 1) {
            IndexAllocation(*w, false);
            RemoveRank(*w, ev.rank);
            IndexAllocation(*w, true);
            Persist(m, *w);
          } else {
            Release(*w, WorkloadState::kPending, "replica_exited", now, m, actor);
          }
          freed = true;
          continue;
        }
        w->exited_ranks.insert(ev.rank);
        w->replica_load.erase(ev.rank);
        json detail = {{"rank", ev.rank}, {"exit_code", ev.exit_code},
                       {"signal", ev.signal}, {"reason", ev.reason}};
        if (PreemptionRecord* p = OpenPreemption(*w)) {
          // A gang stopped in time only if every pod checkpointed in time.
          if (ev.has_stop_outcome) {
            p->checkpointed_in_time = (p->exited_pods == 0 || p->checkpointed_in_time) && ev.checkpointed_in_time;
            p->killed_at_deadline = p->killed_at_deadline || ev.killed_at_deadline;
            if (ev.notice_ms > 0) p->agent_notice_ms = std::max(p->agent_notice_ms, ev.notice_ms);
          } else {
            p->checkpointed_in_time = false;  // the agent did not say: assume not
          }
          ++p->exited_pods;
          p->exit_ms = std::max(p->exit_ms, ToMillis(at));
          detail["preemption_seq"] = p->audit_seq;
        }
        if (ev.has_stop_outcome) {
          detail["notice_time_ms"] = ev.notice_ms;
          detail["killed_at_deadline"] = ev.killed_at_deadline;
          detail["checkpointed_in_time"] = ev.checkpointed_in_time;
        }
        AddAudit(m, actor, "pod_exit", w, std::move(detail), at);
        dirty = true;
        const bool all_exited = w->exited_ranks.size() >= w->allocation->pods.size();
        if (w->stop) {
          if (all_exited) {
            Release(*w, w->stop->requeue ? WorkloadState::kPending : WorkloadState::kCancelled,
                    w->stop->cause, now, m, actor);
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
          Release(*w, WorkloadState::kFailed, fmt::format("rank {} exited with code {} signal {}", ev.rank, ev.exit_code, ev.signal),
                  now, m, actor);
          freed = true;
          continue;
        } else if (all_exited) {
          Release(*w, WorkloadState::kSucceeded, "completed", now, m, actor);
          freed = true;
          continue;
        }
      }
      if (ev.phase == "running" && w->w.is_gang() && ev.rank == 0) {
        metrics_.Inc("tidal_gang_starts_total", {{"result", "ok"}});
      }
      if (ev.cold_start_ms >= 0) {
        AddAudit(m, actor, "ready", w, {{"rank", ev.rank}, {"cold_start_ms", ev.cold_start_ms}}, at);
      }
      if (dirty) Persist(m, *w);
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
    if (w.w.inference.target_p99.count() == 0 || w.p99_ms <= w.w.inference.target_p99.count()) ++w.slo_met;
  }
  observed_load_.emplace_back(w.w.id, at, total);
}

}  // namespace tidal::server
