#include "sim/simulator.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/colocation/colocation_controller.h"
#include "core/common/rng.h"
#include "core/diagnosis/slo_diagnosis.h"
#include "core/diagnosis/wait_diagnosis.h"
#include "core/engine/scheduler.h"
#include "core/model/lost_work.h"
#include "core/state/state_machine.h"
#include "sim/event_queue.h"

namespace tidal::sim {
namespace {

// A VictimExit event with this generation applies due shrinks instead.
constexpr uint64_t kShrinkGeneration = std::numeric_limits<uint64_t>::max();

// The recovery cause of work requeued without a notice: its node was lost.
constexpr std::string_view kNodeLost = "node_lost";

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
  uint64_t runs = 0;          // placements so far; idle events carry it
  double idle_after_s = -1;   // debug: GPUs idle this long after each start

  std::optional<Time> first_start;
  std::optional<Time> noticed_at;  // the preemption notice, for recovery time
  std::string_view recovery_cause;  // the notice's cause, or node_lost
  int noticed_gpus = 0;            // GPUs held when noticed
  bool stop_for_good = false;      // a max-runtime stop: done at exit
  bool completed = false;
  Time finished_at;

  QueueId queue;
  ProjectId project;
  int gpus_held = 0;
  Time next_checkpoint = kInfiniteFuture;

  std::string name_json;

  // Inference: each pod and when it is ready.
  int service = -1;
  struct PodReady {
    PodPlacement pod;
    Time at;                // when its cold start ends
    bool reported = false;  // a ReplicaReadyEdit told the state
  };
  std::vector<PodReady> pod_ready;
  int ready = 0;
  // Training: its first wait, charged to the engine's reasons (allocated
  // at its first explained wait).
  std::unique_ptr<diagnosis::WaitTally> wait_tally;
  // Training shrinks in flight: pods leave at the given time.
  std::vector<std::pair<Time, PodPlacement>> shrinking;
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
  Time last_opened = Time::min();  // the request time of the last scale-up counted
  bool last_missed = false;       // verdict of the last scored step
  bool last_cold = false;         // ... missed while replicas were starting
  size_t series = 0;         // index in TimeSeries::services
  // The forecaster's expected rate for a later step, (due, rps), scored
  // against the load observed when the step opens (forecast_error_mape).
  std::deque<std::pair<Time, double>> forecasts;
};

// The simulated world around one StateMachine: arrivals, finishes, victim
// exits, checkpoints and replica readiness are edits the world applies; the
// machine's own edits (decisions, timers) come back through its sink into
// React, which keeps the world's model (progress, events, metrics) in step.
class Run final : public state::StateObserver {
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

  void OnPodBound(const Workload& w, const PodPlacement& pod) override;
  void OnPodFreed(const Workload& w, const PodPlacement& pod) override;

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
  void FeedLoadHistory();
  void HandleAgentLost(size_t node);
  void HandleGpuFault(uint64_t node_and_gpu);
  void HandleIdle(size_t job_index, uint64_t run);
  void HandlePass();
  bool Done() const;

  // Applies a world edit; an edit the state refuses is a simulator bug.
  void ApplyWorld(const state::Edit& edit);
  void CountRefused(const state::ApplyOutcome& outcome);
  void LogRejects(const std::vector<RejectDecision>& rejects);
  // Edits the world makes at once in answer to the machine's (a service's
  // removed replicas stop), applied after the batch that caused them.
  void ApplyDeferred();
  void React(const state::Edit& edit);
  void ReactSubmit(const state::SubmitEdit& e);
  void ReactPlace(const state::PlaceEdit& e);
  void ReactGrow(const state::GrowEdit& e);
  void ReactNotice(const state::NoticeEdit& e);
  void ReactShrink(const state::ShrinkEdit& e);
  void ReactPodExit(const state::PodExitEdit& e);
  void ReactRequeue(const state::RequeueEdit& e);
  void ReactRelease(const state::ReleaseEdit& e);
  void AfterPrepare();

  Job& JobOf(WorkloadId id) { return jobs_[id.value() - 1]; }
  size_t IndexOf(const Job& j) const { return static_cast<size_t>(&j - jobs_.data()); }
  WorkloadId IdOf(const Job& j) const { return WorkloadId(IndexOf(j) + 1); }
  const Snapshot& snap() const { return machine_->state().snapshot(); }
  const Workload* LiveWorkload(const Job& j) const { return machine_->state().workload(IdOf(j)); }
  const Allocation* LiveAllocation(const Job& j) const { return machine_->state().allocation(IdOf(j)); }

  // The world's side of losing an allocation: no replicas, no shrinks.
  void AllocationGone(Job& j);
  void SetPhase(Job& j, Phase phase);
  void AdvanceProgress(Job& j);
  void SetRate(Job& j);
  void ScheduleFinish(Job& j);
  void RequestPass();
  void AccumulateAreas();
  void RecountReady(Job& j);
  // The state holds a pending scale-up of the service (State::scale_up).
  bool ScalingUp(const ServiceTrack& s) const {
    return machine_->state().scale_up(IdOf(jobs_[s.job])) != nullptr;
  }
  void ReactScaleUpEnd(const state::ScaleUpEndEdit& e);
  void Sample();
  void LogEvent(std::string_view body);
  std::string PlacementJson(const std::vector<PodPlacement>& pods) const;

  const SimInput& input_;
  const SimOptions& options_;
  std::ostream* events_;
  PolicyConfig policy_;
  Scheduler scheduler_;
  ColocationController controller_;
  Rng rng_;
  ManualClock clock_;
  EventQueue queue_;
  // The committed state, its timers and the decision applier: the same ones
  // the server runs.
  std::optional<state::StateMachine> machine_;
  std::vector<state::Edit> deferred_;
  Status error_;

