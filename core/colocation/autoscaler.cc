#include "core/colocation/autoscaler.h"

#include <algorithm>

#include "core/colocation/latency_model.h"
#include "core/common/check.h"

namespace tidal {

Duration EstimateColdStart(const InferenceSpec& spec, const ColdStartModel& model) {
  if (spec.cold_start.count() > 0) return spec.cold_start;
  const double gib_per_s = spec.model_source == ModelSource::kLocalCache
                               ? model.local_cache_gib_per_s
                               : model.shared_storage_gib_per_s;
  TIDAL_CHECK(gib_per_s > 0) << "model load bandwidth must be positive";
  return model.container_start + SecondsF(std::max(0.0, spec.model_size_gib) / gib_per_s);
}

int RequiredReplicas(const InferenceSpec& spec, double rps, double headroom) {
  if (rps <= 0) return 0;
  // Without a declared capacity the model cannot size the service: one
  // replica, and its min_pods/max_pods decide the rest.
  if (spec.replica_capacity_rps <= 0) return 1;
  if (spec.target_p99.count() <= 0) {
    // No latency target: only keep the queue stable with headroom.
    const double load = rps * (1 + headroom) / spec.replica_capacity_rps;
    return static_cast<int>(load) + 1;
  }
  return MinReplicasForTarget(rps, spec.replica_capacity_rps, spec.target_p99, headroom);
}

Autoscaler::Autoscaler(AutoscalerOptions options) : options_(options) {}

int Autoscaler::Update(const Workload& service, double current_rps, double forecast_rps,
                       Time now) {
  TIDAL_CHECK(service.kind == WorkloadKind::kInference)
      << "autoscaling a " << WorkloadKindName(service.kind) << " workload";
  const int lo = std::max(0, service.min_pods);
  const int hi = std::max(lo, service.max_pods);
  auto [it, inserted] = state_.try_emplace(service.id);
  State& s = it->second;
  const double rps = std::max(current_rps, forecast_rps);
  const InferenceSpec& spec = service.inference;
  if (rps != s.memo_rps || spec.replica_capacity_rps != s.memo_capacity_rps ||
      spec.target_p99 != s.memo_target) {
    s.memo_need = RequiredReplicas(spec, rps, options_.headroom);
    s.memo_rps = rps;
    s.memo_capacity_rps = spec.replica_capacity_rps;
    s.memo_target = spec.target_p99;
  }
  const int need = std::clamp(s.memo_need, lo, hi);

  if (inserted) {
    // A service seen for the first time starts where it stands, or at its
    // need if that is higher.
    s.target = std::clamp(std::max(service.pods, need), lo, hi);
    s.since = now;
  }
  s.target = std::clamp(s.target, lo, hi);  // the bounds may have been edited
  if (need >= s.target) {
    if (need > s.target) s.since = now;
    s.target = need;
    s.needs.clear();
    s.needs.emplace_back(now, need);
    return s.target;
  }
  s.needs.emplace_back(now, need);
  while (!s.needs.empty() && s.needs.front().first < now - options_.scale_down_delay) {
    s.needs.pop_front();
  }
  if (now - s.since >= options_.scale_down_delay) {
    int window_max = need;
    for (const auto& [t, n] : s.needs) window_max = std::max(window_max, n);
    if (window_max < s.target) s.target = window_max;
  }
  return s.target;
}

std::optional<int> Autoscaler::Target(WorkloadId service) const {
  auto it = state_.find(service);
  if (it == state_.end()) return std::nullopt;
  return it->second.target;
}

void Autoscaler::Forget(WorkloadId service) { state_.erase(service); }

std::map<WorkloadId, ServiceScaling> Autoscaler::scaling() const {
  std::map<WorkloadId, ServiceScaling> out;
  for (const auto& [service, s] : state_) out.emplace(service, static_cast<const ServiceScaling&>(s));
  return out;
}

// The sizing memo is not memory: it starts empty and is recomputed.
void Autoscaler::Restore(const std::map<WorkloadId, ServiceScaling>& scaling) {
  state_.clear();
  for (const auto& [service, s] : scaling) static_cast<ServiceScaling&>(state_[service]) = s;
}

}  // namespace tidal
