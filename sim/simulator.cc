#include "sim/simulator.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/colocation/colocation_controller.h"
#include "core/common/rng.h"
#include "core/engine/scheduler.h"
#include "core/priority/priority_deriver.h"
#include "sim/event_queue.h"

namespace tidal::sim {
namespace {

// A VictimExit event with this generation applies due shrinks instead.
constexpr uint64_t kShrinkGeneration = std::numeric_limits<uint64_t>::max();

enum class Phase { kNotArrived, kPending, kRunning, kTerminating, kDone };

int KindIndex(WorkloadKind kind) { return static_cast<int>(kind); }

double Sec(Time t) { return ToSeconds(t); }
double Sec(Duration d) { return ToSeconds(d); }

struct Job {
  Phase phase = Phase::kNotArrived;
  WorkloadKind kind = WorkloadKind::kTraining;
  Time submit;
  int full_pods = 1;    // progress runs at placed_pods / full_pods
  int gpus_per_pod = 1;
  int min_pods = 1;
  double work_s = 0;    // seconds at full size; 0 = runs until stopped
  Duration checkpoint_interval{0};
  Time deadline = kInfiniteFuture;

  // Progress, in seconds at full size.
  double progress_s = 0;      // as of segment_start
  double rate = 0;            // placed pods / full pods
  Time segment_start;
  double checkpoint_progress_s = 0;
  Time run_start;
  uint64_t generation = 0;    // finish and exit events carry it

  std::optional<Time> first_start;
  std::optional<Time> noticed_at;  // the preemption notice, for recovery time
  bool stop_for_good = false;      // a max-runtime stop: done at exit
  bool completed = false;
  Time finished_at;

  QueueId queue;
  ProjectId project;
  int gpus_held = 0;
  Time next_checkpoint = kInfiniteFuture;
  bool derived = false;               // priority derived at least once
  BudgetState budget = BudgetState::kWithinGuarantee;
  bool time_dependent_priority = false;  // has a deadline: re-derived every pass
  bool watched = false;                  // in Run::watch_

  int snap_index = -1;   // in snapshot.workloads
  int alloc_index = -1;  // in snapshot.allocations
  std::string name_json;

  // Inference: per allocation pod, when it is ready.
  int service = -1;
  std::vector<Time> pod_ready;
  int ready = 0;
  // Training shrinks in flight: pods leave at the given time.
  std::vector<std::pair<Time, PodPlacement>> shrinking;
};

struct ScaleUp {
  Time at;
  int from = 0;
  int to = 0;
  bool failed = false;
};

struct ServiceTrack {
  int job = -1;
  std::string name;
  bool active = false;       // arrived and not finished
  bool live = false;         // its first deployment has become ready: scored from now on
  bool scored = false;       // was active at the start of the current step
  double rps = 0;            // the current step's load
  int min_ready = 0;         // fewest ready replicas seen during the step
  int desired = 0;           // the autoscaler's last target
  bool starting_in_step = false;  // a scale-up was pending during the step
  bool last_missed = false;       // verdict of the last scored step
  bool last_cold = false;         // ... missed while replicas were starting
  std::vector<ScaleUp> pending;
  size_t series = 0;         // index in TimeSeries::services
};

class Run {
 public:
  Run(const SimInput& input, const SimOptions& options, std::ostream* events)
      : input_(input),
        options_(options),
        events_(events),
        policy_(MakePolicy(input.policy, options)),
        scheduler_(policy_),
        controller_(policy_),
        rng_(options.seed) {}

  StatusOr<SimResult> Go();

 private:
  static PolicyConfig MakePolicy(PolicyConfig policy, const SimOptions& options) {
    if (options.colocation) policy.colocation.mode = *options.colocation;
    return policy;
  }

  Status Init();
  void Loop();
  void HandleArrival(size_t job_index);
  void HandleFinish(size_t job_index, uint64_t generation);
  void HandleVictimExit(size_t job_index, uint64_t generation);
  void HandleReplicaReady(size_t job_index);
  void HandleCheckpoint(size_t job_index, Time at);
  void HandleLoadStep();
  void HandlePass();
  bool Done() const;

  void ApplyDecisions(const Decisions& d);
  void ApplyPreempt(const PreemptDecision& d);
  void ApplyResize(const ResizeDecision& d);
  void ApplyPlace(const PlaceDecision& d);
  void ApplyReject(const RejectDecision& d);
  void AfterPrepare();

  Job* JobOf(WorkloadId id) {
    if (!id.valid() || id.value() > jobs_.size()) return nullptr;
    return &jobs_[id.value() - 1];
  }
  size_t IndexOf(const Job& j) const { return static_cast<size_t>(&j - jobs_.data()); }
  Workload& LiveWorkload(Job& j) { return snap_.workloads[j.snap_index]; }
  Allocation& LiveAllocation(Job& j) { return snap_.allocations[j.alloc_index]; }

  bool ValidPod(const PodPlacement& p) const;
  void TakePod(Job& j, const PodPlacement& p);
  void FreePod(Job& j, const PodPlacement& p);
  void FreeAllocation(Job& j);
  void RemoveWorkload(Job& j);
  Status RefreshPriorities();
  void SetPhase(Job& j, Phase phase);
  void AdvanceProgress(Job& j);
  void SetRate(Job& j);
  void ScheduleFinish(Job& j);
  void Complete(Job& j);
  void RequestPass();
  void AccumulateAreas();
  void RecountReady(Job& j);
  void CheckScaleUps(ServiceTrack& s);
  void Sample();
  void LogEvent(std::string_view body);

  const SimInput& input_;
  const SimOptions& options_;
  std::ostream* events_;
  PolicyConfig policy_;
  Scheduler scheduler_;
  ColocationController controller_;
  Rng rng_;
  ManualClock clock_;
  EventQueue queue_;
  Snapshot snap_;
  Status error_;

