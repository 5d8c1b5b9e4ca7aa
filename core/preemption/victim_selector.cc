#include "core/preemption/victim_selector.h"

#include <algorithm>
#include <limits>
#include <map>
#include <span>
#include <tuple>

namespace tidal::preemption {
namespace {

int Tier(const Candidate& c) { return c.terminating ? 0 : (c.shrink ? 1 : 2); }

int EligibleFree(const engine::ClusterState& state, const placement::Eligibility& e) {
  int free = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (e.ok(c)) free += state.class_free_gpus(c);
  }
  return free;
}

}  // namespace

double LostGpuSeconds(int gpus, Time now, Time last_checkpoint) {
  if (now <= last_checkpoint) return 0;
  return gpus * ToSeconds(now - last_checkpoint);
}

void SortCandidates(std::vector<Candidate>& candidates) {
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    // Later start = younger = goes first, hence b.start before a.start.
    return std::make_tuple(Tier(a), a.lost_gpu_seconds, a.priority, b.start, a.workload) <
           std::make_tuple(Tier(b), b.lost_gpu_seconds, b.priority, a.start, b.workload);
  });
}

std::optional<Selection> SelectVictims(const engine::ClusterState& state,
                                       const placement::Eligibility& e,
                                       const placement::PlacementRequest& request,
                                       const std::vector<uint8_t>* blocked,
                                       const std::vector<Candidate>& sorted,
                                       const quota::QuotaTracker& quota,
                                       placement::GangPlacer& placer) {
  if (sorted.empty()) return std::nullopt;
  engine::ClusterState hypo = state;
  std::map<QueueId, int> taken;  // GPUs chosen per guarded queue
  Selection selection;
  std::optional<std::vector<PodPlacement>> plan;
  int free = EligibleFree(hypo, e);
  const int needed = request.total_gpus();
  for (size_t i = 0; i < sorted.size() && !plan; ++i) {
    const Candidate& c = sorted[i];
    if (c.guard_queue && quota.tracked(c.queue)) {
      int& t = taken[c.queue];
      if (quota.live_usage(c.queue) - t - c.gpus < quota.guarantee(c.queue)) continue;
      t += c.gpus;
    }
    for (const PodPlacement& p : std::span(c.pods, c.pod_count)) {
      const int before = hypo.class_free_gpus(hypo.class_of(p.node));
      hypo.Release(p.node, p.gpus);
      if (e.ok(hypo.class_of(p.node))) free += hypo.class_free_gpus(hypo.class_of(p.node)) - before;
    }
    selection.chosen.push_back(static_cast<int>(i));
    if (free >= needed) plan = placer.Place(hypo, e, request, blocked);
  }
  if (!plan) return std::nullopt;

  // Drop the costliest victims the request fits without.
  for (int k = static_cast<int>(selection.chosen.size()) - 1; k >= 0; --k) {
    const Candidate& c = sorted[selection.chosen[k]];
    for (const PodPlacement& p : std::span(c.pods, c.pod_count)) {
      hypo.Take(p.node, p.gpus & hypo.free_mask(p.node));
    }
    auto without = placer.Place(hypo, e, request, blocked);
    if (without) {
      plan = std::move(without);
      selection.chosen.erase(selection.chosen.begin() + k);
    } else {
      for (const PodPlacement& p : std::span(c.pods, c.pod_count)) hypo.Release(p.node, p.gpus);
    }
  }
  selection.plan = std::move(*plan);
  return selection;
}