  std::vector<Job> jobs_;
  // Per workload id (a job's index + 1), the last reason its job's wait
  // tally was told, kNoneTold before the first, kNotTallied for work whose
  // waits are not tallied (not training, or started before). The pass
  // leaves out the waits it holds (ScheduleOptions::told_reasons).
  static constexpr uint8_t kNoneTold = 0xfe;
  static constexpr uint8_t kNotTallied = 0xff;
  static_assert(static_cast<int>(ReasonCode::kCapacity) < kNoneTold);
  std::vector<uint8_t> told_reason_;
  std::vector<ServiceTrack> services_;
  std::vector<bool> node_shared_;        // node in a shared pool
  std::vector<int> node_borrowed_pods_;  // non-inference pods on shared nodes
  std::map<uint32_t, Time> reclaim_started_;
  int inference_workloads_ = 0;
  int pending_training_ = 0;
  int running_debug_ = 0;
  int lent_gpus_ = 0;
  int lent_nodes_ = 0;
  std::vector<LoanCalendar> calendars_;
  Time next_calendar_;  // the next midnight a loan calendar is planned at
  // False when the cluster has no shared pool and the input no inference,
  // batch or debug work: Prepare could decide nothing and is not called.
  bool colocation_relevant_ = true;
  Time next_pass_ = kInfiniteFuture;
  Time last_pass_ = Time(Duration(std::numeric_limits<int64_t>::min() / 2));
  bool changed_since_pass_ = true;
  Time end_ = kInfiniteFuture;
  Time cap_ = kInfiniteFuture;
  double load_end_s_ = 0;
  int64_t history_samples_ = 0;  // load history samples fed before t = 0
  double horizon_s_ = 0;  // for progress reports: where the run is expected to stop
  uint64_t events_handled_ = 0;
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
  std::vector<double> recovery_s_;  // after a preemption notice
  std::map<std::string_view, std::vector<double>> recovery_by_cause_;  // node_lost included
  std::vector<double> ttc_s_;
  int scale_ups_ = 0;
  int scale_up_ok_ = 0;      // ScaleUpEndEdit kReady
  int scale_up_judged_ = 0;  // every ScaleUpEndEdit
  int service_steps_ = 0;
  int service_misses_ = 0;
  // The causes (core/diagnosis), as the server's reads them.
  diagnosis::SloDiagnosis slo_diag_;
  Summary::Diagnosis diag_;
  Time next_wait_explain_;
  void DiagnoseLongWait(Job& j, Time until);
  std::vector<double> step_p99_ms_;
  std::vector<double> reclaim_s_;
  int reclaims_ = 0;
  // Return lead time: per returned shared node not yet used by inference,
  // when its borrowers were gone (nullopt: still leaving); the lead is the
  // time from then to the first inference pod placed on it.
  std::map<uint32_t, std::optional<Time>> return_free_at_;
  std::vector<double> return_lead_s_;
  double forecast_ape_sum_ = 0;  // sum of |observed - forecast| / observed
  int forecast_scored_ = 0;
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
  state::State initial(input_.cluster.cluster, input_.cluster.queues, input_.cluster.projects);
  // The server's timers, but for the exit-report slack: simulated pods exit
  // exactly at their deadlines, with no report to wait for.
  state::LifecycleOptions lifecycle = state::ServerLifecycleOptions(policy_);
  lifecycle.exit_report_slack = Duration(0);
  machine_.emplace(std::move(initial), lifecycle, policy_.templates);
  machine_->set_observer(this);
  machine_->set_sink([this](Time, state::EditOrigin, const state::Edit& e) {
    slo_diag_.Observe(machine_->state(), e);
    React(e);
  });
  const Snapshot& s = snap();
  const size_t nodes = s.cluster.nodes.size();
  node_shared_.assign(nodes, false);
  node_borrowed_pods_.assign(nodes, 0);
  for (size_t n = 0; n < nodes; ++n) {
    const Node& node = s.cluster.nodes[n];
    if (node.pool.valid() && node.pool.value() < s.cluster.pools.size())
      node_shared_[n] = s.cluster.pool(node.pool).kind == PoolKind::kShared;
  }
  series_.total_gpus = s.cluster.total_gpus();