  std::vector<Job> jobs_;
  std::vector<ServiceTrack> services_;
  std::vector<GpuMask> used_;            // by node
  // By node: its GPUs minus failed ones (the cluster never changes). With
  // used_ it keeps snap_.free_gpus, and snap_.allocation_gpus is kept with
  // the allocations, so a pass need not read every node and allocation.
  std::vector<GpuMask> base_free_;
  std::vector<bool> node_shared_;        // node in a shared pool
  std::vector<int> node_borrowed_pods_;  // non-inference pods on shared nodes
  std::map<uint32_t, Time> reclaim_started_;
  std::vector<int> queue_used_;          // GPUs held per queue (direct members)
  std::vector<int> project_gpus_;        // GPUs held per project
  std::vector<double> project_hours0_;   // used_gpu_hours at the start
  std::vector<double> project_area_;     // GPU-seconds used since the start
  // Jobs whose budget state is checked at the next refresh even when no
  // project's or queue's budget flag changed: new, pending, time-dependent,
  // or changed phase since the last refresh.
  std::vector<uint32_t> watch_;
  std::vector<uint8_t> project_over_;  // per project: over its GPU-hour budget
  std::vector<uint8_t> queue_over_;    // per queue: usage above its guarantee
  bool budget_flags_known_ = false;
  int inference_workloads_ = 0;
  int pending_training_ = 0;
  int running_debug_ = 0;
  int lent_gpus_ = 0;
  // False when the cluster has no shared pool and the input no inference,
  // batch or debug work: Prepare could decide nothing and is not called.
  bool colocation_relevant_ = true;
  Time next_pass_ = kInfiniteFuture;
  Time last_pass_ = Time(Duration(std::numeric_limits<int64_t>::min() / 2));
  bool changed_since_pass_ = true;
  Time end_ = kInfiniteFuture;
  Time cap_ = kInfiniteFuture;
  double load_end_s_ = 0;
  size_t unarrived_ = 0;
  size_t finite_left_ = 0;
  int pending_count_ = 0;

  // Areas for time averages.
  Time area_at_;
  int allocated_gpus_ = 0;
  int borrowed_gpus_ = 0;
  int gpus_by_kind_[4] = {0, 0, 0, 0};
  double allocated_area_ = 0;  // GPU-seconds
  double borrowed_area_ = 0;
  double kind_area_[4] = {0, 0, 0, 0};