std::optional<Selection> SelectVictimsOnOneNode(const engine::ClusterState& state,
                                                const placement::Eligibility& e,
                                                const placement::PlacementRequest& request,
                                                const std::vector<uint8_t>* blocked,
                                                const std::vector<Candidate>& candidates,
                                                const quota::QuotaTracker& quota) {
  // (node, candidate) pairs for pods on eligible, unblocked nodes, grouped by
  // node with a counting sort.
  const int n_nodes = state.node_count();
  std::vector<uint32_t> count(n_nodes + 1, 0);
  auto usable = [&](const PodPlacement& p) {
    return p.node.value() < static_cast<uint32_t>(n_nodes) && e.ok(state.class_of(p.node)) &&
           (blocked == nullptr || (*blocked)[p.node.value()] == 0);
  };
  for (const Candidate& c : candidates) {
    for (const PodPlacement& p : std::span(c.pods, c.pod_count)) {
      if (usable(p)) ++count[p.node.value() + 1];
    }
  }
  for (int n = 0; n < n_nodes; ++n) count[n + 1] += count[n];
  std::vector<std::pair<uint32_t, GpuMask>> by_node(count[n_nodes]);  // (candidate, its GPUs there)
  std::vector<uint32_t> fill(count.begin(), count.end() - 1);
  for (uint32_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    // A candidate with two pods on one node appears once, with both masks.
    for (const PodPlacement& p : std::span(c.pods, c.pod_count)) {
      if (!usable(p)) continue;
      const uint32_t n = p.node.value();
      if (fill[n] > count[n] && by_node[fill[n] - 1].first == i) {
        by_node[fill[n] - 1].second |= p.gpus;  // its slot stays unused
        continue;
      }
      by_node[fill[n]++] = {i, p.gpus};
    }
  }

  auto cheaper = [&](uint32_t a, uint32_t b) {
    const Candidate& x = candidates[a];
    const Candidate& y = candidates[b];
    return std::make_tuple(Tier(x), x.lost_gpu_seconds, x.priority, y.start, x.workload) <
           std::make_tuple(Tier(y), y.lost_gpu_seconds, y.priority, x.start, y.workload);
  };
  using Cost = std::tuple<int, double, int, uint32_t>;
  std::optional<Cost> best_cost;
  Selection best;
  std::vector<std::pair<uint32_t, GpuMask>> local;
  std::vector<std::pair<QueueId, int>> taken;
  for (int n = 0; n < n_nodes; ++n) {
    const uint32_t from = count[n];  // node n's slots start here
    const uint32_t to = fill[n];
    if (from == to) continue;
    const NodeId node(static_cast<uint32_t>(n));
    local.assign(by_node.begin() + from, by_node.begin() + to);
    std::sort(local.begin(), local.end(), [&](const auto& a, const auto& b) { return cheaper(a.first, b.first); });
    GpuMask free = state.free_mask(node);
    taken.clear();
    std::vector<int> chosen;
    std::vector<PodPlacement> plan;
    for (const auto& [ci, mask] : local) {
      const Candidate& c = candidates[ci];
      if (c.guard_queue && quota.tracked(c.queue)) {
        auto it = std::find_if(taken.begin(), taken.end(), [&](const auto& t) { return t.first == c.queue; });
        const int already = it == taken.end() ? 0 : it->second;
        if (quota.live_usage(c.queue) - already - c.gpus < quota.guarantee(c.queue)) continue;
        if (it == taken.end()) {
          taken.push_back({c.queue, c.gpus});
        } else {
          it->second += c.gpus;
        }
      }
      free |= mask;
      chosen.push_back(static_cast<int>(ci));
      plan.clear();
      if (placement::AssignPodsOnNode(node, free, state.domains(node), request.pods, request.gpus_per_pod, plan)) {
        break;
      }
    }
    if (plan.empty()) continue;
    // Drop the costliest victims the request fits without.
    for (int k = static_cast<int>(chosen.size()) - 1; k >= 0; --k) {
      GpuMask without = state.free_mask(node);
      for (int j = 0; j < static_cast<int>(chosen.size()); ++j) {
        if (j == k) continue;
        for (const auto& [ci, mask] : local) {
          if (static_cast<int>(ci) == chosen[j]) without |= mask;
        }
      }
      std::vector<PodPlacement> trial;
      if (placement::AssignPodsOnNode(node, without, state.domains(node), request.pods, request.gpus_per_pod, trial)) {
        chosen.erase(chosen.begin() + k);
        plan = std::move(trial);
      }
    }
    bool evicts = false;
    double lost = 0;
    int top_priority = std::numeric_limits<int>::min();
    for (int ci : chosen) {
      evicts = evicts || Tier(candidates[ci]) == 2;
      lost += candidates[ci].lost_gpu_seconds;
      top_priority = std::max(top_priority, candidates[ci].priority);
    }
    const Cost cost{evicts ? 1 : 0, lost, top_priority, static_cast<uint32_t>(n)};
    if (!best_cost || cost < *best_cost) {
      best_cost = cost;
      std::sort(chosen.begin(), chosen.end());
      best.chosen = std::move(chosen);
      best.plan = std::move(plan);
    }
  }
  if (!best_cost) return std::nullopt;
  return best;
}

}  // namespace tidal::preemption