  jobs_.resize(input_.workloads.size());
  told_reason_.assign(input_.workloads.size() + 1, kNoneTold);
  double last_arrival_s = 0;
  for (size_t i = 0; i < input_.workloads.size(); ++i) {
    const SimWorkload& sw = input_.workloads[i];
    const Workload& w = sw.workload;
    if (!(sw.submit_s >= 0))
      return InvalidArgument(fmt::format("workload {}: submit time must be >= 0", w.name));
    if (w.pods < 1 || w.gpus_per_pod < 1 || w.min_pods < 1)
      return InvalidArgument(fmt::format("workload {}: pods, min_pods and gpus_per_pod must be >= 1",
                                         w.name));
    if (!w.queue.valid() || w.queue.value() >= s.queues.size())
      return InvalidArgument(fmt::format("workload {}: unknown queue", w.name));
    if (!w.project.valid() || w.project.value() >= s.projects.size())
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
    j.idle_after_s = sw.idle_after_s;
    if (j.work_s > 0) ++finite_left_;
    j.queue = w.queue;
    j.project = w.project;
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
  for (const NodeLoss& loss : input_.node_losses) {
    const auto node = std::find_if(s.cluster.nodes.begin(), s.cluster.nodes.end(),
                                   [&](const Node& n) { return n.name == loss.node; });
    if (node == s.cluster.nodes.end())
      return InvalidArgument(fmt::format("node loss: no node named {}", loss.node));
    if (!(loss.at_s >= 0)) return InvalidArgument(fmt::format("node loss of {}: time must be >= 0", loss.node));
    queue_.Push(TimeFromMillis(static_cast<int64_t>(std::llround(loss.at_s * 1000))), EventKind::kAgentLost,
                static_cast<size_t>(node - s.cluster.nodes.begin()));
  }
  for (const GpuFault& fault : input_.gpu_faults) {
    const auto node = std::find_if(s.cluster.nodes.begin(), s.cluster.nodes.end(),
                                   [&](const Node& n) { return n.name == fault.node; });
    if (node == s.cluster.nodes.end())
      return InvalidArgument(fmt::format("gpu fault: no node named {}", fault.node));
    if (fault.gpu < 0 || fault.gpu >= node->gpu_count)
      return InvalidArgument(fmt::format("gpu fault on {}: gpu must be in [0, {}), got {}", fault.node,
                                         node->gpu_count, fault.gpu));
    if (!(fault.at_s >= 0)) return InvalidArgument(fmt::format("gpu fault on {}: time must be >= 0", fault.node));
    const uint64_t index = static_cast<uint64_t>(node - s.cluster.nodes.begin());
    queue_.Push(TimeFromMillis(static_cast<int64_t>(std::llround(fault.at_s * 1000))), EventKind::kGpuFault,
                index * kMaxGpusPerNode + static_cast<uint64_t>(fault.gpu));
  }
  load_end_s_ = std::max(input_.load.end_s(), input_.load.period_s());
  horizon_s_ = options_.end_s > 0 ? options_.end_s : std::max(last_arrival_s, load_end_s_);
  if (options_.end_s > 0) {
    end_ = TimeFromMillis(static_cast<int64_t>(options_.end_s * 1000));
  } else {
    cap_ = TimeFromMillis(
        static_cast<int64_t>((last_arrival_s + load_end_s_ + 7 * 86400.0) * 1000));
  }
  colocation_relevant_ = std::find(node_shared_.begin(), node_shared_.end(), true) != node_shared_.end();
  for (const SimWorkload& sw : input_.workloads)
    if (sw.workload.kind != WorkloadKind::kTraining) colocation_relevant_ = true;
  FeedLoadHistory();
  queue_.Push(Time(), EventKind::kLoadStep);
  next_pass_ = Time();
  queue_.Push(Time(), EventKind::kPass);
  area_at_ = Time();
  return Status::Ok();
}


// The history is observed the way live load is, one sample per load step,
// so the forecaster cannot tell it from load it saw itself: its profile is
// trusted from t = 0 once the history spans a day.
void Run::FeedLoadHistory() {
  const LoadProfile& h = input_.load_history;
  if (h.services().empty()) return;
  const double shift_s = HistoryShiftS(h.end_s());
  const int64_t step_ms = options_.load_step.count();
  for (const ServiceTrack& s : services_) {
    if (!h.Has(s.name)) continue;
    const WorkloadId id(static_cast<uint64_t>(s.job) + 1);
    const double first_s = h.points(s.name).front().time_s;
    const int64_t shift_ms = std::llround(shift_s * 1000);
    // Steps on the load-step grid of the run (t = -k x step), from the
    // history's first point to just before the start.
    int64_t t_ms = -((shift_ms - std::llround(first_s * 1000)) / step_ms) * step_ms;
    for (; t_ms < 0; t_ms += step_ms) {
      controller_.ObserveLoad(id, TimeFromMillis(t_ms), h.Rps(s.name, (t_ms + shift_ms) / 1000.0));
      ++history_samples_;
    }
  }
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
  }
  area_at_ = clock_.Now();
}


void Run::Loop() {
  const auto wall0 = std::chrono::steady_clock::now();
  auto last_report = wall0;
  auto report = [&](std::chrono::steady_clock::time_point now) {
    last_report = now;
    options_.on_progress(SimProgress{Sec(clock_.Now()), horizon_s_,
                                     std::chrono::duration<double>(now - wall0).count(),
                                     events_handled_});
  };
  while (!queue_.empty() && error_.ok()) {
    if (queue_.top().at > end_) break;
    // The clock is read every 1024 events only: it costs more than most events.
    if (options_.on_progress && (++events_handled_ & 1023) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - last_report).count() >= options_.progress_interval_s)
        report(now);
    }
    const Event e = queue_.Pop();
    clock_.Set(e.at);
    machine_->AdvanceTo(e.at);
    AccumulateAreas();
    switch (e.kind) {
      case EventKind::kArrival: HandleArrival(e.subject); break;
      case EventKind::kFinish: HandleFinish(e.subject, e.generation); break;
      case EventKind::kVictimExit: HandleVictimExit(e.subject, e.generation); break;
      case EventKind::kReplicaReady: HandleReplicaReady(e.subject); break;
      case EventKind::kCheckpoint: HandleCheckpoint(e.subject, e.at); break;
      case EventKind::kLoadStep: HandleLoadStep(); break;
      case EventKind::kAgentLost: HandleAgentLost(e.subject); break;
      case EventKind::kGpuFault: HandleGpuFault(e.subject); break;
      case EventKind::kIdle: HandleIdle(e.subject, e.generation); break;
      case EventKind::kPass:
        if (e.at == next_pass_) HandlePass();
        break;
    }
    if (Done()) break;
  }
  if (end_ != kInfiniteFuture) clock_.Set(std::max(clock_.Now(), end_));
  AccumulateAreas();
  if (options_.on_progress) report(std::chrono::steady_clock::now());
}

void Run::RequestPass() {
  changed_since_pass_ = true;
  const Time at = std::max(clock_.Now(), last_pass_ + options_.min_pass_gap);
  if (at < next_pass_) {
    next_pass_ = at;
    queue_.Push(at, EventKind::kPass);
  }
}

void Run::ApplyWorld(const state::Edit& edit) {
  if (!error_.ok()) return;
  if (Status s = machine_->Apply(edit); !s.ok()) {
    error_ = s.WithContext(fmt::format("simulator: {} at t={:.3f}s: ", state::EditName(edit), Sec(clock_.Now())));
  }
}

void Run::HandleArrival(size_t i) {
  Job& j = jobs_[i];
  --unarrived_;
  Workload w = input_.workloads[i].workload;
  w.id = WorkloadId(i + 1);
  w.submit_time = j.submit;
  w.state = WorkloadState::kPending;
  ApplyWorld(state::SubmitEdit{std::move(w)});
}

void Run::ReactSubmit(const state::SubmitEdit& e) {
  Job& j = JobOf(e.workload.id);
  SetPhase(j, Phase::kPending);
  if (j.service >= 0) {
    ServiceTrack& s = services_[j.service];
    s.active = true;
    s.rps = input_.load.Rps(s.name, Sec(clock_.Now()));
    controller_.ObserveLoad(e.workload.id, clock_.Now(), s.rps);
  }
  LogEvent(fmt::format("\"event\":\"submit\",\"workload\":{},\"kind\":\"{}\",\"pods\":{},"
                       "\"gpus_per_pod\":{}",
                       j.name_json, WorkloadKindName(j.kind), e.workload.pods, e.workload.gpus_per_pod));
  RequestPass();
}