  // Metrics.
  int gang_places_ = 0;
  int gang_partial_ = 0;
  int training_preemptions_ = 0;
  double lost_gpu_seconds_ = 0;
  std::vector<double> recovery_s_;
  std::vector<double> ttc_s_;
  int scale_ups_ = 0;
  int scale_up_ok_ = 0;
  int scale_up_resolved_ = 0;
  int service_steps_ = 0;
  int service_misses_ = 0;
  std::vector<double> step_p99_ms_;
  std::vector<double> reclaim_s_;
  int reclaims_ = 0;
  std::vector<double> cycle_ms_;
  int cycles_ = 0;
  int invalid_ = 0;
  int loans_since_sample_ = 0;
  int returns_since_sample_ = 0;
  TimeSeries series_;
};

void Run::LogEvent(std::string_view body) {
  if (events_ == nullptr) return;
  *events_ << "{\"t\":" << fmt::format("{:.3f}", Sec(clock_.Now())) << ',' << body << "}\n";
}

Status Run::Init() {
  snap_.cluster = input_.cluster.cluster;
  snap_.queues = input_.cluster.queues;
  snap_.projects = input_.cluster.projects;
  // The simulated cluster never changes: the engine keeps its node classes.
  snap_.cluster_version = 1;
  const size_t nodes = snap_.cluster.nodes.size();
  used_.assign(nodes, 0);
  base_free_.resize(nodes);
  for (size_t n = 0; n < nodes; ++n) {
    const Node& node = snap_.cluster.nodes[n];
    base_free_[n] = node.all_gpus() & ~node.failed_gpus;
  }
  snap_.free_gpus = base_free_;
  node_shared_.assign(nodes, false);
  node_borrowed_pods_.assign(nodes, 0);
  for (size_t n = 0; n < nodes; ++n) {
    const Node& node = snap_.cluster.nodes[n];
    if (node.pool.valid() && node.pool.value() < snap_.cluster.pools.size())
      node_shared_[n] = snap_.cluster.pool(node.pool).kind == PoolKind::kShared;
  }
  series_.total_gpus = snap_.cluster.total_gpus();
  queue_used_.assign(snap_.queues.size(), 0);
  project_gpus_.assign(snap_.projects.size(), 0);
  project_area_.assign(snap_.projects.size(), 0.0);
  for (const Project& p : snap_.projects) project_hours0_.push_back(p.used_gpu_hours);

  jobs_.resize(input_.workloads.size());
  double last_arrival_s = 0;
  for (size_t i = 0; i < input_.workloads.size(); ++i) {
    const SimWorkload& sw = input_.workloads[i];
    const Workload& w = sw.workload;
    if (!(sw.submit_s >= 0))
      return InvalidArgument(fmt::format("workload {}: submit time must be >= 0", w.name));
    if (w.pods < 1 || w.gpus_per_pod < 1 || w.min_pods < 1)
      return InvalidArgument(fmt::format("workload {}: pods, min_pods and gpus_per_pod must be >= 1",
                                         w.name));
    if (!w.queue.valid() || w.queue.value() >= snap_.queues.size())
      return InvalidArgument(fmt::format("workload {}: unknown queue", w.name));
    if (!w.project.valid() || w.project.value() >= snap_.projects.size())
      return InvalidArgument(fmt::format("workload {}: unknown project", w.name));
    Job& j = jobs_[i];
    j.kind = w.kind;
    j.submit = TimeFromMillis(static_cast<int64_t>(std::llround(sw.submit_s * 1000)));
    j.full_pods = std::max(w.pods, w.max_pods);
    j.gpus_per_pod = w.gpus_per_pod;
    j.min_pods = w.min_pods;
    j.work_s = Sec(w.expected_duration);
    j.checkpoint_interval = w.kind == WorkloadKind::kTraining ? w.training.checkpoint_interval
                                                              : Duration(0);
    j.deadline = w.batch.deadline;
    j.name_json = nlohmann::json(w.name).dump();
    if (j.work_s > 0) ++finite_left_;
    j.queue = w.queue;
    j.project = w.project;
    j.time_dependent_priority = w.batch.deadline != kInfiniteFuture;
    if (w.kind == WorkloadKind::kInference) ++inference_workloads_;
    // Only services with a load curve are scored and charted; others keep
    // their minimum replicas.
    if (w.kind == WorkloadKind::kInference && input_.load.Has(w.name)) {
      j.service = static_cast<int>(services_.size());
      ServiceTrack s;
      s.job = static_cast<int>(i);
      s.name = w.name;
      s.series = series_.services.size();
      services_.push_back(s);
      TimeSeries::Service ts;
      ts.name = w.name;
      ts.target_p99_ms = static_cast<double>(w.inference.target_p99.count());
      series_.services.push_back(std::move(ts));
    }
    queue_.PushBulk(j.submit, EventKind::kArrival, i);
    ++unarrived_;
    last_arrival_s = std::max(last_arrival_s, sw.submit_s);
  }
  load_end_s_ = std::max(input_.load.end_s(), input_.load.period_s());
  if (options_.end_s > 0) {
    end_ = TimeFromMillis(static_cast<int64_t>(options_.end_s * 1000));
  } else {
    cap_ = TimeFromMillis(
        static_cast<int64_t>((last_arrival_s + load_end_s_ + 7 * 86400.0) * 1000));
  }
  colocation_relevant_ = std::find(node_shared_.begin(), node_shared_.end(), true) != node_shared_.end();
  for (const SimWorkload& sw : input_.workloads)
    if (sw.workload.kind != WorkloadKind::kTraining) colocation_relevant_ = true;
  queue_.Push(Time(), EventKind::kLoadStep);
  next_pass_ = Time();
  queue_.Push(Time(), EventKind::kPass);
  area_at_ = Time();
  return Status::Ok();
}

bool Run::Done() const {
  if (end_ != kInfiniteFuture) return false;  // runs to end_
  if (clock_.Now() >= cap_) return true;
  return unarrived_ == 0 && finite_left_ == 0 && Sec(clock_.Now()) >= load_end_s_;
}

void Run::AccumulateAreas() {
  const double dt = Sec(clock_.Now() - area_at_);
  if (dt > 0) {
    allocated_area_ += dt * allocated_gpus_;
    borrowed_area_ += dt * borrowed_gpus_;
    for (int k = 0; k < 4; ++k) kind_area_[k] += dt * gpus_by_kind_[k];
    for (size_t p = 0; p < project_gpus_.size(); ++p) project_area_[p] += dt * project_gpus_[p];
  }
  area_at_ = clock_.Now();
}

void Run::Loop() {
  while (!queue_.empty() && error_.ok()) {
    if (queue_.top().at > end_) break;
    const Event e = queue_.Pop();
    clock_.Set(e.at);
    AccumulateAreas();
    switch (e.kind) {
      case EventKind::kArrival: HandleArrival(e.subject); break;
      case EventKind::kFinish: HandleFinish(e.subject, e.generation); break;
      case EventKind::kVictimExit: HandleVictimExit(e.subject, e.generation); break;
      case EventKind::kReplicaReady: HandleReplicaReady(e.subject); break;
      case EventKind::kCheckpoint: HandleCheckpoint(e.subject, e.at); break;
      case EventKind::kLoadStep: HandleLoadStep(); break;
      case EventKind::kPass:
        if (e.at == next_pass_) HandlePass();
        break;
    }
    if (Done()) break;
  }
  if (end_ != kInfiniteFuture) clock_.Set(std::max(clock_.Now(), end_));
  AccumulateAreas();
}

void Run::RequestPass() {
  changed_since_pass_ = true;
  const Time at = std::max(clock_.Now(), last_pass_ + options_.min_pass_gap);
  if (at < next_pass_) {
    next_pass_ = at;
    queue_.Push(at, EventKind::kPass);
  }
}

void Run::HandleArrival(size_t i) {
  Job& j = jobs_[i];
  --unarrived_;
  Workload w = input_.workloads[i].workload;
  w.id = WorkloadId(i + 1);
  w.submit_time = j.submit;
  w.state = WorkloadState::kPending;
  SetPhase(j, Phase::kPending);
  j.snap_index = static_cast<int>(snap_.workloads.size());
  snap_.workloads.push_back(std::move(w));
  if (j.service >= 0) {
    ServiceTrack& s = services_[j.service];
    s.active = true;
    s.rps = input_.load.Rps(s.name, Sec(clock_.Now()));
    controller_.ObserveLoad(WorkloadId(i + 1), clock_.Now(), s.rps);
  }
  const Workload& live = snap_.workloads.back();
  LogEvent(fmt::format("\"event\":\"submit\",\"workload\":{},\"kind\":\"{}\",\"pods\":{},"
                       "\"gpus_per_pod\":{}",
                       j.name_json, WorkloadKindName(j.kind), live.pods, live.gpus_per_pod));
  RequestPass();
}

bool Run::ValidPod(const PodPlacement& p) const {
  if (!p.node.valid() || p.node.value() >= used_.size() || p.gpus == 0) return false;
  const Node& n = snap_.cluster.node(p.node);
  if ((p.gpus & ~n.all_gpus()) != 0) return false;
  return (used_[p.node.value()] & p.gpus) == 0;
}

void Run::TakePod(Job& j, const PodPlacement& p) {
  used_[p.node.value()] |= p.gpus;
  snap_.free_gpus[p.node.value()] = base_free_[p.node.value()] & ~used_[p.node.value()];
  const int g = std::popcount(p.gpus);
  j.gpus_held += g;
  if (j.alloc_index >= 0) snap_.allocation_gpus[j.alloc_index] += g;
  queue_used_[j.queue.value()] += g;
  project_gpus_[j.project.value()] += g;
  allocated_gpus_ += g;
  gpus_by_kind_[KindIndex(j.kind)] += g;
  if (node_shared_[p.node.value()] && j.kind != WorkloadKind::kInference) {
    borrowed_gpus_ += g;
    ++node_borrowed_pods_[p.node.value()];
  }
}

void Run::FreePod(Job& j, const PodPlacement& p) {
  used_[p.node.value()] &= ~p.gpus;
  snap_.free_gpus[p.node.value()] = base_free_[p.node.value()] & ~used_[p.node.value()];
  const int g = std::popcount(p.gpus);
  j.gpus_held -= g;
  if (j.alloc_index >= 0) snap_.allocation_gpus[j.alloc_index] -= g;
  queue_used_[j.queue.value()] -= g;
  project_gpus_[j.project.value()] -= g;
  allocated_gpus_ -= g;
  gpus_by_kind_[KindIndex(j.kind)] -= g;
  if (node_shared_[p.node.value()] && j.kind != WorkloadKind::kInference) {
    borrowed_gpus_ -= g;
    if (--node_borrowed_pods_[p.node.value()] == 0) {
      auto it = reclaim_started_.find(p.node.value());
      if (it != reclaim_started_.end()) {
        reclaim_s_.push_back(Sec(clock_.Now() - it->second));
        reclaim_started_.erase(it);
      }
    }
  }
}

void Run::FreeAllocation(Job& j) {
  if (j.alloc_index < 0) return;
  for (const PodPlacement& p : LiveAllocation(j).pods) FreePod(j, p);
  j.shrinking.clear();
  const int idx = j.alloc_index;
  const int last = static_cast<int>(snap_.allocations.size()) - 1;
  if (idx != last) {
    snap_.allocations[idx] = std::move(snap_.allocations[last]);
    snap_.allocation_gpus[idx] = snap_.allocation_gpus[last];
    JobOf(snap_.allocations[idx].workload)->alloc_index = idx;
  }
  snap_.allocations.pop_back();
  snap_.allocation_gpus.pop_back();
  j.alloc_index = -1;
  j.pod_ready.clear();
  if (j.ready != 0) {
    j.ready = 0;
    if (j.service >= 0) {
      ServiceTrack& s = services_[j.service];
      s.min_ready = std::min(s.min_ready, 0);
    }
  }
}

// Finished workloads leave the snapshot by swap-remove: O(1), and the order
// stays a pure function of the inputs.
void Run::RemoveWorkload(Job& j) {
  if (j.snap_index < 0) return;
  const int idx = j.snap_index;
  const int last = static_cast<int>(snap_.workloads.size()) - 1;
  if (idx != last) {
    snap_.workloads[idx] = std::move(snap_.workloads[last]);
    JobOf(snap_.workloads[idx].id)->snap_index = idx;
  }
  snap_.workloads.pop_back();
  j.snap_index = -1;
}

void Run::SetPhase(Job& j, Phase phase) {
  auto count = [&](Phase p, int delta) {
    if (p == Phase::kPending) {
      pending_count_ += delta;
      if (j.kind == WorkloadKind::kTraining) pending_training_ += delta;
    }
    if ((p == Phase::kRunning || p == Phase::kTerminating) && j.kind == WorkloadKind::kDebug)
      running_debug_ += delta;
  };
  count(j.phase, -1);
  j.phase = phase;
  count(j.phase, +1);
  if (!j.watched && phase != Phase::kDone) {
    j.watched = true;
    watch_.push_back(static_cast<uint32_t>(IndexOf(j)));
  }
}

// The same derivation as DeriveSnapshotPriorities (core/priority), but a
// workload is re-derived only when its budget state changed, it is new, or
// its priority depends on time (a deadline). A running job's budget state
// depends only on two flags, its project over budget and its queue's usage
// over the guarantee (others + its own GPUs = the queue's usage), so while no
// flag changed only watched jobs (pending, new, time-dependent, or changed
// phase) are looked at: a pass does not touch every running job.
Status Run::RefreshPriorities() {
  bool flags_changed = !budget_flags_known_;
  project_over_.resize(snap_.projects.size(), 0);
  queue_over_.resize(snap_.queues.size(), 0);
  for (size_t p = 0; p < snap_.projects.size(); ++p) {
    Project& project = snap_.projects[p];
    project.used_gpu_hours = project_hours0_[p] + project_area_[p] / 3600.0;
    const uint8_t over = project.budget_gpu_hours > 0 && project.used_gpu_hours >= project.budget_gpu_hours;
    flags_changed = flags_changed || over != project_over_[p];
    project_over_[p] = over;
  }
  for (size_t q = 0; q < snap_.queues.size(); ++q) {
    const uint8_t over = queue_used_[q] > snap_.queues[q].guaranteed_gpus;
    flags_changed = flags_changed || over != queue_over_[q];
    queue_over_[q] = over;
  }
  budget_flags_known_ = true;
  auto refresh = [&](Workload& w, Job& j) -> Status {
    const Queue& queue = snap_.queues[w.queue.value()];
    const Project& project = snap_.projects[w.project.value()];
    const int requested = j.gpus_held > 0 ? j.gpus_held : w.min_gpus();
    const int others = queue_used_[w.queue.value()] - j.gpus_held;
    const BudgetState budget = ComputeBudgetState(project, queue, others, requested);
    if (j.derived && budget == j.budget && !j.time_dependent_priority) return Status::Ok();
    TIDAL_ASSIGN_OR_RETURN(w.priority, DerivePriority(policy_.templates, w, project, budget, clock_.Now()));
    j.derived = true;
    j.budget = budget;
    if (w.state == WorkloadState::kPending && w.priority.awaiting_approval) {
      w.state = WorkloadState::kAwaitingApproval;
    } else if (w.state == WorkloadState::kAwaitingApproval && !w.priority.awaiting_approval) {
      w.state = WorkloadState::kPending;
    }
    return Status::Ok();
  };
  if (flags_changed) {
    for (Workload& w : snap_.workloads) TIDAL_RETURN_IF_ERROR(refresh(w, *JobOf(w.id)));
  } else {
    for (uint32_t i : watch_) {
      Job& j = jobs_[i];
      if (j.snap_index >= 0) TIDAL_RETURN_IF_ERROR(refresh(LiveWorkload(j), j));
    }
  }
  // Keep watching what stays pending or depends on time.
  size_t kept = 0;
  for (uint32_t i : watch_) {
    Job& j = jobs_[i];
    if (j.snap_index >= 0 && (j.phase == Phase::kPending || j.time_dependent_priority)) {
      watch_[kept++] = i;
    } else {
      j.watched = false;
    }
  }
  watch_.resize(kept);
  return Status::Ok();
}

void Run::AdvanceProgress(Job& j) {
  const Time now = clock_.Now();
  if (j.rate > 0 && now > j.segment_start) {
    if (j.checkpoint_interval.count() > 0) {
      const int64_t k = (now - j.run_start) / j.checkpoint_interval;
      const Time last_checkpoint = j.run_start + k * j.checkpoint_interval;
      if (last_checkpoint >= j.segment_start)
        j.checkpoint_progress_s = j.progress_s + j.rate * Sec(last_checkpoint - j.segment_start);
    }
    j.progress_s += j.rate * Sec(now - j.segment_start);
  }
  j.segment_start = now;
}

void Run::SetRate(Job& j) {
  AdvanceProgress(j);
  const int pods = j.alloc_index >= 0 ? static_cast<int>(LiveAllocation(j).pods.size()) : 0;
  // A service's lifetime is wall time; training work scales with its pods.
  j.rate = j.kind == WorkloadKind::kInference ? (pods > 0 ? 1.0 : 0.0)
                                              : static_cast<double>(pods) / j.full_pods;
  ScheduleFinish(j);
}

void Run::ScheduleFinish(Job& j) {
  ++j.generation;
  if (j.work_s <= 0 || j.rate <= 0) return;
  const double remaining_s = std::max(0.0, j.work_s - j.progress_s) / j.rate;
  const Time at = clock_.Now() + Duration(static_cast<int64_t>(std::ceil(remaining_s * 1000)));
  queue_.Push(at, EventKind::kFinish, IndexOf(j), j.generation);
}

void Run::Complete(Job& j) {
  FreeAllocation(j);
  RemoveWorkload(j);
  SetPhase(j, Phase::kDone);
  j.finished_at = clock_.Now();
  ++j.generation;
  if (j.work_s > 0) --finite_left_;
  if (j.service >= 0) {
    ServiceTrack& s = services_[j.service];
    s.active = false;
    s.pending.clear();
  }
  LogEvent(fmt::format("\"event\":\"finish\",\"workload\":{},\"completed\":{}", j.name_json,
                       j.completed ? "true" : "false"));
  RequestPass();
}

void Run::HandleFinish(size_t i, uint64_t generation) {
  Job& j = jobs_[i];
  if (generation != j.generation || j.phase != Phase::kRunning) return;
  AdvanceProgress(j);
  j.completed = true;
  Complete(j);
}

void Run::HandleVictimExit(size_t i, uint64_t generation) {
  Job& j = jobs_[i];
  if (generation == kShrinkGeneration) {
    if (j.alloc_index < 0) return;
    auto& pods = LiveAllocation(j).pods;
    bool any = false;
    for (auto it = j.shrinking.begin(); it != j.shrinking.end();) {
      if (it->first > clock_.Now()) {
        ++it;
        continue;
      }
      auto pos = std::find(pods.begin(), pods.end(), it->second);
      if (pos != pods.end()) {
        FreePod(j, *pos);
        pods.erase(pos);
        any = true;
      }
      std::vector<PodPlacement>& leaving = LiveAllocation(j).leaving;
      auto gone = std::find(leaving.begin(), leaving.end(), it->second);
      if (gone != leaving.end()) leaving.erase(gone);
      it = j.shrinking.erase(it);
    }
    if (any && j.phase == Phase::kRunning) SetRate(j);
    if (any) RequestPass();
    return;
  }
  if (generation != j.generation || j.phase != Phase::kTerminating) return;
  AdvanceProgress(j);
  const int gpus = j.alloc_index >= 0 ? LiveAllocation(j).gpu_count() : 0;
  if (j.work_s > 0 && j.progress_s >= j.work_s) {
    j.completed = true;
    Complete(j);
    return;
  }
  if (j.stop_for_good) {
    Complete(j);
    return;
  }
  const double lost_s = std::max(0.0, j.progress_s - j.checkpoint_progress_s);
  if (j.kind == WorkloadKind::kTraining) {
    // progress is in full-size seconds: GPU-seconds = progress x full GPUs.
    lost_gpu_seconds_ += lost_s * j.full_pods * j.gpus_per_pod;
  }
  j.progress_s = j.checkpoint_progress_s;
  j.rate = 0;
  FreeAllocation(j);
  SetPhase(j, Phase::kPending);
  j.next_checkpoint = kInfiniteFuture;
  Workload& w = LiveWorkload(j);
  w.state = WorkloadState::kPending;
  LogEvent(fmt::format("\"event\":\"exit\",\"workload\":{},\"gpus\":{},\"lost_s\":{:.3f}",
                       j.name_json, gpus, lost_s));
  RequestPass();
}

void Run::RecountReady(Job& j) {
  int ready = 0;
  for (Time t : j.pod_ready) ready += t <= clock_.Now() ? 1 : 0;
  j.ready = ready;
  if (j.service >= 0) {
    ServiceTrack& s = services_[j.service];
    s.min_ready = std::min(s.min_ready, ready);
    if (ready > 0) s.live = true;
    CheckScaleUps(s);
  }
}

void Run::HandleReplicaReady(size_t i) {
  Job& j = jobs_[i];
  if (j.phase != Phase::kRunning) return;
  const int before = j.ready;
  RecountReady(j);
  if (j.ready != before)
    LogEvent(fmt::format("\"event\":\"replica_ready\",\"workload\":{},\"ready\":{}", j.name_json,
                         j.ready));
}

// The checkpoint the engine sees when it prices victims. One event per
// checkpoint of a running job, instead of a scan of every allocation per pass;
// events of an earlier run (preempted since) no longer match next_checkpoint.
void Run::HandleCheckpoint(size_t i, Time at) {
  Job& j = jobs_[i];
  if (j.phase != Phase::kRunning || j.alloc_index < 0 || at != j.next_checkpoint) return;
  LiveAllocation(j).last_checkpoint = at;
  j.next_checkpoint = at + j.checkpoint_interval;
  queue_.Push(j.next_checkpoint, EventKind::kCheckpoint, i);
}

void Run::CheckScaleUps(ServiceTrack& s) {
  if (s.pending.empty()) return;
  const Job& j = jobs_[s.job];
  for (auto it = s.pending.begin(); it != s.pending.end();) {
    if (j.ready >= std::min(it->to, s.desired)) {
      const double ttc = Sec(clock_.Now() - it->at);
      ttc_s_.push_back(ttc);
      ++scale_up_resolved_;
      if (!it->failed && clock_.Now() - it->at <= options_.scale_up_bound) ++scale_up_ok_;
      it = s.pending.erase(it);
    } else {
      ++it;
    }
  }
}

void Run::HandleLoadStep() {
  const Time now = clock_.Now();
  // Score the step that just ended over the replicas ready during all of it.
  for (ServiceTrack& s : services_) {
    s.last_missed = s.last_cold = false;
    if (!s.scored) continue;
    s.scored = false;
    const InferenceSpec& spec = input_.workloads[s.job].workload.inference;
    const double target_ms = static_cast<double>(spec.target_p99.count());
    bool met = true;
    if (s.rps > 0) {
      const QueueLatency lat = ColocationController::ModelServiceLatency(spec, s.rps, s.min_ready);
      if (!lat.stable || !std::isfinite(lat.p99_ms)) {
        met = false;  // unserved load
      } else {
        step_p99_ms_.push_back(lat.p99_ms);
        if (target_ms > 0 && lat.p99_ms > target_ms) met = false;
      }
    }
    ++service_steps_;
    if (!met) {
      LogEvent(fmt::format("\"event\":\"slo_miss\",\"workload\":{},\"step_start\":{:.3f},\"rps\":{:.3f},"
                           "\"ready\":{},\"desired\":{},\"scaling_up\":{}",
                           jobs_[s.job].name_json, Sec(now - options_.load_step), s.rps, s.min_ready,
                           s.desired, s.starting_in_step || !s.pending.empty() ? "true" : "false"));
      ++service_misses_;
      for (ScaleUp& u : s.pending) u.failed = true;
      s.last_missed = true;
      s.last_cold = s.starting_in_step || !s.pending.empty();
    }
  }
  if ((now - Time()) % options_.sample_interval == Duration(0)) Sample();
  // Open the next step: observe its load.
  for (ServiceTrack& s : services_) {
    s.starting_in_step = !s.pending.empty();
    if (!s.active) continue;
    const Job& j = jobs_[s.job];
    double rps = input_.load.Rps(s.name, Sec(now));
    if (options_.load_noise > 0 && rps > 0)
      rps = std::max(0.0, rps * (1 + options_.load_noise * (2 * rng_.Uniform() - 1)));
    s.rps = rps;
    s.scored = s.live;
    s.min_ready = j.ready;
    controller_.ObserveLoad(WorkloadId(static_cast<uint64_t>(s.job) + 1), now, rps);
  }
  queue_.Push(now + options_.load_step, EventKind::kLoadStep);
  if (!services_.empty()) RequestPass();
}

void Run::Sample() {
  const Time now = clock_.Now();
  series_.t_s.push_back(Sec(now));
  for (int k = 0; k < 4; ++k) series_.gpus_by_kind[k].push_back(gpus_by_kind_[k]);
  series_.lent_gpus.push_back(lent_gpus_);
  series_.loans.push_back(loans_since_sample_);
  series_.returns.push_back(returns_since_sample_);
  loans_since_sample_ = returns_since_sample_ = 0;
  series_.training_queue.push_back(pending_training_);
  for (ServiceTrack& s : services_) {
    TimeSeries::Service& ts = series_.services[s.series];
    const Job& j = jobs_[s.job];
    const InferenceSpec& spec = input_.workloads[s.job].workload.inference;
    const double rps = s.active ? input_.load.Rps(s.name, Sec(now)) : 0;
    ts.rps.push_back(rps);
    ts.capacity_rps.push_back(j.ready * spec.replica_capacity_rps);
    double p99 = 0;
    if (rps > 0) {
      const QueueLatency lat = ColocationController::ModelServiceLatency(spec, rps, j.ready);
      p99 = lat.stable && std::isfinite(lat.p99_ms) ? lat.p99_ms : -1;
    }
    ts.p99_ms.push_back(p99);
    ts.ready.push_back(j.ready);
    ts.desired.push_back(s.desired);
    ts.slo_miss.push_back(s.last_missed ? 1 : 0);
    ts.cold_start_miss.push_back(s.last_cold ? 1 : 0);
  }
}

void Run::HandlePass() {
  next_pass_ = kInfiniteFuture;
  const Time now = clock_.Now();
  // Nothing changed, nothing waits, no load to follow and no debug clock
  // running: the pass would decide nothing, so it is skipped.
  if (!changed_since_pass_ && pending_count_ == 0 && running_debug_ == 0 && services_.empty()) {
    next_pass_ = now + options_.pass_interval;
    queue_.Push(next_pass_, EventKind::kPass);
    return;
  }
  last_pass_ = now;
  snap_.now = now;
  const auto wall0 = std::chrono::steady_clock::now();
  Status s = RefreshPriorities();
  if (!s.ok()) {
    error_ = s.WithContext("deriving priorities: ");
    return;
  }
  Decisions pre;
  if (colocation_relevant_) {
    pre = controller_.Prepare(snap_);
    AfterPrepare();
  }
  Decisions eng = scheduler_.Schedule(snap_);
  const auto wall1 = std::chrono::steady_clock::now();
  cycle_ms_.push_back(std::chrono::duration<double, std::milli>(wall1 - wall0).count());
  ++cycles_;
  changed_since_pass_ = false;
  ApplyDecisions(pre);
  ApplyDecisions(eng);
  next_pass_ = std::min(next_pass_, now + options_.pass_interval);
  queue_.Push(next_pass_, EventKind::kPass);
}

void Run::AfterPrepare() {
  const ColocationStatus& st = controller_.status();
  if (!st.newly_lent.empty() || !st.returned.empty()) {
    lent_gpus_ = 0;
    for (size_t n = 0; n < snap_.lent_nodes.size(); ++n)
      if (snap_.lent_nodes[n]) lent_gpus_ += snap_.cluster.nodes[n].gpu_count;
  }
  for (NodeId n : st.newly_lent) {
    ++loans_since_sample_;
    LogEvent(fmt::format("\"event\":\"lend\",\"node\":{}",
                         nlohmann::json(snap_.cluster.node(n).name).dump()));
  }
  for (NodeId n : st.returned) {
    ++returns_since_sample_;
    if (n.value() < node_borrowed_pods_.size() && node_borrowed_pods_[n.value()] > 0 &&
        !reclaim_started_.count(n.value())) {
      reclaim_started_[n.value()] = clock_.Now();
      ++reclaims_;
    }
    LogEvent(fmt::format("\"event\":\"return\",\"node\":{}",
                         nlohmann::json(snap_.cluster.node(n).name).dump()));
  }
  for (ServiceTrack& s : services_) {
    Job& j = jobs_[s.job];
    if (j.snap_index < 0) continue;
    const int desired = LiveWorkload(j).pods;
    if (desired > s.desired && s.desired == 0) {
      // The first target is the deployment, not a scale-up.
      LogEvent(fmt::format("\"event\":\"deploy\",\"workload\":{},\"replicas\":{}", j.name_json,
                           desired));
    } else if (desired > s.desired) {
      ++scale_ups_;
      s.pending.push_back(ScaleUp{clock_.Now(), s.desired, desired, false});
      s.starting_in_step = true;
      LogEvent(fmt::format("\"event\":\"scale_up\",\"workload\":{},\"from\":{},\"to\":{}",
                           j.name_json, s.desired, desired));
    } else if (desired < s.desired) {
      LogEvent(fmt::format("\"event\":\"scale_down\",\"workload\":{},\"from\":{},\"to\":{}",
                           j.name_json, s.desired, desired));
    }
    s.desired = desired;
    CheckScaleUps(s);
  }
}

void Run::ApplyDecisions(const Decisions& d) {
  for (const PreemptDecision& p : d.preempts) ApplyPreempt(p);
  for (const ResizeDecision& r : d.resizes) ApplyResize(r);
  for (const PlaceDecision& p : d.places) ApplyPlace(p);
  for (const RejectDecision& r : d.rejects) ApplyReject(r);
}

void Run::ApplyPreempt(const PreemptDecision& d) {
  Job* jp = JobOf(d.victim);
  if (jp == nullptr || jp->phase == Phase::kTerminating) return;  // already noticed
  if (jp->phase != Phase::kRunning) {
    ++invalid_;
    return;
  }
  Job& j = *jp;
  const Time now = clock_.Now();
  Time grace = d.grace_deadline;
  if (grace < now || grace == kInfiniteFuture) grace = now + policy_.preemption.default_grace;
  Time exit = grace;
  if (d.cause == PreemptCause::kMaxRuntime || d.cause == PreemptCause::kIdle) {
    j.stop_for_good = true;
  } else if (j.checkpoint_interval.count() > 0) {
    exit = std::min(grace, now + options_.checkpoint_save);
  }
  Allocation& a = LiveAllocation(j);
  a.terminating = true;
  a.grace_deadline = grace;
  LiveWorkload(j).state = WorkloadState::kTerminating;
  SetPhase(j, Phase::kTerminating);
  if (j.kind == WorkloadKind::kTraining && !j.stop_for_good) {
    ++training_preemptions_;
    j.noticed_at = now;
  } else if (!j.stop_for_good) {
    j.noticed_at = now;
  }
  ++j.generation;
  queue_.Push(exit, EventKind::kVictimExit, IndexOf(j), j.generation);
  LogEvent(fmt::format("\"event\":\"preempt\",\"workload\":{},\"cause\":\"{}\",\"gpus\":{},"
                       "\"exit_at\":{:.3f}",
                       j.name_json, PreemptCauseName(d.cause), a.gpu_count(), Sec(exit)));
}

void Run::ApplyResize(const ResizeDecision& d) {
  Job* jp = JobOf(d.workload);
  if (jp == nullptr || jp->phase != Phase::kRunning || jp->alloc_index < 0) {
    ++invalid_;
    return;
  }
  Job& j = *jp;
  const Time now = clock_.Now();
  for (const PodPlacement& p : d.added) {
    if (!ValidPod(p)) {
      ++invalid_;
      return;
    }
  }
  Allocation& a = LiveAllocation(j);
  for (const PodPlacement& p : d.added) {
    TakePod(j, p);
    a.pods.push_back(p);
    if (j.kind == WorkloadKind::kInference) {
      const Time ready = now + EstimateColdStart(LiveWorkload(j).inference);
      j.pod_ready.push_back(ready);
      queue_.Push(ready, EventKind::kReplicaReady, IndexOf(j));
    }
  }
  for (const PodPlacement& p : d.removed) {
    auto pos = std::find(a.pods.begin(), a.pods.end(), p);
    if (pos == a.pods.end()) {
      ++invalid_;
      continue;
    }
    if (j.kind == WorkloadKind::kInference) {
      const size_t k = static_cast<size_t>(pos - a.pods.begin());
      FreePod(j, *pos);
      a.pods.erase(pos);
      if (k < j.pod_ready.size()) j.pod_ready.erase(j.pod_ready.begin() + static_cast<long>(k));
    } else {
      // Removed pods keep their GPUs until they have saved and exited; the
      // engine sees them as leaving meanwhile (not to be stopped or regrown).
      if (std::find(a.leaving.begin(), a.leaving.end(), p) == a.leaving.end()) a.leaving.push_back(p);
      Time grace = d.grace_deadline;
      if (grace < now || grace == kInfiniteFuture) grace = now + policy_.preemption.default_grace;
      const Time leave = j.checkpoint_interval.count() > 0
                             ? std::min(grace, now + options_.checkpoint_save)
                             : grace;
      j.shrinking.emplace_back(leave, p);
      queue_.Push(leave, EventKind::kVictimExit, IndexOf(j), kShrinkGeneration);
    }
  }
  if (j.kind == WorkloadKind::kInference) {
    RecountReady(j);
  } else if (!d.added.empty()) {
    SetRate(j);
  }
  LogEvent(fmt::format("\"event\":\"resize\",\"workload\":{},\"from\":{},\"to\":{},\"added\":{},"
                       "\"removed\":{}",
                       j.name_json, d.from_pods, d.to_pods, d.added.size(), d.removed.size()));
}

void Run::ApplyPlace(const PlaceDecision& d) {
  Job* jp = JobOf(d.workload);
  if (jp == nullptr || jp->phase != Phase::kPending || d.pods.empty()) {
    ++invalid_;
    return;
  }
  Job& j = *jp;
  // All pods or none: a decision that double-books a GPU is refused whole.
  for (size_t k = 0; k < d.pods.size(); ++k) {
    if (!ValidPod(d.pods[k])) {
      ++invalid_;
      return;
    }
    for (size_t m = 0; m < k; ++m)
      if (d.pods[m].node == d.pods[k].node && (d.pods[m].gpus & d.pods[k].gpus) != 0) {
        ++invalid_;
        return;
      }
  }
  const Time now = clock_.Now();
  Workload& w = LiveWorkload(j);
  if (w.is_gang() && j.kind == WorkloadKind::kTraining) {
    ++gang_places_;
    if (static_cast<int>(d.pods.size()) < w.min_pods) ++gang_partial_;
  }
  Allocation a;
  a.workload = w.id;
  a.pods = d.pods;
  a.start_time = now;
  a.last_checkpoint = now;
  a.borrowed = d.borrowed;
  for (const PodPlacement& p : a.pods) TakePod(j, p);
  j.alloc_index = static_cast<int>(snap_.allocations.size());
  snap_.allocation_gpus.push_back(a.gpu_count());
  snap_.allocations.push_back(std::move(a));
  w.state = WorkloadState::kRunning;
  SetPhase(j, Phase::kRunning);
  if (j.checkpoint_interval.count() > 0) {
    j.next_checkpoint = now + j.checkpoint_interval;
    queue_.Push(j.next_checkpoint, EventKind::kCheckpoint, IndexOf(j));
  }
  if (!j.first_start) j.first_start = now;
  if (j.noticed_at) {
    if (j.kind == WorkloadKind::kTraining) recovery_s_.push_back(Sec(now - *j.noticed_at));
    j.noticed_at.reset();
  }
  j.run_start = now;
  j.segment_start = now;
  if (j.kind == WorkloadKind::kInference) {
    const Time ready = now + EstimateColdStart(w.inference);
    j.pod_ready.assign(d.pods.size(), ready);
    queue_.Push(ready, EventKind::kReplicaReady, IndexOf(j));
  }
  SetRate(j);
  LogEvent(fmt::format("\"event\":\"place\",\"workload\":{},\"pods\":{},\"gpus\":{},"
                       "\"borrowed\":{},\"waited_s\":{:.3f}",
                       j.name_json, d.pods.size(), LiveAllocation(j).gpu_count(),
                       d.borrowed ? "true" : "false", Sec(now - j.submit)));
}

void Run::ApplyReject(const RejectDecision& d) {
  Job* jp = JobOf(d.workload);
  if (jp == nullptr || jp->phase != Phase::kPending) return;
  LogEvent(fmt::format("\"event\":\"reject\",\"workload\":{},\"reason\":\"{}\",\"detail\":{}",
                       jp->name_json, ReasonCodeName(d.reason), nlohmann::json(d.detail).dump()));
  Complete(*jp);
}

StatusOr<SimResult> Run::Go() {
  const auto wall0 = std::chrono::steady_clock::now();
  TIDAL_RETURN_IF_ERROR(Init());
  Loop();
  if (!error_.ok()) return error_;
  const auto wall1 = std::chrono::steady_clock::now();
  const Time end = clock_.Now();

  SimResult r;
  Summary& s = r.summary;
  s.policy = options_.policy_name;
  s.colocation = std::string(ColocationModeName(policy_.colocation.mode));
  s.seed = options_.seed;
  s.sim_duration_s = Sec(end);
  s.sim_wall_s =
      options_.wall_times ? std::chrono::duration<double>(wall1 - wall0).count() : 0.0;

  std::vector<double> train_wait, jct, debug_wait;
  int batch_met = 0;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Job& j = jobs_[i];
    if (j.phase == Phase::kNotArrived) continue;
    const double wait = j.first_start ? Sec(*j.first_start - j.submit) : Sec(end - j.submit);
    switch (j.kind) {
      case WorkloadKind::kTraining:
        ++s.training.jobs;
        train_wait.push_back(wait);
        if (j.first_start) ++s.training.started;
        if (j.completed) {
          ++s.training.completed;
          jct.push_back(Sec(j.finished_at - j.submit));
        }
        break;
      case WorkloadKind::kInference: break;
      case WorkloadKind::kBatchInference:
        ++s.batch_inference.jobs;
        if (j.completed) {
          ++s.batch_inference.completed;
          if (j.finished_at <= j.deadline) ++batch_met;
        }
        break;
      case WorkloadKind::kDebug:
        ++s.debug.jobs;
        debug_wait.push_back(wait);
        break;
    }
  }
  s.training.queue_wait_mean_s = Mean(train_wait);
  s.training.queue_wait_p50_s = Percentile(train_wait, 0.50);
  s.training.queue_wait_p95_s = Percentile(train_wait, 0.95);
  s.training.queue_wait_p99_s = Percentile(train_wait, 0.99);
  s.training.jct_mean_s = Mean(jct);
  s.training.gang_partial_starts = gang_partial_;
  s.training.gang_start_success_rate =
      gang_places_ > 0 ? static_cast<double>(gang_places_ - gang_partial_) / gang_places_ : 1.0;
  s.training.preemptions = training_preemptions_;
  s.training.lost_gpu_hours = lost_gpu_seconds_ / 3600.0;
  s.training.recovery_time_p50_s = Percentile(recovery_s_, 0.50);
  s.training.recovery_time_p95_s = Percentile(recovery_s_, 0.95);

