#include "core/placement/cluster_state.h"

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "core/common/check.h"

namespace tidal::engine {
namespace {

// Everything a workload's eligibility can depend on except the loan state,
// as one string.
std::string ClassKey(const Node& n) {
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

void AddTo(std::vector<std::pair<uint32_t, int>>& totals, uint32_t index, int gpus) {
  auto it = std::lower_bound(totals.begin(), totals.end(), std::make_pair(index, 0),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
  if (it != totals.end() && it->first == index) {
    it->second += gpus;
  } else {
    totals.insert(it, {index, gpus});
  }
}

// std::popcount compiles to a library call where the target may lack a
// popcount instruction (the default x86-64 baseline); this runs once per
// node per pass, so it is spelled out (SWAR: bits summed in 2-, 4-, 8-bit
// lanes, the bytes added by one multiply).
int PopCount(GpuMask m) {
  m = m - ((m >> 1) & 0x5555555555555555ULL);
  m = (m & 0x3333333333333333ULL) + ((m >> 2) & 0x3333333333333333ULL);
  m = (m + (m >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((m * 0x0101010101010101ULL) >> 56);
}

// The union of every allocation's GPUs per node, and (when `gpus` is not
// null) each allocation's GPU count. A stale node id holds nothing.
void ScanAllocations(const Snapshot& snapshot, std::vector<GpuMask>& used,
                     std::vector<int>* gpus) {
  if (gpus != nullptr) {
    gpus->clear();
    gpus->reserve(snapshot.allocations.size());
  }
  for (const Allocation& a : snapshot.allocations) {
    int count = 0;
    for (const PodPlacement& p : a.pods) {
      count += std::popcount(p.gpus);  // as Allocation::gpu_count()
      if (p.node.value() >= used.size()) continue;
      used[p.node.value()] |= p.gpus;
    }
    if (gpus != nullptr) gpus->push_back(count);
  }
}

}  // namespace

std::shared_ptr<const StaticNodeClasses> StaticNodeClasses::Build(const Cluster& cluster) {
  auto out = std::make_shared<StaticNodeClasses>();
  const std::vector<Node>& nodes = cluster.nodes;
  out->class_of.resize(nodes.size());
  out->whole_node_domains.resize(nodes.size());
  std::map<std::string, int> ids;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    TIDAL_CHECK(node.gpu_count >= 0 && node.gpu_count <= kMaxGpusPerNode)
        << "node " << node.name << " has " << node.gpu_count << " GPUs";
    auto [it, inserted] = ids.emplace(ClassKey(node), static_cast<int>(out->classes.size()));
    if (inserted) {
      Class c;
      c.representative = NodeId(static_cast<uint32_t>(i));
      c.max_domain_gpus = node.nvlink_domains.empty() ? node.gpu_count : 0;
      for (GpuMask d : node.nvlink_domains) {
        c.max_domain_gpus = std::max(c.max_domain_gpus, std::popcount(d));
      }
      out->classes.push_back(std::move(c));
    }
    Class& c = out->classes[it->second];
    out->class_of[i] = it->second;
    ++c.node_count;
    AddTo(c.rack_gpus, node.rack.value(), node.gpu_count);
    AddTo(c.zone_gpus, node.zone.value(), node.gpu_count);
    if (node.nvlink_domains.empty()) out->whole_node_domains[i] = {node.all_gpus()};
  }
  return out;
}

ClusterState::ClusterState(const Snapshot& snapshot,
                           std::shared_ptr<const StaticNodeClasses> statics,
                           std::vector<int>* allocation_gpus)
    : cluster_(&snapshot.cluster),
      statics_(statics ? std::move(statics) : StaticNodeClasses::Build(snapshot.cluster)) {
  const std::vector<Node>& nodes = snapshot.cluster.nodes;
  const size_t n_nodes = nodes.size();
  TIDAL_CHECK(statics_->class_of.size() == n_nodes)
      << "node classes built for " << statics_->class_of.size() << " nodes, cluster has " << n_nodes;
  class_of_.resize(n_nodes);
  free_.resize(n_nodes);
  bucket_pos_.resize(n_nodes);

  const bool given = !snapshot.free_gpus.empty() || !snapshot.allocation_gpus.empty();
  if (given) {
    TIDAL_CHECK(snapshot.free_gpus.size() == n_nodes &&
                snapshot.allocation_gpus.size() == snapshot.allocations.size())
        << "snapshot free_gpus has " << snapshot.free_gpus.size() << " nodes (cluster "
        << n_nodes << ") and allocation_gpus " << snapshot.allocation_gpus.size()
        << " entries (allocations " << snapshot.allocations.size() << ")";
#if !defined(NDEBUG) || defined(TIDAL_EXPENSIVE_CHECKS)
    // The caller's bookkeeping must say what the cluster and allocations say.
    std::vector<GpuMask> used(n_nodes, 0);
    std::vector<int> gpus;
    ScanAllocations(snapshot, used, &gpus);
    for (size_t i = 0; i < n_nodes; ++i) {
      const GpuMask want = nodes[i].all_gpus() & ~nodes[i].failed_gpus & ~used[i];
      TIDAL_CHECK(want == snapshot.free_gpus[i])
          << "snapshot free_gpus of node " << i << " is " << snapshot.free_gpus[i]
          << ", the node and its allocations say " << want;
    }
    for (size_t a = 0; a < gpus.size(); ++a) {
      TIDAL_CHECK(gpus[a] == snapshot.allocation_gpus[a])
          << "snapshot allocation_gpus[" << a << "] is " << snapshot.allocation_gpus[a]
          << ", its pods hold " << gpus[a];
    }
#endif
    free_ = snapshot.free_gpus;
    log_lineage_ = snapshot.free_gpus_log.lineage();
    log_seen_ = snapshot.free_gpus_log.changes();
    if (allocation_gpus != nullptr) *allocation_gpus = snapshot.allocation_gpus;
  } else {
    std::vector<GpuMask> used(n_nodes, 0);
    ScanAllocations(snapshot, used, allocation_gpus);
    for (size_t i = 0; i < n_nodes; ++i) {
      free_[i] = nodes[i].all_gpus() & ~nodes[i].failed_gpus & ~used[i];
    }
  }

  // Class ids in order of first member, as a key of (static class, lent)
  // would give them: the same partition and order on every path. Only a
  // class's first member is read from the cluster: touching every Node
  // (hundreds of bytes each) would cost a cache miss per node per pass.
  std::vector<int> dynamic_of(2 * statics_->classes.size(), -1);
  for (size_t i = 0; i < n_nodes; ++i) {
    const int sc = statics_->class_of[i];
    const bool lent = snapshot.is_lent(NodeId(static_cast<uint32_t>(i)));
    int& id = dynamic_of[2 * static_cast<size_t>(sc) + (lent ? 1 : 0)];
    if (id < 0) {
      const Node& node = nodes[i];
      id = static_cast<int>(classes_.size());
      NodeClass c;
      c.id = id;
      c.representative = NodeId(static_cast<uint32_t>(i));
      c.pool = node.pool;
      c.usable = node.takes_work();
      c.degraded = node.health == Health::kDegraded;
      c.lent = lent;
      c.gpu_count = node.gpu_count;
      c.max_domain_gpus = statics_->classes[sc].max_domain_gpus;
      classes_.push_back(c);
      static_of_.push_back(sc);
      buckets_.emplace_back(node.gpu_count + 1);
      class_free_.push_back(0);
    }
    class_of_[i] = id;
    ++classes_[id].node_count;
  }

  lent_ = snapshot.lent_nodes;
  FillBuckets();
}

void ClusterState::FillBuckets() {
  const size_t n_nodes = free_.size();
  for (auto& per_class : buckets_) {
    for (auto& b : per_class) b.clear();
  }
  std::fill(class_free_.begin(), class_free_.end(), 0);
  // Bucket sizes first, so each bucket is allocated once; bucket_pos_ holds
  // each node's free count until the buckets are filled.
  std::vector<std::vector<uint32_t>> sizes(buckets_.size());
  for (size_t c = 0; c < buckets_.size(); ++c) sizes[c].assign(buckets_[c].size(), 0);
  for (size_t i = 0; i < n_nodes; ++i) {
    const int count = PopCount(free_[i]);
    bucket_pos_[i] = static_cast<uint32_t>(count);
    ++sizes[class_of_[i]][count];
  }
  for (size_t c = 0; c < buckets_.size(); ++c) {
    for (size_t k = 0; k < buckets_[c].size(); ++k) buckets_[c][k].reserve(sizes[c][k]);
  }
  for (size_t i = 0; i < n_nodes; ++i) {
    const int c = class_of_[i];
    const int count = static_cast<int>(bucket_pos_[i]);
    class_free_[c] += count;
    std::vector<uint32_t>& b = buckets_[c][count];
    bucket_pos_[i] = static_cast<uint32_t>(b.size());
    b.push_back(static_cast<uint32_t>(i));
  }
}

int ClusterState::free_count(NodeId n) const { return PopCount(free_[n.value()]); }

const std::vector<GpuMask>& ClusterState::domains(NodeId n) const {
  const std::vector<GpuMask>& own = cluster_->nodes[n.value()].nvlink_domains;
  return own.empty() ? statics_->whole_node_domains[n.value()] : own;
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
  const int before = PopCount(free_[i]);
  free_[i] &= ~mask;
  Move(i, before, PopCount(free_[i]));
}

void ClusterState::Release(NodeId n, GpuMask mask) {
  const uint32_t i = n.value();
  // Failed GPUs never come back, and two allocations claiming one GPU (bad
  // input) must not free it twice.
  mask &= ~cluster_->nodes[i].failed_gpus & ~free_[i];
  if (mask == 0) return;
  const int before = PopCount(free_[i]);
  free_[i] |= mask;
  Move(i, before, PopCount(free_[i]));
}

}  // namespace tidal::engine

namespace tidal::engine {

void ClusterState::MoveSorted(uint32_t node, int from_count, int to_count) {
  const int c = class_of_[node];
  std::vector<uint32_t>& from = buckets_[c][from_count];
  const uint32_t pos = bucket_pos_[node];
  from.erase(from.begin() + pos);
  for (size_t k = pos; k < from.size(); ++k) bucket_pos_[from[k]] = static_cast<uint32_t>(k);
  std::vector<uint32_t>& to = buckets_[c][to_count];
  const auto at = std::lower_bound(to.begin(), to.end(), node);
  const size_t to_pos = static_cast<size_t>(at - to.begin());
  to.insert(at, node);
  for (size_t k = to_pos; k < to.size(); ++k) bucket_pos_[to[k]] = static_cast<uint32_t>(k);
  class_free_[c] += to_count - from_count;
}

bool ClusterState::CatchUp(const Snapshot& snapshot,
                           const std::shared_ptr<const StaticNodeClasses>& statics) {
  const size_t n_nodes = free_.size();
  if (statics == nullptr || statics != statics_ || snapshot.cluster.nodes.size() != n_nodes ||
      snapshot.free_gpus.size() != n_nodes ||
      snapshot.allocation_gpus.size() != snapshot.allocations.size() ||
      snapshot.lent_nodes != lent_) {
    return false;
  }
  cluster_ = &snapshot.cluster;
  const std::vector<GpuMask>& want = snapshot.free_gpus;
  // The nodes to look at: those the snapshot's log says changed since this
  // state last caught up, or, without a log that reaches back, every node.
  const std::optional<std::span<const uint32_t>> log =
      snapshot.free_gpus_log.ChangedSince(log_lineage_, log_seen_);
  const auto for_each_candidate = [&](auto&& visit) {
    if (!log) {
      for (size_t i = 0; i < n_nodes; ++i) {
        if (!visit(static_cast<uint32_t>(i))) return;
      }
    } else {
      for (uint32_t i : *log) {
        if (!visit(i)) return;
      }
    }
  };
  // Moving one node costs its two buckets' length (they stay sorted); past a
  // few dozen changed nodes one refill of every bucket is cheaper. A node
  // the log lists twice counts once: its first visit brings it up to date.
  constexpr size_t kMaxSortedMoves = 32;
  std::vector<uint32_t> changed;
  for_each_candidate([&](uint32_t i) {
    if (free_[i] != want[i] && std::find(changed.begin(), changed.end(), i) == changed.end()) changed.push_back(i);
    return changed.size() <= kMaxSortedMoves;
  });
  if (changed.size() > kMaxSortedMoves) {
    free_ = want;
    FillBuckets();
  } else {
    // In ascending node order, as the scan of every node visits them.
    std::sort(changed.begin(), changed.end());
    for (uint32_t i : changed) {
      const int before = PopCount(free_[i]);
      const int after = PopCount(want[i]);
      free_[i] = want[i];
      if (before != after) MoveSorted(i, before, after);
    }
  }
  log_lineage_ = snapshot.free_gpus_log.lineage();
  log_seen_ = snapshot.free_gpus_log.changes();
#if !defined(NDEBUG) || defined(TIDAL_EXPENSIVE_CHECKS)
  // Kept across passes, it must be what a build from this snapshot gives
  // (that build also checks free_gpus against the allocations).
  TIDAL_CHECK(SameAs(ClusterState(snapshot, statics_)))
      << "the cluster state kept across passes differs from one built from the snapshot";
#endif
  return true;
}

bool ClusterState::SameAs(const ClusterState& other) const {
  // The log position is not state: it only says how far the log was read.
  return statics_ == other.statics_ && classes_ == other.classes_ && static_of_ == other.static_of_ &&
         class_of_ == other.class_of_ && free_ == other.free_ && class_free_ == other.class_free_ &&
         buckets_ == other.buckets_ && bucket_pos_ == other.bucket_pos_ && lent_ == other.lent_;
}

}  // namespace tidal::engine