void Run::OnPodBound(const Workload& w, const PodPlacement& p) {
  Job& j = JobOf(w.id);
  const int g = std::popcount(p.gpus);
  j.gpus_held += g;
  allocated_gpus_ += g;
  gpus_by_kind_[KindIndex(j.kind)] += g;
  if (node_shared_[p.node.value()] && j.kind != WorkloadKind::kInference) {
    borrowed_gpus_ += g;
    ++node_borrowed_pods_[p.node.value()];
  }
  if (j.kind == WorkloadKind::kInference) {
    // The first replica on a returned node: inference needed it now. A
    // replica placed while borrowers still leave counts as a lead of 0.
    auto it = return_free_at_.find(p.node.value());
    if (it != return_free_at_.end()) {
      return_lead_s_.push_back(it->second ? Sec(clock_.Now() - *it->second) : 0.0);
      return_free_at_.erase(it);
    }
  }
}

void Run::OnPodFreed(const Workload& w, const PodPlacement& p) {
  Job& j = JobOf(w.id);
  const int g = std::popcount(p.gpus);
  j.gpus_held -= g;
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
      auto pending = return_free_at_.find(p.node.value());
      if (pending != return_free_at_.end() && !pending->second) pending->second = clock_.Now();
    }
  }
}

void Run::AllocationGone(Job& j) {
  j.shrinking.clear();
  j.pod_ready.clear();
  if (j.ready != 0) {
    j.ready = 0;
    if (j.service >= 0) {
      ServiceTrack& s = services_[j.service];
      s.min_ready = std::min(s.min_ready, 0);
    }
  }
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
  const Allocation* a = LiveAllocation(j);
  const int pods = a != nullptr ? static_cast<int>(a->pods.size()) : 0;
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


void Run::HandleFinish(size_t i, uint64_t generation) {
  Job& j = jobs_[i];
  if (generation != j.generation || j.phase != Phase::kRunning) return;
  AdvanceProgress(j);
  j.completed = true;
  ApplyWorld(state::ReleaseEdit{IdOf(j), WorkloadState::kSucceeded});
}

void Run::HandleVictimExit(size_t i, uint64_t generation) {
  Job& j = jobs_[i];
  if (generation == kShrinkGeneration) {
    // Shrunk pods whose time has come exit; the lifecycle may have let
    // them go already at their deadline.
    for (auto it = j.shrinking.begin(); it != j.shrinking.end();) {
      if (it->first > clock_.Now()) {
        ++it;
        continue;
      }
      const PodPlacement pod = it->second;
      it = j.shrinking.erase(it);
      const Allocation* a = LiveAllocation(j);
      if (a != nullptr && std::find(a->leaving.begin(), a->leaving.end(), pod) != a->leaving.end()) {
        ApplyWorld(state::PodExitEdit{IdOf(j), pod});
      }
    }
    return;
  }
  if (generation != j.generation || j.phase != Phase::kTerminating) return;
  AdvanceProgress(j);
  if (j.work_s > 0 && j.progress_s >= j.work_s) {
    j.completed = true;
    ApplyWorld(state::ReleaseEdit{IdOf(j), WorkloadState::kSucceeded});
  } else if (j.stop_for_good) {
    ApplyWorld(state::ReleaseEdit{IdOf(j), WorkloadState::kCancelled});
  } else {
    ApplyWorld(state::RequeueEdit{IdOf(j)});
  }
}

// The agent's last heartbeat is now: its lease runs out one node_lease
// later, and the lifecycle (at the first pass past it) declares the node
// lost and requeues its work, the server's path exactly.
void Run::HandleAgentLost(size_t node) {
  const NodeId n(static_cast<uint32_t>(node));
  LogEvent(fmt::format("\"event\":\"agent_lost\",\"node\":{}",
                       nlohmann::json(snap().cluster.node(n).name).dump()));
  ApplyWorld(state::LeaseEdit{n, clock_.Now() + options_.node_lease});
}

// The agent's heartbeat reports the fault: the node is cordoned and
// degraded, and the lifecycle drains it at the next pass, the server's path.
void Run::HandleGpuFault(uint64_t node_and_gpu) {
  const NodeId n(static_cast<uint32_t>(node_and_gpu / kMaxGpusPerNode));
  const int gpu = static_cast<int>(node_and_gpu % kMaxGpusPerNode);
  const GpuMask bit = GpuMask{1} << gpu;
  if (snap().cluster.node(n).failed_gpus & bit) return;  // reported before
  LogEvent(fmt::format("\"event\":\"gpu_fault\",\"node\":{},\"gpu\":{}",
                       nlohmann::json(snap().cluster.node(n).name).dump(), gpu));
  ApplyWorld(state::GpuFaultEdit{n, bit});
  ApplyWorld(state::NodeHealthEdit{n, Health::kDegraded});
}

// A debug session of this run went idle: reported as the server's agent
// would, with the reclaim time the server's idle limit gives.
void Run::HandleIdle(size_t i, uint64_t run) {
  Job& j = jobs_[i];
  if (j.phase != Phase::kRunning || run != j.runs) return;
  ApplyWorld(state::IdleEdit{IdOf(j), clock_.Now() + options_.debug_idle_limit});
}

void Run::RecountReady(Job& j) {
  int ready = 0;
  for (const Job::PodReady& p : j.pod_ready) ready += p.at <= clock_.Now() ? 1 : 0;
  j.ready = ready;
  if (j.service >= 0) {
    ServiceTrack& s = services_[j.service];
    s.min_ready = std::min(s.min_ready, ready);
    if (ready > 0) s.live = true;
  }
}

void Run::HandleReplicaReady(size_t i) {
  Job& j = jobs_[i];
  if (j.phase != Phase::kRunning) return;
  // The cold-start model says these replicas are up: the state counts them
  // (the server's pod "ready" event), and a pending scale-up is judged from
  // them by the Lifecycle.
  for (Job::PodReady& p : j.pod_ready) {
    if (p.reported || p.at > clock_.Now()) continue;
    p.reported = true;
    ApplyWorld(state::ReplicaReadyEdit{IdOf(j), p.pod, true});
  }
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
  if (j.phase != Phase::kRunning || LiveAllocation(j) == nullptr || at != j.next_checkpoint) return;
  ApplyWorld(state::CheckpointEdit{IdOf(j), at});
  j.next_checkpoint = at + j.checkpoint_interval;
  queue_.Push(j.next_checkpoint, EventKind::kCheckpoint, i);
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
      const diagnosis::MissDiagnosis why = slo_diag_.DiagnoseMiss(
          machine_->state(), diagnosis::MissObservation{WorkloadId(static_cast<uint64_t>(s.job) + 1),
                                                        now - options_.load_step, now, s.rps, s.min_ready});
      ++diag_.slo_miss_minutes_by_cause[static_cast<int>(why.cause)];
      LogEvent(fmt::format("\"event\":\"slo_miss\",\"workload\":{},\"step_start\":{:.3f},\"rps\":{:.3f},"
                           "\"ready\":{},\"desired\":{},\"scaling_up\":{},\"cause\":\"{}\",\"detail\":{}",
                           jobs_[s.job].name_json, Sec(now - options_.load_step), s.rps, s.min_ready,
                           s.desired, s.starting_in_step || ScalingUp(s) ? "true" : "false",
                           diagnosis::MissCauseName(why.cause), nlohmann::json(why.detail).dump()));
      ++service_misses_;
      // A miss does not fail a scale-up: only its timeout does, in the
      // Lifecycle, as on the server (docs/colocation.md, "Scale-up success").
      s.last_missed = true;
      s.last_cold = s.starting_in_step || ScalingUp(s);
    }
  }
  if ((now - Time()) % options_.sample_interval == Duration(0)) Sample();
  // Open the next step: observe its load.
  for (ServiceTrack& s : services_) {
    s.starting_in_step = ScalingUp(s);
    if (!s.active) continue;
    const Job& j = jobs_[s.job];
    double rps = input_.load.Rps(s.name, Sec(now));
    if (options_.load_noise > 0 && rps > 0)
      rps = std::max(0.0, rps * (1 + options_.load_noise * (2 * rng_.Uniform() - 1)));
    s.rps = rps;
    s.scored = s.live;
    s.min_ready = j.ready;
    const WorkloadId id(static_cast<uint64_t>(s.job) + 1);
    controller_.ObserveLoad(id, now, rps);
    // Score the forecasts made one horizon ago for now, then forecast one
    // horizon ahead (the policy's forecast_horizon: the loans' look-ahead).
    while (!s.forecasts.empty() && s.forecasts.front().first <= now) {
      if (s.forecasts.front().first == now && rps > 0) {
        forecast_ape_sum_ += std::abs(rps - s.forecasts.front().second) / rps;
        ++forecast_scored_;
      }
      s.forecasts.pop_front();
    }
    const Time due = now + controller_.config().forecast_horizon;
    s.forecasts.emplace_back(due, controller_.forecaster().Forecast(id, due));
  }
  queue_.Push(now + options_.load_step, EventKind::kLoadStep);
  if (!services_.empty()) RequestPass();
}

