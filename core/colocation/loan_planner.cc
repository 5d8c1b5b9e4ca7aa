#include "core/colocation/loan_planner.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>
#include <bit>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/common/check.h"
#include "core/model/lost_work.h"
#include "core/model/workload_index.h"
#include "core/placement/eligibility.h"

namespace tidal {

int HealthyGpus(const Node& node) {
  return node.gpu_count - std::popcount(node.failed_gpus & node.all_gpus());
}

namespace {


// One piece of borrowed work on a shared node, as a return would stop it.
struct Occupant {
  int job = 0;                  // index into Packer::jobs_
  bool shrinkable = false;      // an elastic job that keeps min_pods without this node
  int gpus_on_node = 0;
};

// Borrowed work on shared nodes, densely indexed so that "already stopped"
// is a flag, not a lookup.
struct Job {
  double lost_gpu_seconds = 0;  // if stopped whole
  std::vector<size_t> nodes;    // shared nodes it occupies, ascending
  bool stopped = false;         // an earlier pick already stops it
};

struct NodeState {
  int room = 0;  // GPUs inference could use
  bool shared = false;
  bool reserved = false;
  bool usable = false;
  bool hosts_inference = false;
  bool kept = false;  // stays with inference
  std::vector<Occupant> occupants;
  // Cost(i) cached: lost GPU-seconds and borrowed GPUs not yet stopped.
  double lost = 0;
  int borrowed_gpus = 0;
  bool spans_nodes = false;  // an unstopped, unshrinkable occupant is on other nodes too
};

class Packer {
 public:
  Packer(const Snapshot& snapshot, Duration grace, const std::vector<bool>& previously_lent)
      : snapshot_(snapshot), previously_lent_(previously_lent) {
    const size_t n = snapshot.cluster.nodes.size();
    nodes_.resize(n);
    const engine::WorkloadIndex workloads(snapshot);
    // Only shared and reserved nodes are packed; other work on any other
    // node changes nothing here.
    bool packs_any = false;
    for (size_t i = 0; i < n; ++i) {
      const Node& node = snapshot.cluster.nodes[i];
      NodeState& s = nodes_[i];
      const PoolKind kind = snapshot.cluster.pool(node.pool).kind;
      s.shared = kind == PoolKind::kShared;
      s.reserved = kind == PoolKind::kInferenceReserved;
      s.usable = node.takes_work();
      s.room = s.usable ? HealthyGpus(node) : 0;
      packs_any = packs_any || s.shared || s.reserved;
    }
    std::vector<std::pair<size_t, int>> pods_on;  // (node, pods) of one allocation
    std::vector<int> gpus_on;
    for (size_t ai = 0; ai < snapshot.allocations.size(); ++ai) {
      const Allocation& a = snapshot.allocations[ai];
      const int wi = workloads.OfAllocation(snapshot, ai);
      const bool inference = wi >= 0 && KindAt(snapshot, wi) == WorkloadKind::kInference;
      if (!inference && !packs_any) continue;
      const Workload* w = wi < 0 ? nullptr : &snapshot.workloads[wi];
      if (inference && !a.terminating) running_[a.workload] += static_cast<int>(a.pods.size());
      pods_on.clear();
      gpus_on.clear();
      for (const PodPlacement& p : a.pods) {
        if (p.node.value() >= nodes_.size()) continue;
        NodeState& s = nodes_[p.node.value()];
        const int gpus = std::popcount(p.gpus);
        if (inference) {
          s.hosts_inference = true;
          s.room -= gpus;
        } else if (!s.shared) {
          // Only shared nodes evict borrowed work to make room.
          s.room -= gpus;
        }
        auto it = std::find_if(pods_on.begin(), pods_on.end(),
                               [&](const auto& e) { return e.first == p.node.value(); });
        if (it == pods_on.end()) {
          pods_on.emplace_back(p.node.value(), 1);
          gpus_on.push_back(gpus);
        } else {
          ++it->second;
          gpus_on[static_cast<size_t>(it - pods_on.begin())] += gpus;
        }
      }
      if (inference || a.terminating) continue;
      const int job = static_cast<int>(jobs_.size());
      Job j;
      for (size_t k = 0; k < pods_on.size(); ++k) {
        const auto [node, count] = pods_on[k];
        NodeState& s = nodes_[node];
        if (!s.shared) continue;
        const int remaining = static_cast<int>(a.pods.size()) - count;
        const bool shrinkable = w != nullptr && w->is_elastic() && remaining >= w->min_pods;
        s.occupants.push_back({job, shrinkable, gpus_on[k]});
        j.nodes.push_back(node);
      }
      if (j.nodes.empty()) continue;
      j.lost_gpu_seconds = LostGpuSeconds(w, a, snapshot.now, grace);
      std::sort(j.nodes.begin(), j.nodes.end());
      jobs_.push_back(std::move(j));
    }
    for (size_t i = 0; i < n; ++i) {
      NodeState& s = nodes_[i];
      s.room = std::max(0, s.room);
      // A replica the engine put on free GPUs of a lent node does not recall
      // the node by itself: only a replica that needs the room does.
      if (s.shared && s.hosts_inference && !WasLent(i)) s.kept = true;
      if (s.shared && WasLent(i) && s.usable) lent_candidates_.push_back(i);
      Recost(i);
    }
  }

