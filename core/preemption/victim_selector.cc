#include "core/preemption/victim_selector.h"

#include <algorithm>
#include <limits>
#include <map>
#include <span>
#include <tuple>

namespace tidal::preemption {
namespace {

int Tier(const Candidate& c) {
  switch (c.kind) {
    case CandidateKind::kTerminating:
    case CandidateKind::kLeaving:
      return 0;
    case CandidateKind::kShrink:
      return 1;
    case CandidateKind::kEvict:
      return 2;
  }
  return 2;
}

// GPUs of `c` on `node` that another chosen candidate of the same
// allocation frees too (an eviction covers its shrink pods).
GpuMask CoveredByOthers(const std::vector<Candidate>& candidates, const std::vector<int>& same_alloc,
                        int self, NodeId node) {
  GpuMask covered = 0;
  for (int j : same_alloc) {
    if (j == self) continue;
    for (const PodPlacement& q : std::span(candidates[j].pods, candidates[j].pod_count)) {
      if (q.node == node) covered |= q.gpus;
    }
  }
  return covered;
}

// An eviction frees its allocation's shrink pods too: a selection that
// holds both keeps the eviction only, so each allocation gets one decision.
void DropSubsumedShrinks(const std::vector<Candidate>& candidates, std::vector<int>& chosen) {
  std::vector<uint32_t> evicted;
  for (int i : chosen) {
    if (candidates[i].kind == CandidateKind::kEvict) evicted.push_back(candidates[i].allocation);
  }
  if (evicted.empty()) return;
  std::sort(evicted.begin(), evicted.end());
  std::erase_if(chosen, [&](int i) {
    return candidates[i].kind == CandidateKind::kShrink &&
           std::binary_search(evicted.begin(), evicted.end(), candidates[i].allocation);
  });
}

int EligibleFree(const engine::ClusterState& state, const placement::Eligibility& e) {
  int free = 0;
  for (int c = 0; c < state.class_count(); ++c) {
    if (e.ok(c)) free += state.class_free_gpus(c);
  }
  return free;
}

}  // namespace

void SortCandidates(std::vector<Candidate>& candidates) {
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    // Later start = younger = goes first, hence b.start before a.start.
    return std::make_tuple(Tier(a), a.lost_gpu_seconds, a.unsaved_gpu_seconds, a.priority, b.start, a.workload) <
           std::make_tuple(Tier(b), b.lost_gpu_seconds, b.unsaved_gpu_seconds, b.priority, a.start, b.workload);
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
  // Chosen candidates per allocation (positions in `sorted`): what an
  // allocation frees is the union of its chosen candidates' pods.
  std::map<uint32_t, std::vector<int>> of_alloc;
  std::map<uint32_t, int> alloc_gpus;  // GPUs chosen per allocation so far
  Selection selection;
  std::optional<std::vector<PodPlacement>> plan;
  int free = EligibleFree(hypo, e);
  const int needed = request.total_gpus();
  for (size_t i = 0; i < sorted.size() && !plan; ++i) {
    const Candidate& c = sorted[i];
    // An eviction after some of its own shrink pods frees only the rest.
    auto chosen_before = alloc_gpus.find(c.allocation);
    const int extra = c.gpus - (chosen_before == alloc_gpus.end() ? 0 : chosen_before->second);
    if (c.guard_queue && quota.tracked(c.queue)) {
      int& t = taken[c.queue];
      if (quota.live_usage(c.queue) - t - extra < quota.guarantee(c.queue)) continue;
      t += extra;
    }
    alloc_gpus[c.allocation] += extra;
    of_alloc[c.allocation].push_back(static_cast<int>(i));
    for (const PodPlacement& p : std::span(c.pods, c.pod_count)) {
      const int before = hypo.class_free_gpus(hypo.class_of(p.node));
      hypo.Release(p.node, p.gpus);
      if (e.ok(hypo.class_of(p.node))) free += hypo.class_free_gpus(hypo.class_of(p.node)) - before;
    }
    selection.chosen.push_back(static_cast<int>(i));
    if (free >= needed) plan = placer.Place(hypo, e, request, blocked);
  }
  if (!plan) return std::nullopt;

  // Drop the costliest victims the request fits without. Dropping one takes
  // back only the GPUs no other chosen candidate of its allocation frees, so
  // a shrink pod under a chosen eviction drops at no cost.
  std::vector<std::pair<NodeId, GpuMask>> taken_back;
  for (int k = static_cast<int>(selection.chosen.size()) - 1; k >= 0; --k) {
    const int idx = selection.chosen[k];
    const Candidate& c = sorted[idx];
    std::vector<int>& same = of_alloc[c.allocation];
    taken_back.clear();
    for (const PodPlacement& p : std::span(c.pods, c.pod_count)) {
      const GpuMask mask = p.gpus & hypo.free_mask(p.node) &
                           ~(same.size() > 1 ? CoveredByOthers(sorted, same, idx, p.node) : 0);
      if (mask == 0) continue;
      hypo.Take(p.node, mask);
      taken_back.push_back({p.node, mask});
    }
    auto without = taken_back.empty() ? plan : placer.Place(hypo, e, request, blocked);
    if (without) {
      plan = std::move(without);
      selection.chosen.erase(selection.chosen.begin() + k);
      std::erase(same, idx);
    } else {
      for (const auto& [node, mask] : taken_back) hypo.Release(node, mask);
    }
  }
  DropSubsumedShrinks(sorted, selection.chosen);
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
    return std::make_tuple(Tier(x), x.lost_gpu_seconds, x.unsaved_gpu_seconds, x.priority, y.start, x.workload) <
           std::make_tuple(Tier(y), y.lost_gpu_seconds, y.unsaved_gpu_seconds, y.priority, x.start, y.workload);
  };
  using Cost = std::tuple<int, double, double, int, uint32_t>;
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
      // An eviction after some of its own shrink pods frees only the rest.
      int extra = c.gpus;
      for (int j : chosen) {
        if (candidates[j].allocation == c.allocation) extra -= candidates[j].gpus;
      }
      extra = std::max(extra, 0);
      if (c.guard_queue && quota.tracked(c.queue)) {
        auto it = std::find_if(taken.begin(), taken.end(), [&](const auto& t) { return t.first == c.queue; });
        const int already = it == taken.end() ? 0 : it->second;
        if (quota.live_usage(c.queue) - already - extra < quota.guarantee(c.queue)) continue;
        if (it == taken.end()) {
          taken.push_back({c.queue, extra});
        } else {
          it->second += extra;
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
    // Drop the costliest victims the request fits without (what the others
    // free is a union of masks, so a shrink pod under a chosen eviction of
    // the same job drops here).
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
    DropSubsumedShrinks(candidates, chosen);
    bool evicts = false;
    double lost = 0;
    double unsaved = 0;
    int top_priority = std::numeric_limits<int>::min();
    for (int ci : chosen) {
      evicts = evicts || Tier(candidates[ci]) == 2;
      lost += candidates[ci].lost_gpu_seconds;
      unsaved += candidates[ci].unsaved_gpu_seconds;
      top_priority = std::max(top_priority, candidates[ci].priority);
    }
    const Cost cost{evicts ? 1 : 0, lost, unsaved, top_priority, static_cast<uint32_t>(n)};
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