void Run::Sample() {
  const Time now = clock_.Now();
  series_.t_s.push_back(Sec(now));
  for (int k = 0; k < 4; ++k) series_.gpus_by_kind[k].push_back(gpus_by_kind_[k]);
  series_.lent_gpus.push_back(lent_gpus_);
  series_.lent_nodes.push_back(lent_nodes_);
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
  // Nothing changed, nothing waits, no load to follow, no debug clock
  // running and no timer due: the pass would decide nothing, so it is skipped.
  if (!changed_since_pass_ && pending_count_ == 0 && running_debug_ == 0 && services_.empty() &&
      machine_->lifecycle().next_deadline() > now) {
    next_pass_ = now + options_.pass_interval;
    queue_.Push(next_pass_, EventKind::kPass);
    return;
  }
  last_pass_ = now;
  // What this pass's own edits change asks for the next one.
  changed_since_pass_ = false;
  const auto wall0 = std::chrono::steady_clock::now();
  machine_->Tick();
  Status s = machine_->RefreshPriorities();
  if (!s.ok()) {
    error_ = s.WithContext("deriving priorities: ");
    return;
  }
  if (colocation_relevant_) {
    const ColocationPlan plan = controller_.Prepare(snap());
    LogRejects(plan.decisions.rejects);
    CountRefused(machine_->ApplyPlan(plan));
    AfterPrepare();
    ApplyDeferred();
  }
  // The simulator reports what happened, not why work waited: it asks for
  // no wait explanations, and the pass decides the same without them.
  // Every wait_explain_interval it asks why work waits, for the long-wait
  // diagnosis, which reads only the reasons, not their text; the decisions
  // are the same either way.
  const bool explain = pending_training_ > 0 && now >= next_wait_explain_;
  if (explain) next_wait_explain_ = now + options_.wait_explain_interval;
  const Decisions eng = scheduler_.Schedule(
      snap(), ScheduleOptions{.explain_waits = explain, .wait_details = false, .told_reasons = told_reason_});
  const auto wall1 = std::chrono::steady_clock::now();
  cycle_ms_.push_back(std::chrono::duration<double, std::milli>(wall1 - wall0).count());
  ++cycles_;
  LogRejects(eng.rejects);
  // The pass left out each wait whose reason the job's tally has already:
  // told again, it would change nothing (WaitTally), and over a backlog
  // thousands deep almost every wait is one.
  for (const WaitDecision& w : eng.waits) {
    uint8_t& told = told_reason_[w.workload.value()];
    if (told == kNotTallied) continue;
    Job& j = JobOf(w.workload);
    if (j.kind != WorkloadKind::kTraining || j.first_start) {
      told = kNotTallied;
      continue;
    }
    if (!j.wait_tally) j.wait_tally = std::make_unique<diagnosis::WaitTally>();
    j.wait_tally->Explain(now, w.reason);
    told = static_cast<uint8_t>(w.reason);
  }
  CountRefused(machine_->ApplyDecisions(eng));
  ApplyDeferred();
#ifdef TIDAL_EXPENSIVE_CHECKS
  if (Status broken = machine_->state().CheckInvariants(); !broken.ok() && error_.ok()) {
    error_ = broken.WithContext(fmt::format("state after the pass at t={:.3f}s: ", Sec(now)));
  }
#endif
  next_pass_ = std::min(next_pass_, now + options_.pass_interval);
  queue_.Push(next_pass_, EventKind::kPass);
}

void Run::CountRefused(const state::ApplyOutcome& outcome) {
  invalid_ += static_cast<int>(outcome.refused.size());
}

