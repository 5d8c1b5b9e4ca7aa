#include "core/colocation/colocation_controller.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>

#include "core/colocation/return_timing.h"
#include "core/common/check.h"
#include "core/model/lost_work.h"
#include "core/model/workload_index.h"

namespace tidal {
namespace {

bool Active(const Workload& w) {
  return w.state == WorkloadState::kPending || w.state == WorkloadState::kRunning;
}

std::string Fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

}  // namespace

ColocationController::ColocationController(const PolicyConfig& policy,
                                           ForecasterOptions forecaster,
                                           ColdStartModel cold_start)
    : config_(policy.colocation),
      grace_(policy.preemption.default_grace),
      cold_start_model_(cold_start),
      forecaster_(forecaster),
      autoscaler_(AutoscalerOptions{policy.colocation.headroom,
                                    policy.colocation.scale_down_delay}) {
  TIDAL_CHECK(config_.headroom >= 0) << "colocation.headroom " << config_.headroom;
}

void ColocationController::ObserveLoad(WorkloadId service, Time t, double rps) {
  forecaster_.Observe(service, t, rps);
}

ColocationMemory ColocationController::memory() const {
  ColocationMemory m;
  m.load = forecaster_.series();
  m.scaling = autoscaler_.scaling();
  m.lent = lent_;
  m.needed_at = needed_at_;
  m.last_prepare = last_prepare_;
  m.noticed = noticed_;
  m.known_services = known_services_;
  return m;
}

Status ColocationController::Restore(ColocationMemory memory) {
  TIDAL_RETURN_IF_ERROR(forecaster_.Restore(std::move(memory.load)));
  autoscaler_.Restore(memory.scaling);
  lent_ = std::move(memory.lent);
  needed_at_ = std::move(memory.needed_at);
  last_prepare_ = memory.last_prepare;
  noticed_ = std::move(memory.noticed);
  known_services_ = std::move(memory.known_services);
  memo_.clear();
  need_cache_.clear();
  return Status::Ok();
}

QueueLatency ColocationController::ModelServiceLatency(const InferenceSpec& spec, double rps,
                                                       int ready_replicas) {
  if (spec.replica_capacity_rps <= 0) {
    // Nothing to model with: only "served or not" is known.
    QueueLatency unknown;
    unknown.stable = ready_replicas > 0 || rps <= 0;
    if (!unknown.stable) {
      unknown.mean_wait_ms = unknown.mean_response_ms = unknown.p95_ms = unknown.p99_ms =
          std::numeric_limits<double>::infinity();
    }
    return unknown;
  }
  return ModelLatency(rps, spec.replica_capacity_rps, ready_replicas);
}

int ColocationController::Need(const Workload& w, double rps) const {
  NeedCache& c = need_cache_[w.id];
  if (c.capacity_rps != w.inference.replica_capacity_rps || c.target != w.inference.target_p99) {
    c = NeedCache{w.inference.replica_capacity_rps, w.inference.target_p99};
  }
  for (const auto& [at, need] : c.entries) {
    if (at == rps) return need;
  }
  const int need = RequiredReplicas(w.inference, rps, config_.headroom);
  if (c.entries.size() < kNeedCacheSize) {
    c.entries.emplace_back(rps, need);
  } else {
    c.entries[c.next] = {rps, need};
    c.next = (c.next + 1) % kNeedCacheSize;
  }
  return need;
}

std::vector<double> ColocationController::FittedMargins(const Snapshot& snapshot,
                                                       const std::vector<const Workload*>& services,
                                                       Duration tick,
                                                       const std::vector<bool>& lent) const {
  std::vector<double> margins;
  for (const Workload* w : services) margins.push_back(forecaster_.Margin(w->id));
  // GPUs for inference: the healthy GPUs of reserved and shared nodes that
  // take work.
  int capacity = 0;
  for (size_t i = 0; i < snapshot.cluster.nodes.size(); ++i) {
    const Node& n = snapshot.cluster.nodes[i];
    const PoolKind kind = snapshot.cluster.pool(n.pool).kind;
    if ((kind != PoolKind::kInferenceReserved && kind != PoolKind::kShared) || !n.takes_work()) continue;
    if (kind == PoolKind::kShared && i < lent.size() && lent[i]) continue;
    capacity += HealthyGpus(n);
  }
  // The GPUs all services need with the margins scaled to 1 + f x (m - 1).
  const auto gpus_at = [&](double f) {
    int gpus = 0;
    for (size_t k = 0; k < services.size(); ++k) {
      const Workload& w = *services[k];
      const Duration cold = EstimateColdStart(w.inference, cold_start_model_);
      const double base = std::max(forecaster_.LastObserved(w.id),
                                   forecaster_.PeakForecast(w.id, snapshot.now, snapshot.now + cold + tick));
      const double rps = (1 + f * (margins[k] - 1)) * base;
      const int lo = std::max(0, w.min_pods);
      const int hi = std::max(lo, w.max_pods);
      // A target the autoscaler holds (its scale-down delay) keeps its GPUs
      // whatever this pass's need.
      const int need = std::clamp(Need(w, rps), lo, hi);
      gpus += std::max(need, autoscaler_.Target(w.id).value_or(0)) * std::max(1, w.gpus_per_pod);
    }
    return gpus;
  };
  const bool any = std::any_of(margins.begin(), margins.end(), [](double m) { return m > 1; });
  if (!any || gpus_at(1.0) <= capacity) return margins;
  // Too many: the largest f in [0, 1) that fits, to 1/1024, by bisection
  // (f = 0 is no margin at all, which is what reactive would ask for).
  double fits = 0, too_many = 1;
  for (int i = 0; i < 10; ++i) {
    const double mid = (fits + too_many) / 2;
    (gpus_at(mid) <= capacity ? fits : too_many) = mid;
  }
  for (double& m : margins) m = 1 + fits * (m - 1);
  return margins;
}

std::vector<int> ColocationController::SpareReplicas(
    const Snapshot& snapshot, const std::vector<const Allocation*>& allocation_of,
    const std::vector<const Workload*>& services, const std::vector<double>& sized_for_rps,
    const std::vector<std::pair<WorkloadId, int>>& targets) const {
  std::vector<int> none(services.size(), 0);
  // Free GPUs per inference-reserved node that takes work.
  std::vector<int> slot_of(snapshot.cluster.nodes.size(), -1);
  std::vector<int> free;
  for (size_t i = 0; i < snapshot.cluster.nodes.size(); ++i) {
    const Node& n = snapshot.cluster.nodes[i];
    if (snapshot.cluster.pool(n.pool).kind != PoolKind::kInferenceReserved || !n.takes_work()) continue;
    slot_of[i] = static_cast<int>(free.size());
    free.push_back(HealthyGpus(n));
  }
  if (free.empty()) return none;
  const auto slot = [&](const PodPlacement& p) {
    return p.node.value() < slot_of.size() ? slot_of[p.node.value()] : -1;
  };
  // The healthy GPUs a pod holds: a failed one was not counted as free.
  const auto held = [&](const PodPlacement& p) {
    return std::popcount(p.gpus & ~snapshot.cluster.node(p.node).failed_gpus);
  };
  for (const Allocation& a : snapshot.allocations) {
    for (const PodPlacement& p : a.pods) {
      if (const int k = slot(p); k >= 0) free[k] -= held(p);
    }
  }
  // A service's pods above its target are the spares of the last pass (the
  // newest pods, which a scale-down removes first): their room counts again.
  // Replicas still to place come first.
  std::vector<int> pending;  // GPUs per pod, one entry per replica to place
  for (size_t k = 0; k < services.size(); ++k) {
    const Allocation* a = allocation_of[static_cast<size_t>(services[k] - snapshot.workloads.data())];
    const int running = a == nullptr || a->terminating ? 0 : static_cast<int>(a->pods.size());
    const int target = targets[k].second;
    for (int i = target; i < running; ++i) {
      const PodPlacement& p = a->pods[static_cast<size_t>(i)];
      if (const int s = slot(p); s >= 0) free[s] += held(p);
    }
    for (int i = running; i < target; ++i) pending.push_back(std::max(1, services[k]->gpus_per_pod));
  }
  // First fit, largest pods first; false if some pod finds no room. Pods of
  // one size are alike, so they are counted by size, not sorted; and room
  // only shrinks, so the first node with room for them never moves back:
  // one walk of the nodes per size, where a scan per pod cost pods x nodes
  // (thousands of each). The same nodes either way.
  const auto pack = [](std::vector<int>& room, const std::vector<int>& pods) {
    std::vector<int> count;  // by pod GPUs
    for (int gpus : pods) {
      const size_t size = static_cast<size_t>(gpus);
      if (size >= count.size()) count.resize(size + 1, 0);
      ++count[size];
    }
    bool all = true;
    for (size_t size = count.size(); size-- > 1;) {
      const int gpus = static_cast<int>(size);
      size_t i = 0;  // no node before it has room for `gpus`
      for (int left = count[size]; left > 0; --left) {
        while (i < room.size() && room[i] < gpus) ++i;
        if (i == room.size()) {
          all = false;
          break;
        }
        room[i] -= gpus;
      }
    }
    return all;
  };
  pack(free, pending);
  if (std::all_of(free.begin(), free.end(), [](int g) { return g <= 0; })) return none;
  // Only a service that may use every reserved node gets spares, so that a
  // spare never waits for room it cannot use.
  std::vector<bool> may(services.size(), true);
  for (size_t k = 0; k < services.size(); ++k) {
    for (size_t i = 0; i < slot_of.size() && may[k]; ++i) {
      if (slot_of[i] >= 0) may[k] = InferenceMayUseNode(services[k]->constraints, snapshot.cluster.nodes[i]);
    }
  }
  // The spares each service gets when sized for x times its load.
  const auto spares_at = [&](double x) {
    std::vector<int> extra(services.size(), 0);
    for (size_t k = 0; k < services.size(); ++k) {
      if (!may[k]) continue;
      const Workload& w = *services[k];
      const int lo = std::max(0, w.min_pods);
      const int hi = std::max(lo, w.max_pods);
      const int need = std::clamp(Need(w, x * sized_for_rps[k]), lo, hi);
      extra[k] = std::max(0, need - targets[k].second);
    }
    return extra;
  };
  const auto fits = [&](double x) {
    const std::vector<int> extra = spares_at(x);
    std::vector<int> pods;
    for (size_t k = 0; k < services.size(); ++k) pods.insert(pods.end(), extra[k], std::max(1, services[k]->gpus_per_pod));
    std::vector<int> room = free;
    return pack(room, pods);
  };
  double lo = 1, hi = kMaxSpareFactor;
  if (fits(hi)) {
    lo = hi;
  } else {
    for (int i = 0; i < 10; ++i) {
      const double mid = (lo + hi) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
  }
  return spares_at(lo);
}

ColocationPlan ColocationController::Prepare(const Snapshot& snapshot) {
  const Time now = snapshot.now;
  const Duration tick =
      last_prepare_ && now > *last_prepare_ ? now - *last_prepare_ : Duration(0);
  last_prepare_ = now;
  const bool predictive = config_.mode == ColocationMode::kPredictive;
  const size_t node_count = snapshot.cluster.nodes.size();

  // The active services, in id order, and whether any service is there at
  // all (a leaving one's allocation serves too).
  std::vector<const Workload*> by_id;
  bool any_inference = false;
  snapshot.ForEachOfKind(WorkloadKind::kInference, [&](const Workload& w) {
    any_inference = true;
    if (Active(w)) by_id.push_back(&w);
  });
  std::sort(by_id.begin(), by_id.end(),
            [](const Workload* a, const Workload* b) { return a->id < b->id; });
  ColocationPlan out;
  // Lookups by id through one flat index (ids are dense) instead of hash maps
  // rebuilt every pass.
  const engine::WorkloadIndex index(snapshot);
  // Each service's allocation (only services' are read), and whether each
  // allocation is a service's: a training backlog puts tens of thousands of
  // allocations in every pass, so each is looked at once here.
  std::vector<const Allocation*> allocation_of(snapshot.workloads.size(), nullptr);
  std::vector<bool> serves(snapshot.allocations.size(), false);
  for (size_t ai = 0; ai < snapshot.allocations.size() && any_inference; ++ai) {
    const int wi = index.OfAllocation(snapshot, ai);
    if (wi < 0 || KindAt(snapshot, wi) != WorkloadKind::kInference) continue;
    serves[ai] = true;
    if (allocation_of[wi] == nullptr) allocation_of[wi] = &snapshot.allocations[ai];
  }

  // The loans as they stand, first: the replicas' margin fits what is not
  // lent. Borrowed work still running on a shared node proves a loan, even
  // if this controller did not make it (a restarted server).
  std::vector<bool> previously_lent(node_count, false);
  for (size_t i = 0; i < node_count && i < lent_.size(); ++i) previously_lent[i] = lent_[i];
  const auto is_shared = [&](NodeId n) {
    return n.value() < node_count &&
           snapshot.cluster.pool(snapshot.cluster.node(n).pool).kind == PoolKind::kShared;
  };
  bool any_shared = false;
  for (size_t i = 0; i < node_count && !any_shared; ++i) any_shared = is_shared(NodeId(static_cast<NodeId::Rep>(i)));
  const auto workload_of = [&](WorkloadId id) -> const Workload* {
    const int wi = index.Find(id);
    return wi < 0 ? nullptr : &snapshot.workloads[wi];
  };
  // Notices whose grace has passed are forgotten.
  std::erase_if(noticed_, [&](const auto& entry) { return entry.second <= now; });
  for (size_t ai = 0; ai < snapshot.allocations.size() && any_shared; ++ai) {
    const Allocation& a = snapshot.allocations[ai];
    if (a.terminating || serves[ai]) continue;
    for (const PodPlacement& p : a.pods) {
      // A pod shrunk off a returned node is leaving, not proof of a loan.
      if (std::find(a.leaving.begin(), a.leaving.end(), p) != a.leaving.end()) continue;
      if (is_shared(p.node) && noticed_.count({a.workload, p.node}) == 0) {
        previously_lent[p.node.value()] = true;
      }
    }
  }

  // 1. Autoscale, and what each service needs over the look-ahead.
  ColocationStatus status;
  status.at = now;
  status.mode = config_.mode;
  status.lookahead = config_.forecast_horizon;
  // The margins the loans plan for fit the whole inference pools; those the
  // replicas and the urgent returns use fit what is not lent now, so that a
  // margin alone never forces a return: it waits for a cheap moment.
  const std::vector<double> margins = predictive ? FittedMargins(snapshot, by_id, tick, {})
                                                : std::vector<double>(by_id.size(), 1.0);
  const std::vector<double> margins_now =
      predictive ? FittedMargins(snapshot, by_id, tick, previously_lent) : margins;
  std::vector<InferenceDemand> demand;
  // Per service (parallel to `demand`), the short look-ahead of
  // return_timing.h, and the least slack any service leaves a return.
  std::vector<Duration> soon_lookahead;
  Duration slack = Duration::max();
  std::set<WorkloadId> services;
  std::vector<double> sized_for_rps;  // per service: the load its target was sized for
  for (size_t k = 0; k < by_id.size(); ++k) {
    const Workload* w = by_id[k];
    services.insert(w->id);
    const Duration cold = EstimateColdStart(w->inference, cold_start_model_);
    const Duration lookahead = std::max(config_.forecast_horizon, cold + grace_ + tick);
    status.lookahead = std::max(status.lookahead, lookahead);
    const double current = forecaster_.LastObserved(w->id);
    // Replicas are asked for one cold start (plus a tick of lateness) ahead,
    // so they are serving when the forecast load arrives.
    // Both look-aheads carry the forecaster's learned margin (how far the
    // load recently outran the short forecast; load_forecaster.h).
    const double margin = margins[k];
    const double scale_forecast =
        predictive ? margins_now[k] * std::max(current, forecaster_.PeakForecast(w->id, now, now + cold + tick))
                   : 0.0;
    const int desired = autoscaler_.Update(*w, current, scale_forecast, now);
    out.targets.emplace_back(w->id, desired);
    sized_for_rps.push_back(scale_forecast);

    const double peak =
        predictive ? margin * std::max(current, forecaster_.PeakForecast(w->id, now, now + lookahead))
                   : current;
    const int lo = std::max(0, w->min_pods);
    const int hi = std::max(lo, w->max_pods);
    ServiceMemo& memo = memo_[w->id];
    if (peak != memo.need_rps || w->inference.replica_capacity_rps != memo.need_capacity_rps ||
        w->inference.target_p99 != memo.need_target) {
      memo.need = RequiredReplicas(w->inference, peak, config_.headroom);
      memo.need_rps = peak;
      memo.need_capacity_rps = w->inference.replica_capacity_rps;
      memo.need_target = w->inference.target_p99;
    }
    const int forecast_replicas = std::clamp(memo.need, lo, hi);

    InferenceDemand d;
    d.service = w->id;
    d.gpus_per_pod = std::max(1, w->gpus_per_pod);
    d.replicas = predictive ? std::max(desired, forecast_replicas) : desired;
    d.constraints = w->constraints;
    demand.push_back(std::move(d));
    if (predictive) {
      const Duration soon = std::min(lookahead, cold + grace_ + 2 * tick);
      slack = std::min(slack, lookahead - soon);
      soon_lookahead.push_back(soon);
    }

    ServiceStatus s;
    s.service = w->id;
    s.name = w->name;
    s.current_rps = current;
    s.forecast_peak_rps = peak;
    s.desired_replicas = desired;
    s.forecast_replicas = forecast_replicas;
    s.cold_start = cold;
    s.target_p99 = w->inference.target_p99;
    const Allocation* own = allocation_of[static_cast<size_t>(w - snapshot.workloads.data())];
    if (own != nullptr && !own->terminating) s.running_replicas = static_cast<int>(own->pods.size());
    if (current != memo.latency_rps || s.running_replicas != memo.latency_replicas ||
        w->inference.replica_capacity_rps != memo.latency_capacity_rps) {
      const QueueLatency latency = ModelServiceLatency(w->inference, current, s.running_replicas);
      memo.p95_ms = latency.p95_ms;
      memo.p99_ms = latency.p99_ms;
      memo.latency_rps = current;
      memo.latency_replicas = s.running_replicas;
      memo.latency_capacity_rps = w->inference.replica_capacity_rps;
    }
    s.modelled_p95_ms = memo.p95_ms;
    s.modelled_p99_ms = memo.p99_ms;
    status.services.push_back(std::move(s));
  }
  // Services that finished leave no hysteresis state behind.
  for (auto it = known_services_.begin(); it != known_services_.end(); ++it) {
    if (services.count(*it) == 0) {
      autoscaler_.Forget(*it);
      memo_.erase(*it);
      need_cache_.erase(*it);
    }
  }
  known_services_ = std::move(services);

  // 2. Loans.
  needed_at_.resize(node_count);
  std::vector<bool> held(node_count, false);
  for (size_t i = 0; i < node_count; ++i) {
    held[i] = needed_at_[i] && now - *needed_at_[i] < config_.relend_delay;
  }
  LoanPlan plan = PlanLoans(config_.mode, snapshot, grace_, previously_lent, demand, held);
  if (predictive && !plan.returned.empty() && !demand.empty() && slack > Duration(0)) {
    // Returns the short look-ahead does not call for yet may wait for a
    // cheaper moment (return_timing.h).
    std::vector<InferenceDemand> soon = demand;
    for (size_t i = 0; i < soon.size(); ++i) {
      const Workload& w = *workload_of(soon[i].service);
      const int lo = std::max(0, w.min_pods);
      const int hi = std::max(lo, w.max_pods);
      const double peak =
          margins_now[i] * std::max(forecaster_.LastObserved(w.id),
                                    forecaster_.PeakForecast(w.id, now, now + soon_lookahead[i]));
      const int need = std::clamp(Need(w, peak), lo, hi);
      soon[i].replicas = std::max(out.targets[i].second, need);  // targets parallel demand
    }
    const LoanPlan urgent = PlanLoans(config_.mode, snapshot, grace_, previously_lent, soon, held);
    std::vector<NodeId> early;
    for (NodeId n : plan.returned) {
      if (urgent.lent_nodes[n.value()]) early.push_back(n);
    }
    for (NodeId n : ReturnsToDefer(snapshot, early, slack, tick, grace_, noticed_)) {
      plan.lent_nodes[n.value()] = true;
      ++plan.lent_count;
      std::erase(plan.returned, n);
      plan.claimed_by.erase(n);
      status.deferred.push_back(n);
    }
  }
  if (predictive) {
    const std::vector<int> spares = SpareReplicas(snapshot, allocation_of, by_id, sized_for_rps, out.targets);
    for (size_t k = 0; k < spares.size(); ++k) {
      out.targets[k].second += spares[k];
      status.services[k].spare_replicas = spares[k];
    }
    out.spares = spares;
  }
  out.lent_nodes = plan.lent_nodes;
  lent_ = plan.lent_nodes;
  for (size_t i = 0, h = 0; i < node_count; ++i) {
    const NodeId id(static_cast<NodeId::Rep>(i));
    while (h < plan.held.size() && plan.held[h] < id) ++h;
    const bool held_now = h < plan.held.size() && plan.held[h] == id;
    if (is_shared(id) && snapshot.cluster.nodes[i].takes_work() && !plan.lent_nodes[i] && !held_now) {
      needed_at_[i] = now;
    }
  }

  // 3. Notice for borrowed work on shared nodes that are not lent.
  const Time deadline = now + grace_;
  // Only borrowed work with a pod on a shared node not lent can get one:
  // those, in workload id order.
  std::vector<const Allocation*> allocations;
  for (size_t ai = 0; ai < snapshot.allocations.size() && any_shared; ++ai) {
    const Allocation& a = snapshot.allocations[ai];
    if (a.terminating || serves[ai]) continue;
    if (std::any_of(a.pods.begin(), a.pods.end(),
                    [&](const PodPlacement& p) { return is_shared(p.node) && !plan.lent_nodes[p.node.value()]; })) {
      allocations.push_back(&a);
    }
  }
  std::sort(allocations.begin(), allocations.end(),
            [](const Allocation* a, const Allocation* b) { return a->workload < b->workload; });
  for (const Allocation* a : allocations) {
    std::vector<PodPlacement> leaving;
    WorkloadId beneficiary;
    std::string node_names;
    for (const PodPlacement& p : a->pods) {
      if (!is_shared(p.node) || plan.lent_nodes[p.node.value()]) continue;
      const Node& node = snapshot.cluster.node(p.node);
      if (!node.takes_work()) continue;
      if (noticed_.count({a->workload, p.node}) > 0) continue;
      leaving.push_back(p);
      auto claim = plan.claimed_by.find(p.node);
      if (!beneficiary.valid() && claim != plan.claimed_by.end()) beneficiary = claim->second;
      if (node_names.find(node.name) == std::string::npos) {
        node_names += (node_names.empty() ? "" : ", ") + node.name;
      }
    }
    if (leaving.empty()) continue;
    const Workload* w = workload_of(a->workload);
    const std::string why = "shared node " + node_names + " returned to inference (" +
                            std::string(ColocationModeName(config_.mode)) + " mode)";
    const int total = static_cast<int>(a->pods.size());
    const int kept = total - static_cast<int>(leaving.size());
    if (w != nullptr && w->is_elastic() && kept >= w->min_pods) {
      ResizeDecision shrink;
      shrink.workload = a->workload;
      shrink.from_pods = total;
      shrink.to_pods = kept;
      shrink.removed = leaving;
      shrink.beneficiary = beneficiary;
      shrink.grace_deadline = deadline;
      shrink.detail = why + ": elastic job shrinks from " + std::to_string(total) + " to " +
                      std::to_string(kept) + " pods";
      out.decisions.resizes.push_back(std::move(shrink));
    } else {
      PreemptDecision stop;
      stop.victim = a->workload;
      stop.preemptor = beneficiary;
      stop.cause = PreemptCause::kInferenceReturn;
      stop.notice_time = now;
      stop.grace_deadline = deadline;
      stop.lost_gpu_seconds = LostGpuSeconds(w, *a, now, grace_);
      stop.detail = why + ": loses " + Fmt("%.0f", stop.lost_gpu_seconds) +
                    (SavesOnRequest(w, grace_) ? " GPU-seconds saving the checkpoint it is asked for"
                                               : " GPU-seconds since its last checkpoint");
      out.decisions.preempts.push_back(std::move(stop));
    }
    for (const PodPlacement& p : leaving) noticed_[{a->workload, p.node}] = deadline;
  }

  // 4. Batch jobs that cannot meet their deadline.
  out.decisions.rejects = RejectInfeasibleBatch(snapshot);

  status.shared_nodes = plan.shared_nodes;
  status.lent_nodes = plan.lent_count;
  status.unplaced_replicas = plan.unplaced_replicas;
  status.returned = plan.returned;
  status.newly_lent = plan.newly_lent;
  status.held = plan.held;
  status_ = std::move(status);
  return out;
}

}  // namespace tidal
