#include "core/engine/cluster_state.h"

#include <bit>
#include <map>
#include <string>

#include "core/common/check.h"

namespace tidal::engine {
namespace {

// Everything a workload's eligibility can depend on, as one string.
std::string ClassKey(const Node& n, bool lent) {
  std::string key;
  key.reserve(96);
  key += std::to_string(n.pool.value());
  key += '|';
  key += n.gpu_model;
  key += '|';
  key += std::to_string(n.gpu_count);
  key += '|';
  for (GpuMask d : n.nvlink_domains) {
    key += std::to_string(d);
    key += ',';
  }
  key += '|';
  key += static_cast<char>('0' + static_cast<int>(n.health));
  key += n.cordoned ? 'c' : '-';
  key += lent ? 'l' : '-';
  for (const auto& [k, v] : n.labels) {
    key += '|';
    key += k;
    key += '=';
    key += v;
  }
  key += '#';
  for (const Taint& t : n.taints) {
    key += t.key;
    key += '=';
    key += t.value;
    key += ';';
  }
  return key;
}

}  // namespace

ClusterState::ClusterState(const Snapshot& snapshot) : cluster_(&snapshot.cluster) {
  const std::vector<Node>& nodes = snapshot.cluster.nodes;
  const size_t n_nodes = nodes.size();
  class_of_.resize(n_nodes);
  free_.resize(n_nodes);
  bucket_pos_.resize(n_nodes);
  whole_node_domains_.resize(n_nodes);

  std::map<std::string, int> class_ids;
  for (size_t i = 0; i < n_nodes; ++i) {
    const Node& node = nodes[i];
    TIDAL_CHECK(node.gpu_count >= 0 && node.gpu_count <= kMaxGpusPerNode)
        << "node " << node.name << " has " << node.gpu_count << " GPUs";
    const bool lent = snapshot.is_lent(NodeId(static_cast<uint32_t>(i)));
    auto [it, inserted] =
        class_ids.emplace(ClassKey(node, lent), static_cast<int>(classes_.size()));
    if (inserted) {
      NodeClass c;
      c.id = it->second;
      c.representative = NodeId(static_cast<uint32_t>(i));
      c.pool = node.pool;
      c.usable = node.health != Health::kFailed && !node.cordoned;
      c.degraded = node.health == Health::kDegraded;
      c.lent = lent;
      c.gpu_count = node.gpu_count;
      c.max_domain_gpus = node.nvlink_domains.empty() ? node.gpu_count : 0;
      for (GpuMask d : node.nvlink_domains) {
        c.max_domain_gpus = std::max(c.max_domain_gpus, std::popcount(d));
      }
      classes_.push_back(c);
      buckets_.emplace_back(node.gpu_count + 1);
      class_free_.push_back(0);
    }
    class_of_[i] = it->second;
    ++classes_[it->second].node_count;
    free_[i] = node.all_gpus() & ~node.failed_gpus;
    if (node.nvlink_domains.empty()) whole_node_domains_[i] = {node.all_gpus()};
  }

  for (const Allocation& a : snapshot.allocations) {
    for (const PodPlacement& p : a.pods) {
      if (p.node.value() >= n_nodes) continue;  // a stale node id holds nothing
      free_[p.node.value()] &= ~p.gpus;
    }
  }

  for (size_t i = 0; i < n_nodes; ++i) {
    const int c = class_of_[i];
    const int count = std::popcount(free_[i]);
    class_free_[c] += count;
    std::vector<uint32_t>& b = buckets_[c][count];
    bucket_pos_[i] = static_cast<uint32_t>(b.size());
    b.push_back(static_cast<uint32_t>(i));
  }
}

int ClusterState::free_count(NodeId n) const { return std::popcount(free_[n.value()]); }

const std::vector<GpuMask>& ClusterState::domains(NodeId n) const {
  const std::vector<GpuMask>& own = cluster_->nodes[n.value()].nvlink_domains;
  return own.empty() ? whole_node_domains_[n.value()] : own;
}

void ClusterState::Move(uint32_t node, int from_count, int to_count) {
  const int c = class_of_[node];
  std::vector<uint32_t>& from = buckets_[c][from_count];
  const uint32_t pos = bucket_pos_[node];
  const uint32_t last = from.back();
  from[pos] = last;
  bucket_pos_[last] = pos;
  from.pop_back();
  std::vector<uint32_t>& to = buckets_[c][to_count];
  bucket_pos_[node] = static_cast<uint32_t>(to.size());
  to.push_back(node);
  class_free_[c] += to_count - from_count;
}

void ClusterState::Take(NodeId n, GpuMask mask) {
  const uint32_t i = n.value();
  TIDAL_CHECK((free_[i] & mask) == mask) << "taking a used GPU on node " << i;
  const int before = std::popcount(free_[i]);
  free_[i] &= ~mask;
  Move(i, before, std::popcount(free_[i]));
}

void ClusterState::Release(NodeId n, GpuMask mask) {
  const uint32_t i = n.value();
  // Failed GPUs never come back, and two allocations claiming one GPU (bad
  // input) must not free it twice.
  mask &= ~cluster_->nodes[i].failed_gpus & ~free_[i];
  if (mask == 0) return;
  const int before = std::popcount(free_[i]);
  free_[i] |= mask;
  Move(i, before, std::popcount(free_[i]));
}

}  // namespace tidal::engine