  bool WasLent(size_t i) const { return i < previously_lent_.size() && previously_lent_[i]; }

  int Running(WorkloadId service) const {
    auto it = running_.find(service);
    return it == running_.end() ? 0 : it->second;
  }

  // Lost GPU-seconds of returning node i, not counting work an earlier
  // return already stops.
  double Cost(size_t i) const { return nodes_[i].lost; }

  bool Fits(size_t i, const InferenceDemand& d) const {
    const NodeState& s = nodes_[i];
    return s.usable && s.room >= d.gpus_per_pod &&
           InferenceMayUseNode(d.constraints, snapshot_.cluster.nodes[i]);
  }

  // Where one service's first-fit scans resume. Room only shrinks and a node
  // only ever turns from cold to warm, so a node skipped for this service
  // stays unfit for it: each scan moves forward only, except to revisit a
  // node that has just turned warm.
  struct Cursor {
    size_t reserved = 0;
    size_t warm = 0;  // shared nodes kept for inference
    size_t cold = 0;  // shared nodes neither lent nor kept yet
  };

  // Places one replica of `d`; `remaining_gpus` counts it and every replica
  // still to place after it. Returns the node or nullopt.
  std::optional<size_t> Place(const InferenceDemand& d, int remaining_gpus, Cursor& c) {
    const size_t n = nodes_.size();
    // (1) inference-reserved nodes.
    for (; c.reserved < n; ++c.reserved) {
      if (nodes_[c.reserved].reserved && Fits(c.reserved, d)) return Take(c.reserved, d);
    }
    // (2) shared nodes inference already holds, then other unlent ones.
    for (; c.warm < n; ++c.warm) {
      if (nodes_[c.warm].shared && nodes_[c.warm].kept && Fits(c.warm, d)) {
        return Take(c.warm, d);
      }
    }
    for (; c.cold < n; ++c.cold) {
      const NodeState& s = nodes_[c.cold];
      if (s.shared && !s.kept && !WasLent(c.cold) && Fits(c.cold, d)) {
        c.warm = std::min(c.warm, c.cold);
        return Take(c.cold, d);
      }
    }
    // (3) lent nodes, cheapest return first.
    std::optional<size_t> best;
    std::tuple<double, int, size_t> best_key;
    for (size_t i : lent_candidates_) {
      const NodeState& s = nodes_[i];
      if (s.kept || !Fits(i, d)) continue;
      const std::tuple<double, int, size_t> key{AmortizedCost(i, d, remaining_gpus),
                                                s.borrowed_gpus, i};
      if (!best || key < best_key) {
        best = i;
        best_key = key;
      }
    }
    if (!best) return std::nullopt;
    std::vector<size_t> recost;
    for (const Occupant& o : nodes_[*best].occupants) {
      Job& job = jobs_[static_cast<size_t>(o.job)];
      if (o.shrinkable || job.stopped) continue;
      job.stopped = true;
      recost.insert(recost.end(), job.nodes.begin(), job.nodes.end());
    }
    for (size_t m : recost) Recost(m);
    claimed_by_.emplace(NodeId(static_cast<NodeId::Rep>(*best)), d.service);
    c.warm = std::min(c.warm, *best);
    return Take(*best, d);
  }

  std::vector<NodeState>& nodes() { return nodes_; }
  const std::map<NodeId, WorkloadId>& claimed_by() const { return claimed_by_; }

 private:
  size_t Take(size_t i, const InferenceDemand& d) {
    nodes_[i].room -= d.gpus_per_pod;
    if (nodes_[i].shared) nodes_[i].kept = true;
    return i;
  }

  void Recost(size_t i) {
    NodeState& s = nodes_[i];
    s.lost = 0;
    s.borrowed_gpus = 0;
    s.spans_nodes = false;
    for (const Occupant& o : s.occupants) {
      const Job& job = jobs_[static_cast<size_t>(o.job)];
      if (job.stopped) continue;
      s.borrowed_gpus += o.gpus_on_node;
      if (o.shrinkable) continue;
      s.lost += job.lost_gpu_seconds;
      if (job.nodes.size() > 1) s.spans_nodes = true;
    }
  }

