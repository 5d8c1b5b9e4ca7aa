#include "config/cluster_loader.h"

#include <bit>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "config/field_reader.h"
#include "config/yaml_document.h"

namespace tidal::config {
namespace {

using nlohmann::json;

constexpr int kMaxNodes = 100000;
constexpr int kMaxClusterGpus = 1000000;

// Unlimited is written as the word or left out; numbers are GPU counts.
Status ReadLimit(const ObjectReader& r, std::string_view key, int* out) {
  if (!r.Has(key)) return Status::Ok();
  const json& v = r.at(key);
  if (v.is_string() && v.get_ref<const std::string&>() == "unlimited") {
    *out = kUnlimited;
    return Status::Ok();
  }
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxClusterGpus) {
    return FieldError(r.FieldPath(key),
                      "expected a non-negative integer or \"unlimited\", got " + Shown(v));
  }
  *out = v.get<int>();
  return Status::Ok();
}

// Items of a list that may be written as bare names or as objects.
Status NameOrObject(const json& item, const std::string& path, std::string* name) {
  if (item.is_string()) {
    *name = item.get<std::string>();
    if (name->empty()) return FieldError(path, "name must not be empty");
    return Status::Ok();
  }
  if (!item.is_object()) return FieldError(path, "expected a name or an object, got " + Shown(item));
  if (!item.contains("name") || !item["name"].is_string() ||
      item["name"].get_ref<const std::string&>().empty()) {
    return FieldError(JoinPath(path, "name"), "required field is missing");
  }
  *name = item["name"].get<std::string>();
  return Status::Ok();
}

Status ParseTaints(const ObjectReader& r, std::vector<Taint>* out) {
  if (!r.Has("taints")) return Status::Ok();
  return ReadTaintList(r.at("taints"), r.FieldPath("taints"), out);
}

// Expands "{i}", "{i:3}" (zero-padded to 3), "{r}" (index within the rack),
// "{rack}" (the rack's name) in a node group's name pattern.
StatusOr<std::string> ExpandPattern(const std::string& pattern, const std::string& path,
                                    int index, int rack_index, const std::string& rack) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      out += pattern[i];
      continue;
    }
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) return FieldError(path, "unclosed '{' in name pattern");
    std::string field = pattern.substr(i + 1, close - i - 1);
    int width = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      try {
        width = std::stoi(field.substr(colon + 1));
      } catch (...) {
        return FieldError(path, "bad width in '{" + field + "}'");
      }
      field.resize(colon);
    }
    if (field == "i") {
      out += fmt::format("{:0{}}", index, width);
    } else if (field == "r") {
      out += fmt::format("{:0{}}", rack_index, width);
    } else if (field == "rack") {
      out += rack;
    } else {
      return FieldError(path, "unknown placeholder '{" + field + "}' (use {i}, {r} or {rack})");
    }
    i = close;
  }
  return out;
}