void Run::LogRejects(const std::vector<RejectDecision>& rejects) {
  for (const RejectDecision& r : rejects) {
    const Workload* w = machine_->state().workload(r.workload);
    if (w == nullptr || w->state != WorkloadState::kPending) continue;
    LogEvent(fmt::format("\"event\":\"reject\",\"workload\":{},\"reason\":\"{}\",\"detail\":{}",
                         JobOf(r.workload).name_json, ReasonCodeName(r.reason),
                         nlohmann::json(r.detail).dump()));
  }
}

void Run::ApplyDeferred() {
  std::vector<state::Edit> edits;
  edits.swap(deferred_);
  for (const state::Edit& e : edits) ApplyWorld(e);
}

void Run::AfterPrepare() {
  const ColocationStatus& st = controller_.status();
  const Snapshot& snapshot = snap();
  if (!st.newly_lent.empty() || !st.returned.empty()) {
    lent_gpus_ = lent_nodes_ = 0;
    for (size_t n = 0; n < snapshot.lent_nodes.size(); ++n) {
      if (!snapshot.lent_nodes[n]) continue;
      lent_gpus_ += snapshot.cluster.nodes[n].gpu_count;
      ++lent_nodes_;
    }
  }
  if (clock_.Now() >= next_calendar_ && controller_.mode() != ColocationMode::kStatic) {
    const Time midnight = next_calendar_;
    while (next_calendar_ <= clock_.Now()) next_calendar_ += hours(24);
    calendars_.push_back(PlanLoanCalendar(controller_, snapshot, midnight));
  }
  for (NodeId n : st.newly_lent) {
    ++loans_since_sample_;
    return_free_at_.erase(n.value());  // returned, lent again unused: no lead
    LogEvent(fmt::format("\"event\":\"lend\",\"node\":{}",
                         nlohmann::json(snapshot.cluster.node(n).name).dump()));
  }
  for (NodeId n : st.returned) {
    ++returns_since_sample_;
    if (n.value() < node_borrowed_pods_.size() && node_borrowed_pods_[n.value()] > 0 &&
        !reclaim_started_.count(n.value())) {
      reclaim_started_[n.value()] = clock_.Now();
      ++reclaims_;
    }
    const bool leaving = n.value() < node_borrowed_pods_.size() && node_borrowed_pods_[n.value()] > 0;
    return_free_at_[n.value()] = leaving ? std::nullopt : std::optional<Time>(clock_.Now());
    LogEvent(fmt::format("\"event\":\"return\",\"node\":{}",
                         nlohmann::json(snapshot.cluster.node(n).name).dump()));
  }
  for (ServiceTrack& s : services_) {
    Job& j = jobs_[s.job];
    const Workload* w = LiveWorkload(j);
    if (w == nullptr) continue;
    // What the service asks for: its spares (predictive) are not demand.
    const int desired = w->demand_pods();
    if (desired > s.desired && s.desired == 0) {
      // The first target is the deployment, not a scale-up.
      LogEvent(fmt::format("\"event\":\"deploy\",\"workload\":{},\"replicas\":{}", j.name_json,
                           desired));
    } else if (desired > s.desired) {
      s.starting_in_step = true;
      LogEvent(fmt::format("\"event\":\"scale_up\",\"workload\":{},\"from\":{},\"to\":{}",
                           j.name_json, s.desired, desired));
    } else if (desired < s.desired) {
      LogEvent(fmt::format("\"event\":\"scale_down\",\"workload\":{},\"from\":{},\"to\":{}",
                           j.name_json, s.desired, desired));
    }
    s.desired = desired;
    // The state opened a scale-up (a rise while it runs): counted once.
    if (const state::PendingScaleUp* su = machine_->state().scale_up(w->id);
        su != nullptr && su->requested_at != s.last_opened) {
      s.last_opened = su->requested_at;
      ++scale_ups_;
    }
  }
}

// ---------------------------------------------------------------------------
// The world's answer to each applied edit.

void Run::React(const state::Edit& edit) {
  std::visit(
      [this](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, state::SubmitEdit>) ReactSubmit(e);
        else if constexpr (std::is_same_v<E, state::PlaceEdit>) ReactPlace(e);
        else if constexpr (std::is_same_v<E, state::GrowEdit>) ReactGrow(e);
        else if constexpr (std::is_same_v<E, state::NoticeEdit>) ReactNotice(e);
        else if constexpr (std::is_same_v<E, state::ShrinkEdit>) ReactShrink(e);
        else if constexpr (std::is_same_v<E, state::PodExitEdit>) ReactPodExit(e);
        else if constexpr (std::is_same_v<E, state::RequeueEdit>) ReactRequeue(e);
        else if constexpr (std::is_same_v<E, state::ReleaseEdit>) ReactRelease(e);
        else if constexpr (std::is_same_v<E, state::ScaleUpEndEdit>) ReactScaleUpEnd(e);
        else if constexpr (std::is_same_v<E, state::NodeHealthEdit>) {
          // Only the lifecycle makes a simulated node not ready: its lease ran out.
          if (e.health == Health::kNotReady)
            LogEvent(fmt::format("\"event\":\"node_lost\",\"node\":{}",
                                 nlohmann::json(snap().cluster.node(e.node).name).dump()));
        }
        // Priorities, targets, checkpoints and loans change nothing the
        // world models; AfterPrepare reads targets and loans.
      },
      edit);
}

// [{"node":"r0-n1","gpus":[0,1]}, ...]: where each pod runs, so topology can
// be checked from the event log.
std::string Run::PlacementJson(const std::vector<PodPlacement>& pods) const {
  std::string out = "[";
  for (const PodPlacement& p : pods) {
    if (out.size() > 1) out += ',';
    out += "{\"node\":" + nlohmann::json(snap().cluster.node(p.node).name).dump() + ",\"gpus\":[";
    bool first = true;
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if ((p.gpus >> g & 1) == 0) continue;
      if (!first) out += ',';
      out += std::to_string(g);
      first = false;
    }
    out += "]}";
  }
  return out + "]";
}