  // Node i's return cost shared over the lent nodes it would empty (a gang
  // stopped on i frees its other nodes too), counting only as many of them as
  // the `remaining_gpus` still to place can use.
  double AmortizedCost(size_t i, const InferenceDemand& d, int remaining_gpus) const {
    const NodeState& node = nodes_[i];
    if (node.lost <= 0 || !node.spans_nodes || node.room >= remaining_gpus) return node.lost;
    std::vector<int> stopping;  // the jobs this return would newly stop
    std::vector<size_t> touched;
    for (const Occupant& o : node.occupants) {
      const Job& job = jobs_[static_cast<size_t>(o.job)];
      if (o.shrinkable || job.stopped) continue;
      stopping.push_back(o.job);
      touched.insert(touched.end(), job.nodes.begin(), job.nodes.end());
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    const auto stops = [&](int job) {
      return jobs_[static_cast<size_t>(job)].stopped ||
             std::find(stopping.begin(), stopping.end(), job) != stopping.end();
    };
    int room = node.room;
    int useful = 1;
    for (size_t m : touched) {
      if (room >= remaining_gpus) break;
      const NodeState& s = nodes_[m];
      if (m == i || !WasLent(m) || s.kept || !Fits(m, d)) continue;
      const bool empties = std::all_of(s.occupants.begin(), s.occupants.end(),
                                       [&](const Occupant& o) {
                                         return o.shrinkable || stops(o.job);
                                       });
      if (!empties) continue;
      room += s.room;
      ++useful;
    }
    return node.lost / useful;
  }

  const Snapshot& snapshot_;
  const std::vector<bool>& previously_lent_;
  std::vector<NodeState> nodes_;
  std::vector<Job> jobs_;
  std::map<WorkloadId, int> running_;
  std::vector<size_t> lent_candidates_;  // shared, usable, lent before; ascending
  std::map<NodeId, WorkloadId> claimed_by_;
};

}  // namespace

bool InferenceMayUseNode(const PlacementConstraints& constraints, const Node& node) {
  return placement::MatchesConstraints(node, constraints);
}

double ReturnCost(const Snapshot& snapshot, NodeId node, Duration grace) {
  TIDAL_CHECK(node.value() < snapshot.cluster.nodes.size()) << "node " << node.value();
  std::vector<bool> lent(snapshot.cluster.nodes.size(), false);
  Packer packer(snapshot, grace, lent);
  return packer.Cost(node.value());
}

LoanPlan PlanLoans(ColocationMode mode, const Snapshot& snapshot, Duration grace,
                   const std::vector<bool>& previously_lent,
                   const std::vector<InferenceDemand>& demand,
                   const std::vector<bool>& held) {
  const size_t n = snapshot.cluster.nodes.size();
  LoanPlan plan;
  plan.lent_nodes.assign(n, false);
  // With no replica to place and no shared node there is nothing to plan;
  // the packer would still walk every allocation (a training backlog of
  // tens of thousands, every pass) to learn it.
  const bool any_shared = std::any_of(snapshot.cluster.nodes.begin(), snapshot.cluster.nodes.end(),
                                      [&](const Node& node) {
                                        return snapshot.cluster.pool(node.pool).kind == PoolKind::kShared;
                                      });
  if (demand.empty() && !any_shared) return plan;
  Packer packer(snapshot, grace, previously_lent);

  if (mode != ColocationMode::kStatic) {
    // Largest pods first pack tightest; ties by service id for determinism.
    std::vector<const InferenceDemand*> order;
    for (const InferenceDemand& d : demand) order.push_back(&d);
    std::sort(order.begin(), order.end(), [](const InferenceDemand* a, const InferenceDemand* b) {
      return std::tie(b->gpus_per_pod, a->service) < std::tie(a->gpus_per_pod, b->service);
    });
    int remaining_gpus = 0;
    for (const InferenceDemand* d : order) {
      TIDAL_CHECK(d->gpus_per_pod > 0) << "inference pods need GPUs";
      remaining_gpus += std::max(0, d->replicas - packer.Running(d->service)) * d->gpus_per_pod;
    }
    for (const InferenceDemand* d : order) {
      const int pending = std::max(0, d->replicas - packer.Running(d->service));
      Packer::Cursor cursor;
      for (int r = 0; r < pending; ++r) {
        const bool placed = packer.Place(*d, remaining_gpus, cursor).has_value();
        remaining_gpus -= d->gpus_per_pod;
        if (!placed) {
          remaining_gpus -= (pending - r - 1) * d->gpus_per_pod;
          plan.unplaced_replicas += pending - r;
          break;
        }
      }
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const NodeState& s = packer.nodes()[i];
    if (!s.shared) continue;
    ++plan.shared_nodes;
    const NodeId id(static_cast<NodeId::Rep>(i));
    const bool was = packer.WasLent(i);
    const bool free_of_inference = mode != ColocationMode::kStatic && s.usable && !s.kept;
    // A loan standing is not cut short by the hold: only a new one waits.
    const bool is_held = free_of_inference && !was && i < held.size() && held[i];
    const bool lent = free_of_inference && !is_held;
    plan.lent_nodes[i] = lent;
    if (lent) ++plan.lent_count;
    if (is_held) plan.held.push_back(id);
    if (lent && !was) plan.newly_lent.push_back(id);
    // A failed or cordoned node leaves the loan without being "returned":
    // its work is handled as a node failure, not as an inference return.
    if (!lent && was && s.usable) {
      plan.returned.push_back(id);
      auto it = packer.claimed_by().find(id);
      plan.claimed_by.emplace(id, it == packer.claimed_by().end() ? WorkloadId() : it->second);
    }
  }
  return plan;
}

}  // namespace tidal