class ClusterParser {
 public:
  StatusOr<ClusterConfig> Parse(const json& root) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(root, "", {"zones", "racks", "pools", "nodes", "queues", "projects"}));
    TIDAL_RETURN_IF_ERROR(ParseZones(r));
    TIDAL_RETURN_IF_ERROR(ParseRacks(r));
    TIDAL_RETURN_IF_ERROR(CollectQueueNames(r));
    TIDAL_RETURN_IF_ERROR(ParsePools(r));
    TIDAL_RETURN_IF_ERROR(ParseNodes(r));
    TIDAL_RETURN_IF_ERROR(ParseQueues(r));
    TIDAL_RETURN_IF_ERROR(ParseProjects(r));
    return std::move(config_);
  }

 private:
  Status ParseZones(const ObjectReader& r) {
    Cluster& c = config_.cluster;
    if (!r.Has("zones")) {
      c.zones.push_back(Zone{ZoneId(0), "default"});
      return Status::Ok();
    }
    const json& list = r.at("zones");
    TIDAL_RETURN_IF_ERROR(ExpectArray(list, "zones"));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = IndexPath("zones", i);
      std::string name;
      TIDAL_RETURN_IF_ERROR(NameOrObject(list[i], path, &name));
      if (list[i].is_object()) TIDAL_RETURN_IF_ERROR(ObjectReader::Open(list[i], path, {"name"}).status());
      if (zone_ids_.count(name)) return FieldError(path, "duplicate zone '" + name + "'");
      zone_ids_[name] = ZoneId(static_cast<uint32_t>(c.zones.size()));
      c.zones.push_back(Zone{ZoneId(static_cast<uint32_t>(c.zones.size())), name});
    }
    if (c.zones.empty()) return FieldError("zones", "must list at least one zone");
    return Status::Ok();
  }

  Status ParseRacks(const ObjectReader& r) {
    Cluster& c = config_.cluster;
    if (!r.Has("racks")) {
      c.racks.push_back(Rack{RackId(0), "default", ZoneId(0)});
      rack_ids_["default"] = RackId(0);
      return Status::Ok();
    }
    const json& list = r.at("racks");
    TIDAL_RETURN_IF_ERROR(ExpectArray(list, "racks"));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = IndexPath("racks", i);
      Rack rack;
      rack.id = RackId(static_cast<uint32_t>(c.racks.size()));
      TIDAL_RETURN_IF_ERROR(NameOrObject(list[i], path, &rack.name));
      std::string zone;
      if (list[i].is_object()) {
        TIDAL_ASSIGN_OR_RETURN(ObjectReader rr, ObjectReader::Open(list[i], path, {"name", "zone"}));
        TIDAL_RETURN_IF_ERROR(rr.String("zone", &zone));
      }
      if (zone.empty()) {
        if (c.zones.size() != 1) {
          return FieldError(JoinPath(path, "zone"), "required when there is more than one zone");
        }
        rack.zone = ZoneId(0);
      } else {
        auto it = zone_ids_.find(zone);
        if (it == zone_ids_.end()) return FieldError(JoinPath(path, "zone"), "unknown zone '" + zone + "'");
        rack.zone = it->second;
      }
      if (rack_ids_.count(rack.name)) return FieldError(path, "duplicate rack '" + rack.name + "'");
      rack_ids_[rack.name] = rack.id;
      c.racks.push_back(std::move(rack));
    }
    if (c.racks.empty()) return FieldError("racks", "must list at least one rack");
    return Status::Ok();
  }

  Status CollectQueueNames(const ObjectReader& r) {
    if (!r.Has("queues")) return Status::Ok();
    const json& list = r.at("queues");
    TIDAL_RETURN_IF_ERROR(ExpectArray(list, "queues"));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = IndexPath("queues", i);
      std::string name;
      TIDAL_RETURN_IF_ERROR(NameOrObject(list[i], path, &name));
      if (queue_ids_.count(name)) return FieldError(path, "duplicate queue '" + name + "'");
      queue_ids_[name] = QueueId(static_cast<uint32_t>(i));
    }
    return Status::Ok();
  }

  StatusOr<QueueId> QueueByName(const std::string& name, const std::string& path) const {
    auto it = queue_ids_.find(name);
    if (it == queue_ids_.end()) return FieldError(path, "unknown queue '" + name + "'");
    return it->second;
  }

  Status ParsePools(const ObjectReader& r) {
    Cluster& c = config_.cluster;
    if (!r.Has("pools")) {
      c.pools.push_back(Pool{PoolId(0), "training", PoolKind::kTraining, QueueId()});
      pool_ids_["training"] = PoolId(0);
      return Status::Ok();
    }
    const json& list = r.at("pools");
    TIDAL_RETURN_IF_ERROR(ExpectArray(list, "pools"));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = IndexPath("pools", i);
      Pool pool;
      pool.id = PoolId(static_cast<uint32_t>(c.pools.size()));
      TIDAL_RETURN_IF_ERROR(NameOrObject(list[i], path, &pool.name));
      // The name alone implies the kind: "shared", "dedicated:nlp", ...
      std::string kind_name = pool.name;
      std::string owner;
      if (const size_t colon = pool.name.find(':'); colon != std::string::npos) {
        kind_name = pool.name.substr(0, colon);
        owner = pool.name.substr(colon + 1);
      }
      std::string kind_path = path;
      if (list[i].is_object()) {
        TIDAL_ASSIGN_OR_RETURN(ObjectReader pr, ObjectReader::Open(list[i], path, {"name", "kind", "owner"}));
        if (pr.Has("kind")) {
          TIDAL_RETURN_IF_ERROR(pr.String("kind", &kind_name));
          kind_path = pr.FieldPath("kind");
        }
        TIDAL_RETURN_IF_ERROR(pr.String("owner", &owner));
      }
      if (kind_name == "inference-reserved") {
        pool.kind = PoolKind::kInferenceReserved;
      } else if (kind_name == "shared") {
        pool.kind = PoolKind::kShared;
      } else if (kind_name == "training") {
        pool.kind = PoolKind::kTraining;
      } else if (kind_name == "dedicated") {
        pool.kind = PoolKind::kDedicated;
      } else if (kind_name == "semi-dedicated") {
        pool.kind = PoolKind::kSemiDedicated;
      } else {
        return FieldError(kind_path, "unknown pool kind '" + kind_name +
                                         "' (expected inference-reserved|shared|training|"
                                         "dedicated|semi-dedicated)");
      }
      const bool owned = pool.kind == PoolKind::kDedicated || pool.kind == PoolKind::kSemiDedicated;
      if (owned) {
        if (owner.empty()) {
          return FieldError(JoinPath(path, "owner"), "a " + kind_name + " pool needs an owner queue");
        }
        TIDAL_ASSIGN_OR_RETURN(pool.owner, QueueByName(owner, JoinPath(path, "owner")));
      } else if (!owner.empty()) {
        return FieldError(JoinPath(path, "owner"), "only dedicated and semi-dedicated pools have an owner");
      }
      if (pool_ids_.count(pool.name)) return FieldError(path, "duplicate pool '" + pool.name + "'");
      pool_ids_[pool.name] = pool.id;
      c.pools.push_back(std::move(pool));
    }
    if (c.pools.empty()) return FieldError("pools", "must list at least one pool");
    return Status::Ok();
  }

  Status ParseNodes(const ObjectReader& r) {
    if (!r.Has("nodes")) return FieldError("nodes", "required field is missing");
    const json& list = r.at("nodes");
    TIDAL_RETURN_IF_ERROR(ExpectArray(list, "nodes"));
    for (size_t i = 0; i < list.size(); ++i) {
      TIDAL_RETURN_IF_ERROR(ParseNodeEntry(list[i], IndexPath("nodes", i)));
    }
    if (config_.cluster.nodes.empty()) return FieldError("nodes", "must declare at least one node");
    return Status::Ok();
  }

  // One entry: a single node, or a group of identical nodes when it has `count`.
  Status ParseNodeEntry(const json& item, const std::string& path) {
    TIDAL_ASSIGN_OR_RETURN(
        ObjectReader r,
        ObjectReader::Open(item, path,
                           {"name", "count", "start", "rack", "racks", "pool", "gpus", "gpu_model",
                            "gpu_memory_gib", "nvlink", "mig", "driver", "nic_gbps", "rdma",
                            "labels", "taints", "health", "failed_gpus", "cordoned"}));
    Node proto;
    std::string name;
    TIDAL_RETURN_IF_ERROR(r.String("name", &name, /*required=*/true));
    int count = 1;
    int start = 1;
    const bool group = r.Has("count");
    TIDAL_RETURN_IF_ERROR(r.Int("count", &count, 1, kMaxNodes));
    TIDAL_RETURN_IF_ERROR(r.Int("start", &start, 0, INT_MAX));
    if (r.Has("start") && !group) return FieldError(r.FieldPath("start"), "only a node group (with count) has a start index");

    std::string pool;
    TIDAL_RETURN_IF_ERROR(r.String("pool", &pool));
    if (pool.empty()) {
      if (config_.cluster.pools.size() != 1) {
        return FieldError(r.FieldPath("pool"), "required when there is more than one pool");
      }
      proto.pool = PoolId(0);
    } else {
      auto it = pool_ids_.find(pool);
      if (it == pool_ids_.end()) return FieldError(r.FieldPath("pool"), "unknown pool '" + pool + "'");
      proto.pool = it->second;
    }

    TIDAL_RETURN_IF_ERROR(r.Int("gpus", &proto.gpu_count, 1, kMaxGpusPerNode, /*required=*/true));
    TIDAL_RETURN_IF_ERROR(r.String("gpu_model", &proto.gpu_model, /*required=*/true));
    TIDAL_RETURN_IF_ERROR(r.Int("gpu_memory_gib", &proto.gpu_memory_gib, 0, 4096));
    if (r.Has("nvlink")) {
      TIDAL_ASSIGN_OR_RETURN(proto.nvlink_domains,
                             ParseNvlink(r.at("nvlink"), proto.gpu_count, r.FieldPath("nvlink")));
    } else {
      TIDAL_ASSIGN_OR_RETURN(proto.nvlink_domains, ParseNvlink(json("none"), proto.gpu_count, path));
    }
    TIDAL_RETURN_IF_ERROR(r.Bool("mig", &proto.mig_capable));
    TIDAL_RETURN_IF_ERROR(r.String("driver", &proto.driver_version));
    TIDAL_RETURN_IF_ERROR(r.Double("nic_gbps", &proto.network.nic_gbps, 0, 100000));
    TIDAL_RETURN_IF_ERROR(r.Bool("rdma", &proto.network.rdma));
    TIDAL_RETURN_IF_ERROR(r.StringMap("labels", &proto.labels));
    TIDAL_RETURN_IF_ERROR(ParseTaints(r, &proto.taints));
    TIDAL_RETURN_IF_ERROR(r.Enum<Health>("health", &proto.health,
                                         {{"healthy", Health::kHealthy},
                                          {"degraded", Health::kDegraded},
                                          {"failed", Health::kFailed}}));
    TIDAL_RETURN_IF_ERROR(r.Bool("cordoned", &proto.cordoned));
    if (r.Has("failed_gpus")) {
      const json& failed = r.at("failed_gpus");
      TIDAL_RETURN_IF_ERROR(ExpectArray(failed, r.FieldPath("failed_gpus")));
      for (size_t k = 0; k < failed.size(); ++k) {
        const json& g = failed[k];
        if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() >= proto.gpu_count) {
          return FieldError(IndexPath(r.FieldPath("failed_gpus"), k),
                            fmt::format("expected a GPU index from 0 to {}, got {}",
                                        proto.gpu_count - 1, Shown(g)));
        }
        proto.failed_gpus |= GpuMask{1} << g.get<int>();
      }
    }

    // Racks: one for all, or a list the group fills in equal consecutive blocks.
    std::vector<std::string> racks;
    if (r.Has("rack") && r.Has("racks")) return FieldError(r.FieldPath("racks"), "give either rack or racks, not both");
    if (r.Has("rack")) {
      std::string rack;
      TIDAL_RETURN_IF_ERROR(r.String("rack", &rack));
      racks.push_back(rack);
    } else if (r.Has("racks")) {
      TIDAL_RETURN_IF_ERROR(r.StringList("racks", &racks));
      if (racks.empty()) return FieldError(r.FieldPath("racks"), "must not be empty");
      if (count % static_cast<int>(racks.size()) != 0) {
        return FieldError(r.FieldPath("racks"),
                          fmt::format("count {} does not divide evenly over {} racks", count, racks.size()));
      }
    } else {
      if (config_.cluster.racks.size() != 1) {
        return FieldError(r.FieldPath("rack"), "required when there is more than one rack");
      }
      racks.push_back(config_.cluster.racks[0].name);
    }
    const std::string rack_path = r.Has("racks") ? r.FieldPath("racks") : r.FieldPath("rack");
    for (const std::string& rack : racks) {
      if (!rack_ids_.count(rack)) return FieldError(rack_path, "unknown rack '" + rack + "'");
    }
    if (group && name.find('{') == std::string::npos) {
      return FieldError(r.FieldPath("name"), "a node group's name needs a placeholder such as {i}");
    }

    const int per_rack = count / static_cast<int>(racks.size());
    for (int k = 0; k < count; ++k) {
      Node node = proto;
      const std::string& rack = racks[static_cast<size_t>(k / per_rack)];
      node.rack = rack_ids_.at(rack);
      node.zone = config_.cluster.racks[node.rack.value()].zone;
      node.id = NodeId(static_cast<uint32_t>(config_.cluster.nodes.size()));
      if (group) {
        TIDAL_ASSIGN_OR_RETURN(node.name, ExpandPattern(name, r.FieldPath("name"), start + k,
                                                        start + k % per_rack, rack));
      } else {
        node.name = name;
      }
      if (!node_names_.insert(node.name).second) {
        return FieldError(r.FieldPath("name"), "duplicate node name '" + node.name + "'");
      }
      if (config_.cluster.nodes.size() >= static_cast<size_t>(kMaxNodes)) {
        return FieldError(path, fmt::format("more than {} nodes", kMaxNodes));
      }
      config_.cluster.nodes.push_back(std::move(node));
    }
    return Status::Ok();
  }

  Status ParseQueues(const ObjectReader& r) {
    if (!r.Has("queues")) return Status::Ok();
    const json& list = r.at("queues");
    std::vector<std::string> parents(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = IndexPath("queues", i);
      TIDAL_ASSIGN_OR_RETURN(
          ObjectReader qr,
          ObjectReader::Open(list[i], path,
                             {"name", "parent", "guaranteed_gpus", "lending_limit_gpus",
                              "borrowing_limit_gpus", "weight", "pools"}));
      Queue q;
      q.id = QueueId(static_cast<uint32_t>(i));
      TIDAL_RETURN_IF_ERROR(qr.String("name", &q.name, /*required=*/true));
      TIDAL_RETURN_IF_ERROR(qr.Int("guaranteed_gpus", &q.guaranteed_gpus, 0, kMaxClusterGpus));
      TIDAL_RETURN_IF_ERROR(ReadLimit(qr, "lending_limit_gpus", &q.lending_limit_gpus));
      TIDAL_RETURN_IF_ERROR(ReadLimit(qr, "borrowing_limit_gpus", &q.borrowing_limit_gpus));
      TIDAL_RETURN_IF_ERROR(qr.Double("weight", &q.weight, 1e-6, 1e6));
      if (q.lending_limit_gpus != kUnlimited && q.lending_limit_gpus > q.guaranteed_gpus) {
        return FieldError(qr.FieldPath("lending_limit_gpus"),
                          fmt::format("lends {} GPUs but guarantees only {}", q.lending_limit_gpus,
                                      q.guaranteed_gpus));
      }
      std::vector<std::string> pools;
      TIDAL_RETURN_IF_ERROR(qr.StringList("pools", &pools));
      for (size_t k = 0; k < pools.size(); ++k) {
        auto it = pool_ids_.find(pools[k]);
        if (it == pool_ids_.end()) {
          return FieldError(IndexPath(qr.FieldPath("pools"), k), "unknown pool '" + pools[k] + "'");
        }
        q.pools.push_back(it->second);
      }
      TIDAL_RETURN_IF_ERROR(qr.String("parent", &parents[i]));
      if (!parents[i].empty()) {
        TIDAL_ASSIGN_OR_RETURN(q.parent, QueueByName(parents[i], qr.FieldPath("parent")));
      }
      config_.queues.push_back(std::move(q));
    }
    // The tree: no cycles, and children never guarantee more than the parent.
    std::vector<int> child_sum(config_.queues.size(), 0);
    for (size_t i = 0; i < config_.queues.size(); ++i) {
      QueueId p = config_.queues[i].parent;
      size_t steps = 0;
      while (p.valid()) {
        if (p.value() == i || ++steps > config_.queues.size()) {
          return FieldError(JoinPath(IndexPath("queues", i), "parent"),
                            "queue '" + config_.queues[i].name + "' is its own ancestor");
        }
        p = config_.queues[p.value()].parent;
      }
      if (config_.queues[i].parent.valid()) {
        child_sum[config_.queues[i].parent.value()] += config_.queues[i].guaranteed_gpus;
      }
    }
    for (size_t i = 0; i < config_.queues.size(); ++i) {
      const Queue& q = config_.queues[i];
      if (child_sum[i] > q.guaranteed_gpus) {
        return FieldError(JoinPath(IndexPath("queues", i), "guaranteed_gpus"),
                          fmt::format("children of queue '{}' guarantee {} GPUs, more than its {}",
                                      q.name, child_sum[i], q.guaranteed_gpus));
      }
    }
    return Status::Ok();
  }

  Status ParseProjects(const ObjectReader& r) {
    if (!r.Has("projects")) return Status::Ok();
    const json& list = r.at("projects");
    TIDAL_RETURN_IF_ERROR(ExpectArray(list, "projects"));
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = IndexPath("projects", i);
      TIDAL_ASSIGN_OR_RETURN(
          ObjectReader pr,
          ObjectReader::Open(list[i], path,
                             {"name", "tenant", "tier", "queue", "budget_gpu_hours",
                              "used_gpu_hours", "top_tier_approved", "allowed_queues",
                              "allowed_kinds"}));
      Project p;
      p.id = ProjectId(static_cast<uint32_t>(i));
      TIDAL_RETURN_IF_ERROR(pr.String("name", &p.name, /*required=*/true));
      if (!names.insert(p.name).second) return FieldError(path, "duplicate project '" + p.name + "'");
      p.tenant = p.name;
      TIDAL_RETURN_IF_ERROR(pr.String("tenant", &p.tenant));
      TIDAL_RETURN_IF_ERROR(pr.String("tier", &p.tier, /*required=*/true));
      std::string queue;
      TIDAL_RETURN_IF_ERROR(pr.String("queue", &queue, /*required=*/true));
      TIDAL_ASSIGN_OR_RETURN(p.default_queue, QueueByName(queue, pr.FieldPath("queue")));
      TIDAL_RETURN_IF_ERROR(pr.Double("budget_gpu_hours", &p.budget_gpu_hours, 0, 1e12));
      TIDAL_RETURN_IF_ERROR(pr.Double("used_gpu_hours", &p.used_gpu_hours, 0, 1e12));
      TIDAL_RETURN_IF_ERROR(pr.Bool("top_tier_approved", &p.top_tier_approved));
      std::vector<std::string> queues;
      TIDAL_RETURN_IF_ERROR(pr.StringList("allowed_queues", &queues));
      for (size_t j = 0; j < queues.size(); ++j) {
        TIDAL_ASSIGN_OR_RETURN(QueueId q, QueueByName(queues[j], IndexPath(pr.FieldPath("allowed_queues"), j)));
        if (!p.MayUseQueue(q)) p.allowed_queues.push_back(q);
      }
      std::vector<std::string> kinds;
      TIDAL_RETURN_IF_ERROR(pr.StringList("allowed_kinds", &kinds));
      if (pr.Has("allowed_kinds") && kinds.empty()) {
        return FieldError(pr.FieldPath("allowed_kinds"),
                          "must name at least one kind (leave the field out to allow all)");
      }
      for (size_t j = 0; j < kinds.size(); ++j) {
        std::optional<WorkloadKind> kind;
        for (WorkloadKind k : {WorkloadKind::kTraining, WorkloadKind::kInference,
                               WorkloadKind::kBatchInference, WorkloadKind::kDebug}) {
          if (WorkloadKindName(k) == kinds[j]) kind = k;
        }
        if (!kind) {
          return FieldError(IndexPath(pr.FieldPath("allowed_kinds"), j),
                            "expected one of training|inference|batch_inference|debug, got \"" +
                                kinds[j] + "\"");
        }
        p.allowed_kinds.push_back(*kind);
      }
      config_.projects.push_back(std::move(p));
    }
    return Status::Ok();
  }

  ClusterConfig config_;
  std::map<std::string, ZoneId> zone_ids_;
  std::map<std::string, RackId> rack_ids_;
  std::map<std::string, PoolId> pool_ids_;
  std::map<std::string, QueueId> queue_ids_;
  std::set<std::string> node_names_;
};

}  // namespace