void Run::ReactPlace(const state::PlaceEdit& e) {
  Job& j = JobOf(e.workload);
  const Time now = clock_.Now();
  const Workload& w = *LiveWorkload(j);
  if (w.is_gang() && j.kind == WorkloadKind::kTraining) {
    ++gang_places_;
    if (static_cast<int>(e.pods.size()) < w.min_pods) ++gang_partial_;
  }
  SetPhase(j, Phase::kRunning);
  ++j.runs;
  if (j.kind == WorkloadKind::kDebug && j.idle_after_s >= 0) {
    queue_.Push(now + Duration(static_cast<int64_t>(std::llround(j.idle_after_s * 1000))), EventKind::kIdle,
                IndexOf(j), j.runs);
  }
  if (j.checkpoint_interval.count() > 0) {
    j.next_checkpoint = now + j.checkpoint_interval;
    queue_.Push(j.next_checkpoint, EventKind::kCheckpoint, IndexOf(j));
  }
  if (!j.first_start) {
    j.first_start = now;
    if (j.kind == WorkloadKind::kTraining) DiagnoseLongWait(j, now);
  }
  if (j.noticed_at) {
    if (j.kind == WorkloadKind::kTraining) {
      const double s = Sec(now - *j.noticed_at);
      if (j.recovery_cause != kNodeLost) recovery_s_.push_back(s);
      recovery_by_cause_[j.recovery_cause].push_back(s);
    }
    j.noticed_at.reset();
  }
  j.run_start = now;
  j.segment_start = now;
  if (j.kind == WorkloadKind::kInference) {
    const Time ready = now + EstimateColdStart(w.inference);
    j.pod_ready.clear();
    for (const PodPlacement& p : e.pods) j.pod_ready.push_back({p, ready});
    queue_.Push(ready, EventKind::kReplicaReady, IndexOf(j));
  }
  SetRate(j);
  if (events_ != nullptr) {
    LogEvent(fmt::format("\"event\":\"place\",\"workload\":{},\"pods\":{},\"gpus\":{},"
                         "\"borrowed\":{},\"waited_s\":{:.3f},\"placement\":{}",
                         j.name_json, e.pods.size(), j.gpus_held, e.borrowed ? "true" : "false",
                         Sec(now - j.submit), PlacementJson(e.pods)));
  }
}

void Run::ReactGrow(const state::GrowEdit& e) {
  Job& j = JobOf(e.workload);
  const Time now = clock_.Now();
  if (j.kind == WorkloadKind::kInference) {
    const Time ready = now + EstimateColdStart(LiveWorkload(j)->inference);
    for (const PodPlacement& p : e.pods) {
      j.pod_ready.push_back({p, ready});
      queue_.Push(ready, EventKind::kReplicaReady, IndexOf(j));
    }
    RecountReady(j);
  } else {
    SetRate(j);
  }
  const int pods = static_cast<int>(LiveAllocation(j)->pods.size());
  if (events_ != nullptr) {
    LogEvent(fmt::format("\"event\":\"resize\",\"workload\":{},\"from\":{},\"to\":{},\"added\":{},"
                         "\"removed\":0,\"placement\":{}",
                         j.name_json, pods - static_cast<int>(e.pods.size()), pods, e.pods.size(),
                         PlacementJson(e.pods)));
  }
}

void Run::ReactShrink(const state::ShrinkEdit& e) {
  Job& j = JobOf(e.workload);
  const Time now = clock_.Now();
  const Allocation& a = *LiveAllocation(j);
  for (const PodPlacement& p : e.pods) {
    if (j.kind == WorkloadKind::kInference) {
      // A replica stops serving at once.
      deferred_.push_back(state::PodExitEdit{e.workload, p});
      continue;
    }
    // Removed pods keep their GPUs until they have saved and exited.
    const Time leave = j.checkpoint_interval.count() > 0
                           ? std::min(e.grace_deadline, now + options_.checkpoint_save)
                           : e.grace_deadline;
    j.shrinking.emplace_back(leave, p);
    queue_.Push(leave, EventKind::kVictimExit, IndexOf(j), kShrinkGeneration);
  }
  const int pods = static_cast<int>(a.pods.size());
  LogEvent(fmt::format("\"event\":\"resize\",\"workload\":{},\"from\":{},\"to\":{},\"added\":0,"
                       "\"removed\":{}",
                       j.name_json, pods, pods - static_cast<int>(a.leaving.size()), e.pods.size()));
}

void Run::ReactPodExit(const state::PodExitEdit& e) {
  Job& j = JobOf(e.workload);
  if (j.kind == WorkloadKind::kInference) {
    auto it = std::find_if(j.pod_ready.begin(), j.pod_ready.end(),
                           [&](const Job::PodReady& r) { return r.pod == e.pod; });
    if (it != j.pod_ready.end()) j.pod_ready.erase(it);
    RecountReady(j);
    return;
  }
  if (j.phase == Phase::kRunning) SetRate(j);
  RequestPass();
}

void Run::ReactNotice(const state::NoticeEdit& e) {
  Job& j = JobOf(e.workload);
  const Time now = clock_.Now();
  Time exit = e.grace_deadline;
  const Workload* w = LiveWorkload(j);
  if (!e.requeue) {
    j.stop_for_good = true;
  } else if (SavesOnRequest(w, e.grace_deadline - now)) {
    // Asked to checkpoint now, it saves its progress at the notice and
    // leaves once the save lands: it loses only the save.
    AdvanceProgress(j);
    j.checkpoint_progress_s = j.progress_s;
    exit = now + w->training.checkpoint_on_request;
  } else if (j.checkpoint_interval.count() > 0) {
    // A checkpointing victim shuts down before its deadline, losing what
    // it did since its last periodic checkpoint.
    exit = std::min(exit, now + options_.checkpoint_save);
  }
  SetPhase(j, Phase::kTerminating);
  if (!j.stop_for_good) {
    if (j.kind == WorkloadKind::kTraining) ++training_preemptions_;
    j.noticed_at = now;
    j.recovery_cause = PreemptCauseName(e.cause);
  }
  j.noticed_gpus = j.gpus_held;
  ++j.generation;
  queue_.Push(exit, EventKind::kVictimExit, IndexOf(j), j.generation);
  // Who the victim makes room for, when someone does: a loop of the same
  // victims for the same preemptor shows in the events.
  const std::string preemptor =
      e.preemptor.valid() ? fmt::format(",\"preemptor\":{}", JobOf(e.preemptor).name_json) : std::string();
  LogEvent(fmt::format("\"event\":\"preempt\",\"workload\":{},\"cause\":\"{}\",\"gpus\":{},"
                       "\"exit_at\":{:.3f}{}",
                       j.name_json, PreemptCauseName(e.cause), j.gpus_held, Sec(exit), preemptor));
}

