#include "core/placement/gang_placer.h"

#include <algorithm>
#include <bit>

namespace tidal::placement {
namespace {

// The lowest `n` set bits of `mask`.
GpuMask LowestBits(GpuMask mask, int n) {
  GpuMask out = 0;
  for (int i = 0; i < n && mask != 0; ++i) {
    const GpuMask bit = mask & (~mask + 1);
    out |= bit;
    mask &= ~bit;
  }
  return out;
}

bool LevelAllowed(const TopologyConstraint& t, TopologyLevel level) {
  if (!t.required || t.level == TopologyLevel::kNone) return true;
  // Levels are ordered finest first; kRack allows nvlink, node and rack.
  return static_cast<int>(level) <= static_cast<int>(t.level);
}

bool Blocked(const std::vector<uint8_t>* blocked, uint32_t node) {
  return blocked != nullptr && (*blocked)[node] != 0;
}

}  // namespace

bool AssignPodsOnNode(NodeId node, GpuMask free, const std::vector<GpuMask>& domains, int pods,
                      int gpus_per_pod, std::vector<PodPlacement>& out) {
  if (std::popcount(free) < pods * gpus_per_pod) return false;
  for (int p = 0; p < pods; ++p) {
    GpuMask best = 0;
    int best_free = kMaxGpusPerNode + 1;
    for (GpuMask d : domains) {
      const int f = std::popcount(free & d);
      if (f >= gpus_per_pod && f < best_free) {
        best_free = f;
        best = d;
      }
    }
    const GpuMask taken = LowestBits(best != 0 ? (free & best) : free, gpus_per_pod);
    free &= ~taken;
    out.push_back({node, taken});
  }
  return true;
}

std::optional<std::vector<PodPlacement>> GangPlacer::Place(const engine::ClusterState& state,
                                                           const Eligibility& e,
                                                           const PlacementRequest& r,
                                                           const std::vector<uint8_t>* blocked) {
  if (!e.any_ok || r.pods <= 0 || r.gpus_per_pod <= 0) return std::nullopt;
  std::vector<PodPlacement> out;
  out.reserve(r.pods);
  for (uint8_t rank : e.ranks) {
    out.clear();
    if (PlaceUpToRank(state, e, rank, r, blocked, out)) return out;
  }
  return std::nullopt;
}

bool GangPlacer::PlaceUpToRank(const engine::ClusterState& state, const Eligibility& e,
                               int max_rank, const PlacementRequest& r,
                               const std::vector<uint8_t>* blocked, std::vector<PodPlacement>& out) {
  const int total = r.total_gpus();
  // Stop early: no eligible class has that many free GPUs left.
  int free_total = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (e.ok(c) && e.rank[c] <= max_rank) free_total += state.class_free_gpus(c);
  }
  if (free_total < total) return false;

  if (PlaceInOneDomain(state, e, max_rank, r, blocked, out)) return true;
  if (!LevelAllowed(r.topology, TopologyLevel::kNode)) return false;
  if (PlaceOnOneNode(state, e, max_rank, r, blocked, out)) return true;
  if (r.topology.required && r.topology.level == TopologyLevel::kNode) return false;

  // Multi-node: every unblocked eligible node with room for one pod or more.
  candidates_.clear();
  int capacity = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (!e.ok(c) || e.rank[c] > max_rank) continue;
    const int gpus = state.node_class(c).gpu_count;
    for (int k = r.gpus_per_pod; k <= gpus; ++k) {
      for (uint32_t node : state.bucket(c, k)) {
        if (Blocked(blocked, node)) continue;
        candidates_.push_back({node, k / r.gpus_per_pod});
        capacity += k / r.gpus_per_pod;
      }
    }
  }
  if (capacity < r.pods) return false;

  const Cluster& cluster = state.cluster();
  // Rack, then zone: the domain with the least capacity that holds the gang.
  for (TopologyLevel level : {TopologyLevel::kRack, TopologyLevel::kNone}) {
    const bool by_rack = level == TopologyLevel::kRack;
    if (!by_rack && r.topology.required && r.topology.level == TopologyLevel::kRack) return false;
    const size_t n_domains = by_rack ? cluster.racks.size() : cluster.zones.size();
    if (n_domains == 0) continue;
    auto domain_of = [&](uint32_t node) -> uint32_t {
      const Node& n = cluster.nodes[node];
      const uint32_t d = by_rack ? n.rack.value() : n.zone.value();
      return d < n_domains ? d : static_cast<uint32_t>(n_domains);  // unknown: its own bucket
    };
    domain_pods_.assign(n_domains + 1, 0);
    for (const Candidate& cand : candidates_) domain_pods_[domain_of(cand.node)] += cand.pods;
    int best = -1;
    for (size_t d = 0; d < n_domains; ++d) {
      if (domain_pods_[d] >= r.pods && (best < 0 || domain_pods_[d] < domain_pods_[best])) {
        best = static_cast<int>(d);
      }
    }
    if (best < 0) continue;
    // Group the chosen domain's candidates at the front.
    auto mid = std::stable_partition(candidates_.begin(), candidates_.end(), [&](const Candidate& c) {
      return domain_of(c.node) == static_cast<uint32_t>(best);
    });
    FillFrom(state, 0, static_cast<size_t>(mid - candidates_.begin()), r.pods, r.gpus_per_pod, out);
    return true;
  }
  FillFrom(state, 0, candidates_.size(), r.pods, r.gpus_per_pod, out);
  return true;
}

