#include "core/colocation/loan_calendar.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/colocation/autoscaler.h"
#include "core/colocation/loan_planner.h"
#include "core/common/check.h"
#include "core/model/workload_index.h"

namespace tidal {
namespace {

enum Load { kLow = 0, kPlanned = 1, kHigh = 2 };
constexpr int kLoads = 3;

double At(const LoadBand& band, int load) {
  return load == kLow ? band.low : load == kHigh ? band.high : band.planned;
}

}  // namespace

LoanCalendar PlanLoanCalendar(const ColocationController& controller, const Snapshot& snapshot,
                              Time from, const LoanCalendarOptions& options) {
  TIDAL_CHECK(options.slot.count() > 0 && options.span >= options.slot)
      << "loan calendar slot " << options.slot.count() << " ms, span " << options.span.count();
  const int slots = static_cast<int>(options.span / options.slot);
  TIDAL_CHECK(slots <= kMaxLoanCalendarSlots) << slots << " loan calendar slots";
  const ColocationConfig& config = controller.config();
  const LoadForecaster& forecaster = controller.forecaster();
  const size_t node_count = snapshot.cluster.nodes.size();

  LoanCalendar out;
  out.from = from;
  out.slot = options.slot;
  out.slots = slots;
  out.mode = config.mode;
  out.lookahead = config.forecast_horizon;

  // The base every slot packs on: the snapshot's borrowed and other work as
  // it is, and each service's replicas trimmed to what the slot needs.
  Snapshot base;
  base.cluster = snapshot.cluster;
  base.queues = snapshot.queues;
  base.projects = snapshot.projects;
  base.workloads = snapshot.workloads;
  const engine::WorkloadIndex index(snapshot);
  std::vector<const Workload*> services;
  snapshot.ForEachOfKind(WorkloadKind::kInference, [&](const Workload& w) {
    if (w.state == WorkloadState::kPending || w.state == WorkloadState::kRunning) services.push_back(&w);
  });
  std::sort(services.begin(), services.end(),
            [](const Workload* a, const Workload* b) { return a->id < b->id; });
  // Inference allocations go last, one per service in `services` order (or
  // none): each slot keeps the replicas its load still needs where they run,
  // as the engine scales a service down by its newest pods.
  std::vector<const Allocation*> running(services.size(), nullptr);
  for (const Allocation& a : snapshot.allocations) {
    const int wi = index.Find(a.workload);
    if (wi < 0 || snapshot.workloads[wi].kind != WorkloadKind::kInference) {
      base.allocations.push_back(a);
      continue;
    }
    if (a.terminating) continue;
    for (size_t s = 0; s < services.size(); ++s) {
      if (services[s]->id == a.workload) running[s] = &a;
    }
  }
  std::vector<int> service_allocation(services.size(), -1);
  for (size_t s = 0; s < services.size(); ++s) {
    if (running[s] == nullptr) continue;
    service_allocation[s] = static_cast<int>(base.allocations.size());
    base.allocations.push_back(*running[s]);
  }
  for (const Workload* w : services) {
    const Duration cold = EstimateColdStart(w->inference, controller.cold_start_model());
    out.lookahead = std::max(out.lookahead, cold + controller.grace());
    ServiceLoadPlan plan;
    plan.service = w->id;
    plan.name = w->name;
    plan.profiled = forecaster.HasDailyProfile(w->id);
    out.services.push_back(std::move(plan));
  }

  const auto is_shared = [&](size_t i) {
    return snapshot.cluster.pool(snapshot.cluster.nodes[i].pool).kind == PoolKind::kShared;
  };
  // Per load: the loans and the hold-downs one slot hands the next.
  std::array<std::vector<bool>, kLoads> lent;
  std::array<std::vector<std::optional<Time>>, kLoads> needed_at;
  for (int load = 0; load < kLoads; ++load) {
    lent[load].assign(node_count, false);
    needed_at[load].assign(node_count, std::nullopt);
    for (size_t i = 0; i < node_count; ++i) {
      if (i < controller.lent().size()) lent[load][i] = controller.lent()[i];
      if (i < controller.needed_at().size()) needed_at[load][i] = controller.needed_at()[i];
    }
  }
  // lent_in[load][slot][node]
  std::array<std::vector<std::vector<bool>>, kLoads> lent_in;
  std::vector<InferenceDemand> demand;
  for (int k = 0; k < slots; ++k) {
    const Time start = from + k * options.slot;
    base.now = start;
    std::vector<LoadBand> bands;
    for (size_t s = 0; s < services.size(); ++s) {
      bands.push_back(forecaster.Band(services[s]->id, start, start + options.slot - Duration(1)));
      out.services[s].load.push_back(bands.back());
    }
    for (int load = 0; load < kLoads; ++load) {
      demand.clear();
      for (size_t s = 0; s < services.size(); ++s) {
        const Workload& w = *services[s];
        const int lo = std::max(0, w.min_pods);
        const int hi = std::max(lo, w.max_pods);
        int replicas = std::clamp(RequiredReplicas(w.inference, At(bands[s], load), config.headroom), lo, hi);
        if (k == 0) replicas = std::max(replicas, w.pods);
        if (load == kPlanned) out.services[s].planned_replicas.push_back(replicas);
        InferenceDemand d;
        d.service = w.id;
        d.gpus_per_pod = std::max(1, w.gpus_per_pod);
        d.replicas = replicas;
        d.constraints = w.constraints;
        demand.push_back(std::move(d));
      }
      for (size_t s = 0; s < services.size(); ++s) {
        if (service_allocation[s] < 0) continue;
        const std::vector<PodPlacement>& pods = running[s]->pods;
        const size_t keep = std::min(pods.size(), static_cast<size_t>(std::max(0, demand[s].replicas)));
        base.allocations[service_allocation[s]].pods.assign(pods.begin(), pods.begin() + keep);
      }
      std::vector<bool> held(node_count, false);
      for (size_t i = 0; i < node_count; ++i) {
        held[i] = needed_at[load][i] && start - *needed_at[load][i] < config.relend_delay;
      }
      base.lent_nodes = lent[load];
      const LoanPlan plan = PlanLoans(config.mode, base, controller.grace(), lent[load], demand, held);
      for (size_t i = 0, h = 0; i < node_count; ++i) {
        const NodeId id(static_cast<NodeId::Rep>(i));
        while (h < plan.held.size() && plan.held[h] < id) ++h;
        const bool held_now = h < plan.held.size() && plan.held[h] == id;
        if (is_shared(i) && snapshot.cluster.nodes[i].takes_work() && !plan.lent_nodes[i] &&
            !held_now) {
          needed_at[load][i] = start;
        }
      }
      lent[load] = plan.lent_nodes;
      lent_in[load].push_back(plan.lent_nodes);
    }
  }

  const auto lent_at = [&](int load, int k, size_t i) {
    return i < lent_in[load][k].size() && lent_in[load][k][i];
  };
  const auto slot_start = [&](int k) { return from + k * options.slot; };
  for (int load = 0; load < kLoads; ++load) {
    std::vector<int>& count = load == kLow      ? out.lent_low_load
                              : load == kHigh ? out.lent_high_load
                                              : out.lent_planned;
    for (int k = 0; k < slots; ++k) {
      count.push_back(static_cast<int>(std::count(lent_in[load][k].begin(), lent_in[load][k].end(), true)));
    }
  }
  for (size_t i = 0; i < node_count; ++i) {
    if (!is_shared(i)) continue;
    NodeLoanPlan node;
    node.node = NodeId(static_cast<NodeId::Rep>(i));
    node.name = snapshot.cluster.nodes[i].name;
    for (int k = 0; k < slots; ++k) {
      node.timeline += lent_at(kPlanned, k, i) ? (lent_at(kHigh, k, i) ? 'L' : 'l')
                                               : (lent_at(kLow, k, i) ? '-' : '.');
    }
    for (int k = 0; k < slots;) {
      if (!lent_at(kPlanned, k, i)) {
        ++k;
        continue;
      }
      const int first = k;
      while (k < slots && lent_at(kPlanned, k, i)) ++k;
      LoanWindow window;
      window.lend_at = slot_start(first);
      int earliest = first;
      while (earliest < k && lent_at(kHigh, earliest, i)) ++earliest;
      window.return_earliest = slot_start(earliest);
      if (k < slots) {
        window.return_by = slot_start(k);
        window.notice_at = std::max(window.lend_at, *window.return_by - out.lookahead);
        int latest = k;
        while (latest < slots && lent_at(kLow, latest, i)) ++latest;
        if (latest < slots) window.return_latest = slot_start(latest);
      }
      node.windows.push_back(window);
    }
    out.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace tidal
