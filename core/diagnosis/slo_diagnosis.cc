#include "core/diagnosis/slo_diagnosis.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <variant>

#include "core/colocation/autoscaler.h"
#include "core/explain/text.h"

namespace tidal::diagnosis {
namespace {

using explain::Str;

// One decimal: details are read by people, not parsed.
double R1(double v) { return std::round(v * 10) / 10; }

bool IsInference(const state::State& state, WorkloadId id) {
  const Workload* w = state.workload(id);
  return w != nullptr && w->kind == WorkloadKind::kInference;
}

bool Contains(const std::vector<PodPlacement>& pods, const PodPlacement& p) {
  return std::find(pods.begin(), pods.end(), p) != pods.end();
}

// It still holds GPUs it was told to give up: terminating, or pods leaving.
bool Leaving(const state::State& state, WorkloadId id) {
  const Allocation* a = state.allocation(id);
  return a != nullptr && (a->terminating || !a->leaving.empty());
}

double SlowAfterS(const Workload* w) {
  const double cold = w != nullptr ? ToSeconds(EstimateColdStart(w->inference)) : 0;
  return std::max(60.0, 2 * cold);
}

}  // namespace

std::string_view MissCauseName(MissCause cause) {
  switch (cause) {
    case MissCause::kNodeLost: return "node_lost";
    case MissCause::kGpuFault: return "gpu_fault";
    case MissCause::kReplicaCrash: return "replica_crash";
    case MissCause::kLoanNotReturned: return "loan_not_returned";
    case MissCause::kVictimsInGrace: return "victims_in_grace";
    case MissCause::kColdStart: return "cold_start";
    case MissCause::kForecastUnderPredicted: return "forecast_under_predicted";
    case MissCause::kMaxReplicasReached: return "max_replicas_reached";
    case MissCause::kCapacityShort: return "capacity_short";
  }
  return "unknown";
}

std::array<MissCause, kMissCauseCount> AllMissCauses() {
  std::array<MissCause, kMissCauseCount> all{};
  for (int i = 0; i < kMissCauseCount; ++i) all[i] = static_cast<MissCause>(i);
  return all;
}

MissCause DominantMissCause(const std::array<double, kMissCauseCount>& weight) {
  int best = static_cast<int>(MissCause::kCapacityShort);
  double best_w = 0;
  // Strictly greater: a tie keeps the cause listed first (the root cause).
  for (int i = 0; i < kMissCauseCount; ++i) {
    if (weight[i] > best_w) {
      best_w = weight[i];
      best = i;
    }
  }
  return static_cast<MissCause>(best);
}

void SloDiagnosis::Lose(WorkloadId service, MissCause cause, int replicas) {
  if (replicas <= 0) return;
  ServiceOf(service).losses.push_back(Loss{cause, replicas});
}

void SloDiagnosis::PodsGone(Service& s, const std::vector<PodPlacement>& pods) {
  std::erase_if(s.pods, [&](const PodRecord& r) { return Contains(pods, r.pod); });
}

void SloDiagnosis::ForgetVictim(WorkloadId victim) {
  auto it = victim_of_.find(victim);
  if (it == victim_of_.end()) return;
  auto s = services_.find(it->second);
  if (s != services_.end()) s->second.victims.erase(victim);
  victim_of_.erase(it);
}

int SloDiagnosis::PlacedPods(const state::State& state, WorkloadId id) const {
  const Allocation* a = state.allocation(id);
  if (a == nullptr || a->terminating) return 0;
  return static_cast<int>(a->pods.size() - a->leaving.size());
}

void SloDiagnosis::CountLent(const state::State& state) {
  lent_nodes_ = 0;
  for (bool lent : state.snapshot().lent_nodes) lent_nodes_ += lent ? 1 : 0;
}

// What keeps a service from `goal` ready replicas now (the caller checks
// that it has fewer).
MissCause SloDiagnosis::Blocking(const state::State& state, WorkloadId id, const Service& s,
                                 int goal) const {
  for (const Loss& l : s.losses) {
    if (l.outstanding > 0) return l.cause;
  }
  if (PlacedPods(state, id) < goal) {
    if (!s.victims.empty()) return MissCause::kVictimsInGrace;
    if (lent_nodes_ > 0) return MissCause::kLoanNotReturned;
    return MissCause::kCapacityShort;
  }
  return MissCause::kColdStart;
}

void SloDiagnosis::SyncScaleUps(const state::State& state, WorkloadId id, Service& s) {
  for (const state::PendingScaleUp& su : state.open_scale_ups(id)) {
    auto it = std::find_if(s.scale_ups.begin(), s.scale_ups.end(),
                           [&](const OpenScaleUp& o) { return o.requested_at == su.requested_at; });
    if (it == s.scale_ups.end()) {
      OpenScaleUp o;
      o.requested_at = su.requested_at;
      o.since = std::max(su.requested_at, last_);
      s.scale_ups.push_back(o);
      ++open_scale_ups_;
      it = std::prev(s.scale_ups.end());
    }
    it->to = su.to;
  }
}

MissCause SloDiagnosis::PlacementDelay(const Service& s) {
  std::array<double, kMissCauseCount> waited{};
  for (const OpenScaleUp& o : s.scale_ups) {
    for (MissCause c : {MissCause::kVictimsInGrace, MissCause::kLoanNotReturned, MissCause::kCapacityShort}) {
      waited[static_cast<int>(c)] += o.seconds[static_cast<int>(c)];
    }
  }
  return std::any_of(waited.begin(), waited.end(), [](double x) { return x > 0; }) ? DominantMissCause(waited)
                                                                                  : MissCause::kColdStart;
}

void SloDiagnosis::NoteTarget(Service& s, Time now, int pods) {
  if (!s.targets.empty() && s.targets.back().pods == pods) return;
  s.targets.push_back(TargetSince{now, pods});
  // Drop what no interval can reach back to, keeping the entry in force at
  // the cutoff.
  size_t drop = 0;
  while (drop + 1 < s.targets.size() &&
         (s.targets[drop + 1].since + kKeepTargets <= now || s.targets.size() - drop > kMaxTargets)) {
    ++drop;
  }
  s.targets.erase(s.targets.begin(), s.targets.begin() + static_cast<std::ptrdiff_t>(drop));
}

int SloDiagnosis::LowestTargetSince(const Service& s, Time t, int now) {
  auto after = std::upper_bound(s.targets.begin(), s.targets.end(), t,
                                [](Time at, const TargetSince& e) { return at < e.since; });
  int lowest = now;
  for (auto it = after == s.targets.begin() ? after : std::prev(after); it != s.targets.end(); ++it) {
    lowest = std::min(lowest, it->pods);
  }
  return lowest;
}

void SloDiagnosis::Observe(const state::State& state, const state::Edit& edit) {
  const Time now = state.now();
  // Charge the interval since the last edit to what blocked each open
  // scale-up during it (set after that edit; nothing changed since).
  for (auto& [id, s] : open_scale_ups_ > 0 ? services_ : no_services_) {
    for (OpenScaleUp& o : s.scale_ups) {
      if (now > o.since && o.blocked) {
        o.seconds[static_cast<int>(o.current)] += ToSeconds(now - o.since);
      }
      o.since = std::max(o.since, now);
    }
  }
  last_ = now;
  if (lent_nodes_ < 0) CountLent(state);  // counts this edit too, if a loan
  else if (std::holds_alternative<state::LendEdit>(edit)) ++lent_nodes_;
  else if (std::holds_alternative<state::ReturnEdit>(edit)) lent_nodes_ = std::max(0, lent_nodes_ - 1);

  WorkloadId touched;
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, state::PlaceEdit> || std::is_same_v<E, state::GrowEdit>) {
          if (!IsInference(state, e.workload)) return;
          Service& s = ServiceOf(e.workload);
          for (const PodPlacement& p : e.pods) s.pods.push_back(PodRecord{p, now});
          touched = e.workload;
        } else if constexpr (std::is_same_v<E, state::ReplicaReadyEdit>) {
          auto it = services_.find(e.workload);
          if (it == services_.end()) return;
          Service& s = it->second;
          for (PodRecord& r : s.pods) {
            if (r.pod == e.pod) r.ready_at = e.ready ? now : kInfiniteFuture;
          }
          if (e.ready) {
            // A ready replica makes up the oldest loss first.
            for (Loss& l : s.losses) {
              if (l.outstanding > 0) {
                --l.outstanding;
                l.made_up.push_back(now);
                break;
              }
            }
            std::erase_if(s.losses, [&](const Loss& l) {
              return l.outstanding <= 0 && (l.made_up.empty() || l.made_up.back() + kKeepMadeUp < now);
            });
          } else {
            // Not ready again while it still holds its GPUs and was not told
            // to leave: the replica failed by itself.
            const Allocation* a = state.allocation(e.workload);
            if (a != nullptr && !a->terminating && Contains(a->pods, e.pod) && !Contains(a->leaving, e.pod)) {
              Lose(e.workload, MissCause::kReplicaCrash, 1);
            }
          }
          touched = e.workload;
        } else if constexpr (std::is_same_v<E, state::ShrinkEdit>) {
          // Work shrunk off a returned node for a service: its leaving pods
          // are that service's victims until they exit.
          if (e.beneficiary.valid() && IsInference(state, e.beneficiary)) {
            ServiceOf(e.beneficiary).victims[e.workload] = e.grace_deadline;
            victim_of_[e.workload] = e.beneficiary;
            touched = e.beneficiary;
          }
          if (!IsInference(state, e.workload)) return;
          // The Lifecycle drains a faulted node by shrinking what can run on
          // without it (no beneficiary); a scale-down is not a loss.
          if (e.beneficiary.valid()) return;
          int faulted = 0;
          for (const PodPlacement& p : e.pods) {
            const Node& node = state.snapshot().cluster.node(p.node);
            if (node.failed_gpus != 0 && node.cordoned) ++faulted;
          }
          Lose(e.workload, MissCause::kGpuFault, faulted);
          touched = e.workload;
        } else if constexpr (std::is_same_v<E, state::PodExitEdit>) {
          if (!Leaving(state, e.workload)) {
            if (auto v = victim_of_.find(e.workload); v != victim_of_.end()) touched = v->second;
            ForgetVictim(e.workload);
          }
          auto it = services_.find(e.workload);
          if (it == services_.end()) return;
          PodsGone(it->second, {e.pod});
          touched = e.workload;
        } else if constexpr (std::is_same_v<E, state::NoticeEdit>) {
          if (e.preemptor.valid() && IsInference(state, e.preemptor)) {
            ServiceOf(e.preemptor).victims[e.workload] = e.grace_deadline;
            victim_of_[e.workload] = e.preemptor;
            touched = e.preemptor;
          }
          if (e.cause == PreemptCause::kDrain && IsInference(state, e.workload)) {
            const Allocation* a = state.allocation(e.workload);
            Lose(e.workload, MissCause::kGpuFault, a != nullptr ? static_cast<int>(a->pods.size()) : 0);
            touched = e.workload;
          }
        } else if constexpr (std::is_same_v<E, state::RequeueEdit> ||
                             std::is_same_v<E, state::ReleaseEdit>) {
          ForgetVictim(e.workload);
          auto it = services_.find(e.workload);
          if (it == services_.end()) return;
          if (e.cause == state::EndCause::kNodeLost) {
            Lose(e.workload, MissCause::kNodeLost, static_cast<int>(it->second.pods.size()));
          }
          it->second.pods.clear();
          if constexpr (std::is_same_v<E, state::ReleaseEdit>) {
            // Gone for good: nothing of it is diagnosed any more.
            for (const auto& [victim, _] : it->second.victims) victim_of_.erase(victim);
            open_scale_ups_ -= static_cast<int>(it->second.scale_ups.size());
            services_.erase(it);
            return;
          }
          touched = e.workload;
        } else if constexpr (std::is_same_v<E, state::SetTargetEdit>) {
          if (IsInference(state, e.workload)) touched = e.workload;
        }
      },
      edit);
  if (touched.valid()) {
    auto it = services_.find(touched);
    if (it == services_.end() && IsInference(state, touched)) it = services_.emplace(touched, Service{}).first;
    if (it != services_.end()) {
      SyncScaleUps(state, touched, it->second);
      if (const Workload* w = state.workload(touched)) NoteTarget(it->second, now, w->pods);
    }
  }
  // What blocks each open scale-up from now on.
  for (auto& [id, s] : open_scale_ups_ > 0 ? services_ : no_services_) {
    const Workload* w = state.workload(id);
    for (OpenScaleUp& o : s.scale_ups) {
      const int goal = std::min(o.to, w != nullptr ? w->pods : o.to);
      o.blocked = state.ready_replicas(id) < goal;
      if (o.blocked) o.current = Blocking(state, id, s, goal);
    }
  }
}