void Run::ReactRequeue(const state::RequeueEdit& e) {
  Job& j = JobOf(e.workload);
  AdvanceProgress(j);
  const double lost_s = std::max(0.0, j.progress_s - j.checkpoint_progress_s);
  if (j.kind == WorkloadKind::kTraining) {
    // progress is in full-size seconds: GPU-seconds = progress x full GPUs.
    lost_gpu_seconds_ += lost_s * j.full_pods * j.gpus_per_pod;
  }
  j.progress_s = j.checkpoint_progress_s;
  j.rate = 0;
  if (e.cause == state::EndCause::kNodeLost && !j.noticed_at) {
    // No notice came: recovery counts from the loss.
    j.noticed_at = clock_.Now();
    j.recovery_cause = kNodeLost;
  }
  AllocationGone(j);
  SetPhase(j, Phase::kPending);
  j.next_checkpoint = kInfiniteFuture;
  LogEvent(fmt::format("\"event\":\"exit\",\"workload\":{},\"gpus\":{},\"lost_s\":{:.3f}",
                       j.name_json, j.noticed_gpus, lost_s));
  RequestPass();
}

// The Lifecycle judged a scale-up: the summary's success rate and time to
// capacity are read from this one judgment, the server's metrics likewise.
void Run::ReactScaleUpEnd(const state::ScaleUpEndEdit& e) {
  const diagnosis::ScaleUpDiagnosis why = slo_diag_.TakeScaleUp(machine_->state(), e);
  if (why.slow) {
    ++diag_.slow_scale_ups;
    ++diag_.slow_scale_ups_by_cause[static_cast<int>(why.cause)];
    LogEvent(fmt::format("\"event\":\"slow_scale_up\",\"workload\":{},\"cause\":\"{}\",\"detail\":{}",
                         JobOf(e.workload).name_json, diagnosis::MissCauseName(why.cause),
                         nlohmann::json(why.detail).dump()));
  }
  ++scale_up_judged_;
  const bool ok = e.result == state::ScaleUpResult::kReady;
  if (ok) {
    ++scale_up_ok_;
    ttc_s_.push_back(Sec(e.ready_at - e.requested_at));
  }
  LogEvent(fmt::format("\"event\":\"scale_up_end\",\"workload\":{},\"from\":{},\"to\":{},\"result\":\"{}\"",
                       JobOf(e.workload).name_json, e.from, e.to, state::ScaleUpResultName(e.result)));
}

// A training job's first wait ended at `until` (or the run did): one that
// lasted kLongWait or more is counted under its cause.
void Run::DiagnoseLongWait(Job& j, Time until) {
  const Duration waited = until - j.submit;
  if (waited < diagnosis::kLongWait) return;
  diagnosis::WaitTally none;
  diagnosis::WaitTally& tally = j.wait_tally ? *j.wait_tally : none;
  tally.ChargeTo(until);
  const diagnosis::WaitDiagnosis why =
      diagnosis::DiagnoseWait(snap(), input_.workloads[IndexOf(j)].workload, tally, waited);
  ++diag_.long_training_waits;
  ++diag_.long_training_waits_by_cause[static_cast<int>(why.cause)];
  LogEvent(fmt::format("\"event\":\"long_wait\",\"workload\":{},\"waited_s\":{:.3f},\"cause\":\"{}\",\"detail\":{}",
                       j.name_json, Sec(waited), diagnosis::WaitCauseName(why.cause),
                       nlohmann::json(why.detail).dump()));
  j.wait_tally.reset();
}

void Run::ReactRelease(const state::ReleaseEdit& e) {
  Job& j = JobOf(e.workload);
  AllocationGone(j);
  SetPhase(j, Phase::kDone);
  j.finished_at = clock_.Now();
  ++j.generation;
  if (j.work_s > 0) --finite_left_;
  if (j.service >= 0) {
    ServiceTrack& s = services_[j.service];
    s.active = false;
  }
  LogEvent(fmt::format("\"event\":\"finish\",\"workload\":{},\"completed\":{}", j.name_json,
                       j.completed ? "true" : "false"));
  RequestPass();
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
  s.traces = input_.traces;
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
  for (const auto& [cause, times] : recovery_by_cause_) {
    s.training.recovery_by_cause[std::string(cause)] = {static_cast<int>(times.size()), Percentile(times, 0.50),
                                                        Percentile(times, 0.95)};
  }

  s.inference.services = inference_workloads_;
  s.inference.service_minutes = service_steps_;
  s.inference.slo_miss_minutes = service_misses_;
  if (service_steps_ > 0)
    s.inference.slo_attainment = 1.0 - static_cast<double>(service_misses_) / service_steps_;
  if (!step_p99_ms_.empty()) {
    s.inference.minute_p99_p95_ms = Percentile(step_p99_ms_, 0.95);
    s.inference.latency_p99_ms = Percentile(step_p99_ms_, 0.99);
  }
  // Judged by the Lifecycle (ScaleUpEndEdit); one still open at the end is
  // not judged.
  s.inference.scale_ups = scale_ups_;
  if (scale_up_judged_ > 0) {
    s.inference.scale_up_success_rate = static_cast<double>(scale_up_ok_) / scale_up_judged_;
  }
  s.inference.time_to_capacity_p50_s = Percentile(ttc_s_, 0.50);
  s.inference.time_to_capacity_p99_s = Percentile(ttc_s_, 0.99);
  s.inference.load_history_samples = history_samples_;
  if (forecast_scored_ > 0) s.inference.forecast_error_mape = forecast_ape_sum_ / forecast_scored_;
  s.inference.return_leads = static_cast<int>(return_lead_s_.size());
  s.inference.return_lead_p50_s = Percentile(return_lead_s_, 0.50);
  s.inference.return_lead_p95_s = Percentile(return_lead_s_, 0.95);

  // Training jobs still in their first wait at the end count as waited so
  // far (a rejected one waits no more).
  for (Job& j : jobs_) {
    if (j.kind == WorkloadKind::kTraining && j.phase == Phase::kPending && !j.first_start) DiagnoseLongWait(j, end);
  }
  s.diagnosis = diag_;

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
  r.calendars = std::move(calendars_);
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