  s.inference.services = inference_workloads_;
  s.inference.service_minutes = service_steps_;
  s.inference.slo_miss_minutes = service_misses_;
  s.inference.slo_attainment =
      service_steps_ > 0 ? 1.0 - static_cast<double>(service_misses_) / service_steps_ : 1.0;
  s.inference.latency_p95_ms = Percentile(step_p99_ms_, 0.95);
  s.inference.latency_p99_ms = Percentile(step_p99_ms_, 0.99);
  // Scale-ups still starting at the end count only once past their bound.
  int unresolved_failed = 0;
  for (const ServiceTrack& sv : services_)
    for (const ScaleUp& u : sv.pending)
      if (end - u.at > options_.scale_up_bound) ++unresolved_failed;
  s.inference.scale_ups = scale_ups_;
  const int judged = scale_up_resolved_ + unresolved_failed;
  s.inference.scale_up_success_rate =
      judged > 0 ? static_cast<double>(scale_up_ok_) / judged : 1.0;
  s.inference.time_to_capacity_p50_s = Percentile(ttc_s_, 0.50);
  s.inference.time_to_capacity_p99_s = Percentile(ttc_s_, 0.99);

  s.batch_inference.deadline_met_rate =
      s.batch_inference.jobs > 0 ? static_cast<double>(batch_met) / s.batch_inference.jobs : 1.0;
  s.debug.queue_wait_p95_s = Percentile(debug_wait, 0.95);