StatusOr<std::vector<GpuMask>> ParseNvlink(const json& value, int gpus, std::string_view path) {
  std::vector<GpuMask> domains;
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s == "none") {
      for (int g = 0; g < gpus; ++g) domains.push_back(GpuMask{1} << g);
      return domains;
    }
    if (s == "all") {
      domains.push_back(gpus >= 64 ? ~GpuMask{0} : (GpuMask{1} << gpus) - 1);
      return domains;
    }
    int a = 0;
    int b = 0;
    char x = 0;
    char extra = 0;
    if (std::sscanf(s.c_str(), "%d%c%d%c", &a, &x, &b, &extra) != 3 || x != 'x' || a <= 0 || b <= 0) {
      return FieldError(path, "expected \"AxB\", \"none\", \"all\" or a list of GPU lists, got " + Shown(value));
    }
    if (a * b != gpus) {
      return FieldError(path, fmt::format("{} makes {} GPUs but the node has {}", s, a * b, gpus));
    }
    for (int d = 0; d < a; ++d) {
      GpuMask m = 0;
      for (int g = 0; g < b; ++g) m |= GpuMask{1} << (d * b + g);
      domains.push_back(m);
    }
    return domains;
  }
  if (!value.is_array()) {
    return FieldError(path, "expected \"AxB\", \"none\", \"all\" or a list of GPU lists, got " + Shown(value));
  }
  GpuMask seen = 0;
  for (size_t d = 0; d < value.size(); ++d) {
    const std::string dpath = IndexPath(path, d);
    if (!value[d].is_array() || value[d].empty()) return FieldError(dpath, "expected a non-empty list of GPU indices");
    GpuMask m = 0;
    for (size_t k = 0; k < value[d].size(); ++k) {
      const json& g = value[d][k];
      if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() >= gpus) {
        return FieldError(IndexPath(dpath, k),
                          fmt::format("expected a GPU index from 0 to {}, got {}", gpus - 1, Shown(g)));
      }
      const GpuMask bit = GpuMask{1} << g.get<int>();
      if ((seen | m) & bit) return FieldError(IndexPath(dpath, k), fmt::format("GPU {} is in two domains", g.get<int>()));
      m |= bit;
    }
    seen |= m;
    domains.push_back(m);
  }
  if (std::popcount(seen) != gpus) {
    return FieldError(path, fmt::format("domains cover {} of the node's {} GPUs", std::popcount(seen), gpus));
  }
  return domains;
}

