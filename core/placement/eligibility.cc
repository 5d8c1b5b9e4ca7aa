#include "core/placement/eligibility.h"

#include <algorithm>
#include <bit>

#include "core/priority/priority_deriver.h"

namespace tidal::placement {
namespace {

void AppendKey(std::string& key, const Workload& w) {
  key.clear();
  key += w.kind == WorkloadKind::kInference ? 'i' : 't';
  key += std::to_string(w.queue.value());
  const PlacementConstraints& c = w.constraints;
  key += "|r";
  for (const std::string& m : c.required_gpu_models) key += m + ',';
  key += "|p";
  for (const std::string& m : c.preferred_gpu_models) key += m + ',';
  key += "|s";
  for (const auto& [k, v] : c.node_selector) key += k + '=' + v + ',';
  key += "|t";
  for (const Taint& t : c.tolerations) key += t.key + '=' + t.value + ',';
}

}  // namespace

bool Tolerates(const std::vector<Taint>& tolerations, const Taint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const Taint& t) {
    return t.key == taint.key && (t.value.empty() || t.value == taint.value);
  });
}

bool MatchesConstraints(const Node& node, const PlacementConstraints& c) {
  if (!c.required_gpu_models.empty() &&
      std::find(c.required_gpu_models.begin(), c.required_gpu_models.end(), node.gpu_model) ==
          c.required_gpu_models.end()) {
    return false;
  }
  for (const auto& [key, value] : c.node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  for (const Taint& taint : node.taints) {
    if (!Tolerates(c.tolerations, taint)) return false;
  }
  return true;
}

EligibilityIndex::EligibilityIndex(const Snapshot& snapshot, const engine::ClusterState& state,
                                   const std::vector<PriorityTemplate>* templates)
    : snapshot_(snapshot), state_(state), templates_(templates) {}

bool EligibilityIndex::MayBorrowSharedPool(const Workload& w) const {
  if (templates_ == nullptr) return true;
  const PriorityTemplate* tmpl = FindTemplate(*templates_, w);
  return tmpl == nullptr || MayBorrowShared(w, *tmpl);
}

bool QueueWithin(const std::vector<Queue>& queues, QueueId q, QueueId ancestor) {
  for (int depth = 0; q.valid() && q.value() < queues.size() && depth < 64; ++depth) {
    if (q == ancestor) return true;
    q = queues[q.value()].parent;
  }
  return false;
}

const Eligibility& EligibilityIndex::Plain(const Workload& w, bool inference, QueueId queue, bool may_borrow_shared) {
  const uint32_t q = queue.value();
  int* id = nullptr;
  if (queue.valid() && q < snapshot_.queues.size()) {
    if (plain_by_queue_.empty()) plain_by_queue_.assign(4 * snapshot_.queues.size(), -1);
    id = &plain_by_queue_[PlainSlot(q, inference, may_borrow_shared)];
  } else {
    id = &plain_ids_.try_emplace(std::make_tuple(inference, q, may_borrow_shared), -1).first->second;
  }
  if (*id < 0) {
    *id = static_cast<int>(entries_.size());
    entries_.push_back(std::make_unique<Eligibility>(Compute(w, *id, may_borrow_shared)));
  }
  return *entries_[*id];
}

const Eligibility& EligibilityIndex::ForDigest(const Workload& w, const WorkloadDigest& d) {
  if (!d.plain_constraints) return For(w);
  // MayBorrowShared is true whatever the template unless the work is
  // preemptible training without checkpoints.
  return Plain(w, d.kind == WorkloadKind::kInference, d.queue,
               !d.preemptible_without_checkpoint || MayBorrowSharedPool(w));
}

const Eligibility& EligibilityIndex::For(const Workload& w) {
  const bool may_borrow_shared = MayBorrowSharedPool(w);
  if (w.constraints.plain()) {
    return Plain(w, w.kind == WorkloadKind::kInference, w.queue, may_borrow_shared);
  }
  AppendKey(key_, w);
  key_ += may_borrow_shared ? "|b" : "|n";
  // Looked up before inserting: emplace would build a node, with a copy of
  // the key, for every workload of every pass only to throw it away.
  auto it = ids_.find(key_);
  if (it == ids_.end()) {
    it = ids_.emplace(key_, static_cast<int>(entries_.size())).first;
    entries_.push_back(std::make_unique<Eligibility>(Compute(w, it->second, may_borrow_shared)));
  }
  return *entries_[it->second];
}

Eligibility EligibilityIndex::Compute(const Workload& w, int key_id,
                                      bool may_borrow_shared) const {
  const Cluster& cluster = snapshot_.cluster;
  const bool inference = w.kind == WorkloadKind::kInference;
  const Queue* queue =
      w.queue.valid() && w.queue.value() < snapshot_.queues.size() ? &snapshot_.queues[w.queue.value()]
                                                                   : nullptr;
  const PlacementConstraints& pc = w.constraints;

  Eligibility e;
  e.key_id = key_id;
  const int n_classes = state_.class_count();
  e.verdict.assign(n_classes, ClassVerdict::kPool);
  e.rank.assign(n_classes, 0);
  e.borrowed_pool.assign(n_classes, 0);
  std::vector<uint8_t> static_ok(n_classes, 0);
  bool owns_a_pool = false;
  for (const Pool& pool : cluster.pools) {
    if ((pool.kind == PoolKind::kDedicated || pool.kind == PoolKind::kSemiDedicated) &&
        QueueWithin(snapshot_.queues, w.queue, pool.owner)) {
      owns_a_pool = true;
    }
  }

  for (int c = 0; c < n_classes; ++c) {
    const engine::NodeClass& nc = state_.node_class(c);
    const Node& node = cluster.node(nc.representative);
    if (!nc.pool.valid() || nc.pool.value() >= cluster.pools.size()) continue;
    const Pool& pool = cluster.pool(nc.pool);
    bool pool_ok = false;
    bool borrowed = false;
    bool own_pool = false;
    switch (pool.kind) {
      case PoolKind::kInferenceReserved: pool_ok = inference; break;
      case PoolKind::kTraining: pool_ok = !inference; break;
      // Training that the template requires to checkpoint before borrowing
      // may not use the shared pool without checkpoints.
      case PoolKind::kShared: pool_ok = inference || may_borrow_shared; borrowed = !inference; break;
      case PoolKind::kDedicated:
        pool_ok = own_pool = QueueWithin(snapshot_.queues, w.queue, pool.owner);
        break;
      case PoolKind::kSemiDedicated:
        pool_ok = true;
        own_pool = QueueWithin(snapshot_.queues, w.queue, pool.owner);
        borrowed = !own_pool;
        break;
    }
    if (pool_ok && queue != nullptr && !queue->pools.empty()) {
      pool_ok = std::find(queue->pools.begin(), queue->pools.end(), pool.id) != queue->pools.end();
    }
    if (!pool_ok) continue;
    e.verdict[c] = ClassVerdict::kConstraints;
    if (!MatchesConstraints(node, pc)) continue;
    static_ok[c] = 1;
    e.verdict[c] = ClassVerdict::kLoan;
    if (pool.kind == PoolKind::kShared && !inference && !nc.lent) continue;
    e.verdict[c] = ClassVerdict::kHealth;
    if (!nc.usable) {
      e.nodes_failing_health += nc.node_count;
      continue;
    }
    e.verdict[c] = ClassVerdict::kOk;
    e.borrowed_pool[c] = borrowed ? 1 : 0;
    const bool preferred =
        pc.preferred_gpu_models.empty() ||
        std::find(pc.preferred_gpu_models.begin(), pc.preferred_gpu_models.end(),
                  node.gpu_model) != pc.preferred_gpu_models.end();
    // Inference takes shared nodes that are not lent first, so a replica
    // does not land on a loan and stop its training.
    const bool lent_to_training = inference && pool.kind == PoolKind::kShared && nc.lent;
    e.rank[c] = static_cast<uint8_t>((nc.degraded ? 8 : 0) + (borrowed || lent_to_training ? 4 : 0) +
                                     (owns_a_pool && !own_pool ? 2 : 0) + (preferred ? 0 : 1));
    e.any_ok = true;
  }
  for (int c = 0; c < n_classes; ++c) {
    e.furthest = std::max(e.furthest, e.verdict[c]);
    if (e.ok(c) && std::find(e.ranks.begin(), e.ranks.end(), e.rank[c]) == e.ranks.end()) {
      e.ranks.push_back(e.rank[c]);
    }
  }
  std::sort(e.ranks.begin(), e.ranks.end());

  // Static capacity from the loan-independent classes: checks 1 and 2 do not
  // depend on the loan state, so a static class passes if any of its classes
  // does, and its totals need no scan of the nodes.
  const engine::StaticNodeClasses& statics = state_.statics();
  std::vector<uint8_t> static_class_ok(statics.classes.size(), 0);
  for (int c = 0; c < n_classes; ++c) {
    if (static_ok[c]) static_class_ok[state_.static_class_of(c)] = 1;
  }
  std::vector<int> rack_gpus(cluster.racks.size(), 0);
  std::vector<int> zone_gpus(cluster.zones.size(), 0);
  for (size_t sc = 0; sc < statics.classes.size(); ++sc) {
    if (!static_class_ok[sc]) continue;
    const engine::StaticNodeClasses::Class& cls = statics.classes[sc];
    const int node_gpus = cluster.node(cls.representative).gpu_count;
    e.static_gpus += cls.node_count * node_gpus;
    e.static_max_node_gpus = std::max(e.static_max_node_gpus, node_gpus);
    e.static_max_domain_gpus = std::max(e.static_max_domain_gpus, cls.max_domain_gpus);
    for (const auto& [rack, gpus] : cls.rack_gpus) {
      if (rack < rack_gpus.size()) e.static_max_rack_gpus = std::max(e.static_max_rack_gpus, rack_gpus[rack] += gpus);
    }
    for (const auto& [zone, gpus] : cls.zone_gpus) {
      if (zone < zone_gpus.size()) e.static_max_zone_gpus = std::max(e.static_max_zone_gpus, zone_gpus[zone] += gpus);
    }
  }
  return e;
}

}  // namespace tidal::placement