  s.cluster.gpus = series_.total_gpus;
  const double span = Sec(end);
  s.cluster.gpu_allocation_ratio =
      span > 0 && series_.total_gpus > 0 ? allocated_area_ / (span * series_.total_gpus) : 0;
  s.cluster.borrowed_gpu_hours = borrowed_area_ / 3600.0;
  s.cluster.training_gpu_hours = kind_area_[0] / 3600.0;
  s.cluster.inference_gpu_hours = kind_area_[1] / 3600.0;
  s.cluster.batch_gpu_hours = kind_area_[2] / 3600.0;
  s.cluster.debug_gpu_hours = kind_area_[3] / 3600.0;
  s.cluster.reclaims = reclaims_;
  s.cluster.reclaim_latency_p95_s = Percentile(reclaim_s_, 0.95);

  s.scheduler.cycles = cycles_;
  s.scheduler.cycle_p50_ms = options_.wall_times ? Percentile(cycle_ms_, 0.50) : 0;
  s.scheduler.cycle_p99_ms = options_.wall_times ? Percentile(cycle_ms_, 0.99) : 0;
  s.scheduler.invalid_decisions = invalid_;
  r.series = std::move(series_);
  return r;
}

}  // namespace

StatusOr<SimResult> RunSimulation(const SimInput& input, const SimOptions& options,
                                  std::ostream* events) {
  if (options.pass_interval <= Duration(0) || options.load_step <= Duration(0) ||
      options.sample_interval <= Duration(0))
    return InvalidArgument("pass_interval, load_step and sample_interval must be > 0");
  Run run(input, options, events);
  return run.Go();
}

}  // namespace tidal::sim
