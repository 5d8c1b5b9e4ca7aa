#include "config/schedule_pass.h"

#include <algorithm>
#include <bit>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "core/engine/scheduler.h"
#include "core/state/state_machine.h"

namespace tidal::config {
namespace {

class WorkloadIndex {
 public:
  explicit WorkloadIndex(const Snapshot& s) {
    for (const Workload& w : s.workloads) by_id_.emplace(w.id, &w);
  }
  const Workload* Find(WorkloadId id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<WorkloadId, const Workload*> by_id_;
};

std::string Ranges(GpuMask mask) {
  std::string out;
  const std::vector<int> gpus = GpuIndices(mask);
  for (size_t i = 0; i < gpus.size();) {
    size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", gpus[i]) : fmt::format("{}-{}", gpus[i], gpus[j]);
    i = j + 1;
  }
  return out;
}

// Cuts a cell to `width` so the table stays aligned.
std::string Cell(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 1) + "~";
}

}  // namespace

std::string FormatPods(const std::vector<PodPlacement>& pods, const Cluster& cluster) {
  // Merge pods that share a node, in node order, so a gang reads compactly.
  std::map<uint32_t, GpuMask> by_node;
  for (const PodPlacement& p : pods) by_node[p.node.value()] |= p.gpus;
  std::string out;
  for (const auto& [node, mask] : by_node) {
    if (!out.empty()) out += ' ';
    const std::string name = node < cluster.nodes.size() ? cluster.nodes[node].name : std::to_string(node);
    out += name + ":" + Ranges(mask);
  }
  return out;
}

std::string FormatDelay(Duration d) {
  const int64_t s = std::chrono::duration_cast<seconds>(d).count();
  if (s <= 0) return "now";
  if (s < 60) return fmt::format("+{}s", s);
  if (s < 3600) return fmt::format("+{}m", s / 60);
  if (s < 86400) return fmt::format("+{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("+{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

StatusOr<SchedulePassResult> RunSchedulePass(const ClusterConfig& cluster, const PolicyConfig& policy,
                                             const std::vector<WorkloadSpec>& workloads) {
  SchedulePassResult result;
  // The workloads enter a fresh state as submits, and the one priority
  // refresher derives their priorities, as in the server and the simulator.
  state::StateMachine machine(state::State(cluster.cluster, cluster.queues, cluster.projects),
                              state::LifecycleOptions{policy.preemption.default_grace, Duration(0)},
                              policy.templates);
  Time now;
  for (const WorkloadSpec& spec : workloads) now = std::max(now, spec.workload.submit_time);
  machine.AdvanceTo(now);
  for (const WorkloadSpec& spec : workloads) {
    Workload w = spec.workload;
    if (!w.project.valid() || w.project.value() >= cluster.projects.size()) {
      return InvalidArgument("workload '" + w.name + "' has no valid project");
    }
    w.state = WorkloadState::kPending;
    TIDAL_RETURN_IF_ERROR(machine.Apply(state::SubmitEdit{std::move(w)}));
  }
  TIDAL_RETURN_IF_ERROR(machine.RefreshPriorities());
  result.snapshot = machine.state().snapshot();
  const Snapshot& s = result.snapshot;
  result.decisions = Scheduler(policy).Schedule(s);
  return result;
}

std::string RenderScheduleText(const SchedulePassResult& result) {
  const Snapshot& s = result.snapshot;
  const Decisions& d = result.decisions;
  std::string out;
  const WorkloadIndex index(s);
  auto name_of = [&](WorkloadId id) {
    const Workload* w = index.Find(id);
    return w ? w->name : fmt::format("#{}", id.value());
  };
  auto append = [&out](const std::string& line) { out += line + "\n"; };

  int pending = 0;
  for (const Workload& w : s.workloads) pending += w.state != WorkloadState::kRunning ? 1 : 0;
  append(fmt::format("One scheduling pass at t={}s: {} workloads ({} waiting to start), {} GPUs on {} nodes",
                     ToSeconds(s.now), s.workloads.size(), pending, s.cluster.total_gpus(),
                     s.cluster.nodes.size()));

  append("");
  append(fmt::format("PLACED ({})", d.places.size()));
  if (!d.places.empty()) {
    append(fmt::format("  {:<22} {:<16} {:>8} {:>5} {:<8} {}", "WORKLOAD", "KIND", "PRIORITY", "GPUS",
                       "BORROWED", "NODES:GPUS"));
    for (const PlaceDecision& p : d.places) {
      const Workload* w = index.Find(p.workload);
      int gpus = 0;
      for (const PodPlacement& pod : p.pods) gpus += std::popcount(pod.gpus);
      append(fmt::format("  {:<22} {:<16} {:>8} {:>5} {:<8} {}", Cell(name_of(p.workload), 22),
                         w ? WorkloadKindName(w->kind) : "?", w ? w->priority.value : 0, gpus,
                         p.borrowed ? "yes" : "no", FormatPods(p.pods, s.cluster)));
    }
  }
  if (!d.preempts.empty()) {
    append("");
    append(fmt::format("PREEMPTED ({})", d.preempts.size()));
    for (const PreemptDecision& p : d.preempts) {
      append(fmt::format("  {:<22} cause {:<16} for {:<22} grace {} lost {:.0f} GPU-s  {}",
                         Cell(name_of(p.victim), 22), PreemptCauseName(p.cause),
                         p.preemptor.valid() ? name_of(p.preemptor) : "-",
                         FormatDelay(p.grace_deadline - s.now), p.lost_gpu_seconds, p.detail));
    }
  }
  if (!d.resizes.empty()) {
    append("");
    append(fmt::format("RESIZED ({})", d.resizes.size()));
    for (const ResizeDecision& r : d.resizes) {
      append(fmt::format("  {:<22} {} -> {} pods  {}", Cell(name_of(r.workload), 22), r.from_pods,
                         r.to_pods, r.detail));
    }
  }
  append("");
  append(fmt::format("WAITING ({})", d.waits.size() + d.rejects.size()));
  if (!d.waits.empty() || !d.rejects.empty()) {
    append(fmt::format("  {:<22} {:>8} {:<18} {:<10} {}", "WORKLOAD", "PRIORITY", "REASON", "EST.START",
                       "DETAIL"));
    for (const WaitDecision& w : d.waits) {
      const Workload* wl = index.Find(w.workload);
      append(fmt::format("  {:<22} {:>8} {:<18} {:<10} {}", Cell(name_of(w.workload), 22),
                         wl ? wl->priority.value : 0, ReasonCodeName(w.reason),
                         w.estimated_start ? FormatDelay(*w.estimated_start - s.now) : "unknown",
                         w.detail));
    }
    for (const RejectDecision& r : d.rejects) {
      const Workload* wl = index.Find(r.workload);
      append(fmt::format("  {:<22} {:>8} {:<18} {:<10} {}", Cell(name_of(r.workload), 22),
                         wl ? wl->priority.value : 0, ReasonCodeName(r.reason), "never",
                         "rejected: " + r.detail));
    }
  }
  append("");
  append("PRIORITIES");
  for (const Workload& w : s.workloads) {
    std::string line;
    for (const std::string& step : w.priority.derivation) line += (line.empty() ? "" : "; ") + step;
    append(fmt::format("  {:<22} {}", Cell(w.name, 22), line));
  }
  return out;
}

nlohmann::json ScheduleToJson(const SchedulePassResult& result) {
  const NameScope scope = ScopeOf(result.snapshot);
  nlohmann::json workloads = nlohmann::json::array();
  for (const Workload& w : result.snapshot.workloads) workloads.push_back(WorkloadToJson(w, scope));
  return {{"now_ms", ToMillis(result.snapshot.now)},
          {"workloads", workloads},
          {"decisions", DecisionsToJson(result.decisions, scope)}};
}

}  // namespace tidal::config