bool GangPlacer::PlaceInOneDomain(const engine::ClusterState& state, const Eligibility& e,
                                  int max_rank, const PlacementRequest& r,
                                  const std::vector<uint8_t>* blocked,
                                  std::vector<PodPlacement>& out) {
  const int total = r.total_gpus();
  int best_node = -1;
  int best_count = 0;
  int best_domain_free = 0;
  GpuMask best_domain = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (!e.ok(c) || e.rank[c] > max_rank) continue;
    const engine::NodeClass& nc = state.node_class(c);
    if (nc.max_domain_gpus < total) continue;
    bool found = false;
    for (int k = total; k <= nc.gpu_count && !found; ++k) {
      if (best_node >= 0 && k > best_count) break;  // cannot beat the best so far
      for (uint32_t node : state.bucket(c, k)) {
        if (Blocked(blocked, node)) continue;
        const GpuMask free = state.free_mask(NodeId(node));
        for (GpuMask d : state.domains(NodeId(node))) {
          const int f = std::popcount(free & d);
          if (f < total) continue;
          if (best_node < 0 || k < best_count || (k == best_count && f < best_domain_free)) {
            best_node = static_cast<int>(node);
            best_count = k;
            best_domain_free = f;
            best_domain = d;
          }
          found = true;
        }
        if (found) break;
      }
    }
  }
  if (best_node < 0) return false;
  const NodeId node(static_cast<uint32_t>(best_node));
  return AssignPodsOnNode(node, state.free_mask(node) & best_domain, {best_domain}, r.pods,
                          r.gpus_per_pod, out);
}

bool GangPlacer::PlaceOnOneNode(const engine::ClusterState& state, const Eligibility& e,
                                int max_rank, const PlacementRequest& r,
                                const std::vector<uint8_t>* blocked,
                                std::vector<PodPlacement>& out) {
  const int total = r.total_gpus();
  int best_node = -1;
  int best_count = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (!e.ok(c) || e.rank[c] > max_rank) continue;
    const engine::NodeClass& nc = state.node_class(c);
    for (int k = total; k <= nc.gpu_count; ++k) {
      if (best_node >= 0 && k >= best_count) break;
      const std::vector<uint32_t>& bucket = state.bucket(c, k);
      auto it = std::find_if(bucket.begin(), bucket.end(),
                             [&](uint32_t node) { return !Blocked(blocked, node); });
      if (it != bucket.end()) {
        best_node = static_cast<int>(*it);
        best_count = k;
        break;
      }
    }
  }
  if (best_node < 0) return false;
  const NodeId node(static_cast<uint32_t>(best_node));
  return AssignPodsOnNode(node, state.free_mask(node), state.domains(node), r.pods, r.gpus_per_pod,
                          out);
}

void GangPlacer::FillFrom(const engine::ClusterState& state, size_t begin, size_t end, int pods,
                          int gpus_per_pod, std::vector<PodPlacement>& out) {
  std::sort(candidates_.begin() + begin, candidates_.begin() + end,
            [](const Candidate& a, const Candidate& b) {
              return a.pods != b.pods ? a.pods > b.pods : a.node < b.node;
            });
  int remaining = pods;
  for (size_t i = begin; i < end && remaining > 0; ++i) {
    if (candidates_[i].pods >= remaining) {
      // The smallest node that holds all the remaining pods: sorted by
      // capacity descending, it is the last one that still holds them.
      size_t j = i;
      while (j + 1 < end && candidates_[j + 1].pods >= remaining) ++j;
      const NodeId node(candidates_[j].node);
      AssignPodsOnNode(node, state.free_mask(node), state.domains(node), remaining, gpus_per_pod, out);
      return;
    }
    const NodeId node(candidates_[i].node);
    AssignPodsOnNode(node, state.free_mask(node), state.domains(node), candidates_[i].pods,
                     gpus_per_pod, out);
    remaining -= candidates_[i].pods;
  }
}

FitDiagnosis GangPlacer::Diagnose(const engine::ClusterState& state, const Eligibility& e,
                                  const PlacementRequest& r, const std::vector<uint8_t>* blocked) {
  FitDiagnosis d;
  const Cluster& cluster = state.cluster();
  const TopologyLevel level = r.topology.required ? r.topology.level : TopologyLevel::kNone;
  domain_pods_.assign(std::max(cluster.racks.size(), size_t{1}), 0);
  for (int c = 0; c < state.class_count(); ++c) {
    if (!e.ok(c)) continue;
    const int gpus = state.node_class(c).gpu_count;
    for (int k = 1; k <= gpus; ++k) {
      for (uint32_t node : state.bucket(c, k)) {
        if (Blocked(blocked, node)) continue;
        const int placeable = (k / r.gpus_per_pod) * r.gpus_per_pod;
        d.free_gpus += k;
        d.placeable_gpus += placeable;
        switch (level) {
          case TopologyLevel::kNvlink:
            for (GpuMask dom : state.domains(NodeId(node))) {
              d.best_domain_gpus = std::max(d.best_domain_gpus,
                                            std::popcount(state.free_mask(NodeId(node)) & dom));
            }
            break;
          case TopologyLevel::kNode: d.best_domain_gpus = std::max(d.best_domain_gpus, placeable); break;
          case TopologyLevel::kRack: {
            const uint32_t rack = cluster.nodes[node].rack.value();
            if (rack < cluster.racks.size()) {
              d.best_domain_gpus = std::max(d.best_domain_gpus, domain_pods_[rack] += placeable);
            }
            break;
          }
          case TopologyLevel::kNone: break;
        }
      }
    }
  }
  return d;
}

}  // namespace tidal::placement