MissDiagnosis SloDiagnosis::DiagnoseMiss(const state::State& state, const MissObservation& miss) const {
  MissDiagnosis d;
  d.ready = miss.ready;
  const Workload* w = state.workload(miss.service);
  if (w == nullptr) {
    d.needed = miss.ready + 1;
    d.short_by_cause[static_cast<int>(MissCause::kCapacityShort)] = 1;
    d.detail = "capacity_short: the service is gone";
    return d;
  }
  const InferenceSpec& spec = w->inference;
  d.target = w->pods;
  const Duration cold = EstimateColdStart(spec);
  d.declared_cold_start_s = ToSeconds(cold);
  // The interval was missed, so whatever the model says, one more replica
  // than was ready was needed.
  // The autoscaler's own sizing (RequiredReplicas), without its headroom.
  d.needed = std::max(RequiredReplicas(spec, miss.rps, 0.0), miss.ready + 1);
  auto add = [&](MissCause c, int n) { d.short_by_cause[static_cast<int>(c)] += n; };

  auto it = services_.find(miss.service);
  // Only replicas asked for from a declared cold start before the interval
  // on could serve it: the lowest target since then.
  d.target_in_time = it == services_.end() ? d.target : LowestTargetSince(it->second, miss.from - cold, d.target);

  // Above the target: replicas never asked for; between the target in time
  // and the target now: asked for too late to load in time. Both are the load outrunning
  // what the target was sized for, unless max_pods capped it.
  const int above = std::max(0, d.needed - std::max(d.target, miss.ready));
  const bool at_max = d.target >= std::max(w->min_pods, w->max_pods);
  add(at_max ? MissCause::kMaxReplicasReached : MissCause::kForecastUnderPredicted, above);
  add(MissCause::kForecastUnderPredicted,
      std::max(0, std::min(d.needed, d.target) - std::max(d.target_in_time, miss.ready)));

  // Below the target in time: wanted in time, not serving.
  int left = std::max(0, std::min(d.needed, d.target_in_time) - miss.ready);
  int from_losses = 0;
  if (it != services_.end()) {
    const Service& s = it->second;
    for (const Loss& l : s.losses) {
      // Made up during the interval: it was missing for part of it.
      int missing = l.outstanding;
      for (Time t : l.made_up) missing += t > miss.from ? 1 : 0;
      const int take = std::min(left, missing);
      add(l.cause, take);
      left -= take;
      from_losses += take;
    }
    const Allocation* a = state.allocation(miss.service);
    for (const PodRecord& r : s.pods) {
      if (a == nullptr || Contains(a->leaving, r.pod) || r.ready_at <= miss.from) continue;
      ++d.loading;
      if (r.placed_at + cold > miss.from) ++d.placed_late;
      d.loading_s = std::max(d.loading_s, ToSeconds(std::min(r.ready_at, state.now()) - r.placed_at));
    }
    // The replacements of losses are among the loading pods, placed late
    // first. Of the rest, a pod placed a cold start before the interval
    // loads slower than declared (cold_start); one placed later could not
    // serve it whatever its load: its placement waited, on what kept its
    // scale-up from placing.
    const int late = std::max(0, d.placed_late - from_losses);
    const int slow = std::max(0, d.loading - from_losses - late);
    int take = std::min(left, slow);
    add(MissCause::kColdStart, take);
    left -= take;
    take = std::min(left, late);
    add(PlacementDelay(s), take);
    left -= take;
    for (const auto& [victim, deadline] : s.victims) {
      if (!Leaving(state, victim)) continue;
      ++d.victims;
      d.victims_grace_left_s = std::max(d.victims_grace_left_s, std::max(0.0, ToSeconds(deadline - state.now())));
    }
  }
  for (bool lent : state.snapshot().lent_nodes) d.lent_nodes += lent ? 1 : 0;
  if (left > 0) {
    add(d.victims > 0 ? MissCause::kVictimsInGrace
                      : d.lent_nodes > 0 ? MissCause::kLoanNotReturned : MissCause::kCapacityShort,
        left);
  }
  std::array<double, kMissCauseCount> weight{};
  for (int i = 0; i < kMissCauseCount; ++i) weight[i] = d.short_by_cause[i];
  d.cause = DominantMissCause(weight);

  d.detail = Str(MissCauseName(d.cause), ": ", d.short_by_cause[static_cast<int>(d.cause)], " of ",
                 d.needed - miss.ready, " missing replicas (needed ", d.needed, " at ", R1(miss.rps),
                 " rps, ", miss.ready, " ready, target ", d.target, ")");
  switch (d.cause) {
    case MissCause::kColdStart:
      d.detail += Str("; ", d.loading, " loading for ", R1(d.loading_s), " s, cold start ",
                      R1(d.declared_cold_start_s), " s",
                      d.loading_s > d.declared_cold_start_s ? " (slower than declared)" : "");
      break;
    case MissCause::kVictimsInGrace:
      d.detail += Str("; ", d.victims, " victims in grace, the last for ", R1(d.victims_grace_left_s), " s more");
      break;
    case MissCause::kLoanNotReturned:
      d.detail += Str("; ", d.lent_nodes, " shared nodes still lent to training");
      break;
    case MissCause::kForecastUnderPredicted:
      d.detail += Str("; target in time ", d.target_in_time, " (the lowest since one cold start, ",
                      R1(d.declared_cold_start_s), " s, before the interval)");
      break;
    case MissCause::kMaxReplicasReached:
      d.detail += Str("; max_pods ", std::max(w->min_pods, w->max_pods));
      break;
    default: break;
  }
  if (d.placed_late > 0 && (d.cause == MissCause::kVictimsInGrace || d.cause == MissCause::kLoanNotReturned ||
                            d.cause == MissCause::kCapacityShort)) {
    d.detail += Str("; ", d.placed_late, " placed too late to load in time");
  }
  return d;
}