StatusOr<ClusterConfig> ParseClusterJson(const json& root) {
  ClusterParser parser;
  return parser.Parse(root);
}

StatusOr<ClusterConfig> ParseClusterYaml(std::string_view text, std::string source_name) {
  TIDAL_ASSIGN_OR_RETURN(YamlDocument doc, YamlDocument::Parse(text, std::move(source_name)));
  StatusOr<ClusterConfig> config = ParseClusterJson(doc.root());
  if (!config.ok()) return doc.Locate(config.status());
  return config;
}

StatusOr<ClusterConfig> LoadClusterFile(const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(YamlDocument doc, YamlDocument::Load(path));
  StatusOr<ClusterConfig> config = ParseClusterJson(doc.root());
  if (!config.ok()) return doc.Locate(config.status());
  return config;
}

const Queue* ClusterConfig::FindQueue(std::string_view name) const {
  for (const Queue& q : queues) if (q.name == name) return &q;
  return nullptr;
}
const Project* ClusterConfig::FindProject(std::string_view name) const {
  for (const Project& p : projects) if (p.name == name) return &p;
  return nullptr;
}
const Pool* ClusterConfig::FindPool(std::string_view name) const {
  for (const Pool& p : cluster.pools) if (p.name == name) return &p;
  return nullptr;
}
const Node* ClusterConfig::FindNode(std::string_view name) const {
  for (const Node& n : cluster.nodes) if (n.name == name) return &n;
  return nullptr;
}

}  // namespace tidal::config