ScaleUpDiagnosis SloDiagnosis::TakeScaleUp(const state::State& state, const state::ScaleUpEndEdit& end) {
  ScaleUpDiagnosis d;
  d.service = end.workload;
  d.from = end.from;
  d.to = end.to;
  d.requested_at = end.requested_at;
  d.succeeded = end.result == state::ScaleUpResult::kReady;
  const Time until = d.succeeded ? end.ready_at : state.now();
  d.time_to_capacity_s = ToSeconds(until - end.requested_at);
  const Workload* w = state.workload(end.workload);
  d.slow_after_s = SlowAfterS(w);
  d.declared_cold_start_s = w != nullptr ? ToSeconds(EstimateColdStart(w->inference)) : 0;
  d.slow = !d.succeeded || d.time_to_capacity_s > d.slow_after_s;
  auto it = services_.find(end.workload);
  if (it != services_.end()) {
    std::vector<OpenScaleUp>& open = it->second.scale_ups;
    auto o = std::find_if(open.begin(), open.end(),
                          [&](const OpenScaleUp& x) { return x.requested_at == end.requested_at; });
    if (o != open.end()) {
      d.seconds_by_cause = o->seconds;
      open.erase(o);
      --open_scale_ups_;
    }
  }
  double charged = 0;
  for (double s : d.seconds_by_cause) charged += s;
  // Opened before this diagnosis saw it (a restart): what blocks it now.
  if (charged == 0 && it != services_.end()) {
    d.seconds_by_cause[static_cast<int>(Blocking(state, end.workload, it->second, end.to))] = d.time_to_capacity_s;
  } else if (charged == 0) {
    d.seconds_by_cause[static_cast<int>(MissCause::kColdStart)] = d.time_to_capacity_s;
  }
  d.cause = DominantMissCause(d.seconds_by_cause);
  d.detail = Str(d.succeeded ? "ready" : "timed out", " after ", R1(d.time_to_capacity_s), " s (", d.from, " -> ",
                 d.to, " replicas; slow after ", R1(d.slow_after_s), " s); ", MissCauseName(d.cause), " ",
                 R1(d.seconds_by_cause[static_cast<int>(d.cause)]), " s");
  for (int i = 0; i < kMissCauseCount; ++i) {
    if (i == static_cast<int>(d.cause) || d.seconds_by_cause[i] <= 0) continue;
    d.detail += Str(", ", MissCauseName(static_cast<MissCause>(i)), " ", R1(d.seconds_by_cause[i]), " s");
  }
  // Compared as shown (to a tenth of a second): a load 2.04 s long is not
  // "longer than the declared 2 s" to a reader who sees both as 2.
  if (d.cause == MissCause::kColdStart &&
      R1(d.seconds_by_cause[static_cast<int>(MissCause::kColdStart)]) > R1(d.declared_cold_start_s)) {
    d.detail += Str("; loading took longer than the declared ", R1(d.declared_cold_start_s), " s");
  }
  return d;
}

}  // namespace tidal::diagnosis
