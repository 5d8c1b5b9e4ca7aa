// What the control plane keeps per workload: the engine's Workload plus what
// only the server needs (who submitted it, what the agent runs, its current
// allocation, stop notices, run history for reports). One record is one row
// of the store, serialized by workload_codec.h.
#ifndef TIDAL_SERVER_WORKLOAD_RECORD_H_
#define TIDAL_SERVER_WORKLOAD_RECORD_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/diagnosis/slo_diagnosis.h"
#include "core/model/allocation.h"
#include "core/model/decision.h"
#include "core/model/lost_work.h"
#include "core/model/policy.h"
#include "core/model/workload.h"
#include "server/pod_ranks.h"

namespace tidal::server {

struct Endpoint {
  int port = 0;
  std::string path;
};

// Fields the agent needs to run the pods; the engine never reads them.
struct RunSpec {
  std::string image;
  std::string dataset;
  std::string model_version;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::optional<Endpoint> readiness;
  std::optional<Endpoint> load_endpoint;
  std::map<std::string, std::string> labels;
  double budget_gpu_hours = 0;  // the project's, copied at admission
};

// One stretch of running (for usage reports).
struct RunInterval {
  int64_t start_ms = 0;
  int64_t end_ms = 0;  // 0 while running
  int gpus = 0;
  bool borrowed = false;
  std::string end_reason;  // finished, preempted, cancelled, node_lost, failed
  std::string gpu_model;   // of the first pod's node, for cost
};

struct PreemptionRecord {
  int64_t time_ms = 0;
  int64_t audit_seq = 0;
  std::string cause;
  uint64_t preemptor = 0;
  double lost_gpu_seconds = 0;
  double recovery_s = -1;  // until it ran again; -1 while waiting
  // How the victim stopped, from the agents' exit events (pods/status):
  int64_t agent_notice_ms = 0;  // when an agent delivered the notice; 0 = not reported
  int64_t exit_ms = 0;          // when its last pod exited (or the grace ran out); 0 = not yet
  bool killed_at_deadline = false;    // some pod was SIGKILLed at the grace deadline
  bool checkpointed_in_time = false;  // every pod checkpointed between notice and exit
  int exited_pods = 0;
};

// An inference scale-up, from the pass that wanted more replicas to the
// moment they were all ready (for the scale-up diagnosis).
// How many scale-ups a workload's record keeps (the newest).
inline constexpr size_t kMaxScaleUpHistory = 1024;

struct ScaleUp {
  int64_t requested_ms = 0;
  int from_pods = 0;
  int to_pods = 0;
  int64_t placed_ms = 0;     // 0 until the added pods were placed
  int64_t ready_ms = 0;      // 0 until all replicas were ready
  double victims_grace_s = 0;  // spent waiting on preempted victims
  bool failed = false;
  // The judgment's diagnosis (core/diagnosis, SloDiagnosis::TakeScaleUp):
  // "" until judged; its dominant cause, the detail with the seconds, and
  // whether it was slow (timed out, or over max(60 s, 2 x cold start)).
  std::string cause;
  std::string detail;
  bool slow = false;
};

struct StopNotice {
  std::string cause;  // priority, reclaim, inference_return, max_runtime, idle, cancel, shrink
  int64_t notice_ms = 0;
  int64_t grace_deadline_ms = 0;
  bool requeue = true;  // false for cancel: it ends when the pods exit

  // Whether this notice to `w` asks it to checkpoint now: it is requeued
  // (not a shrink, not a stop for good) and `w` saves on request within
  // the grace (core/model/lost_work.h).
  bool AsksForCheckpoint(const Workload& w) const {
    return requeue && cause != "shrink" && SavesOnRequest(&w, milliseconds(grace_deadline_ms - notice_ms));
  }
};

struct WorkloadRecord {
  Workload w;
  RunSpec run;
  std::string submitted_by;
  // A digest of the submit body when it came with an Idempotency-Key: a
  // retry with the same key must carry the same body (a different one is a
  // client bug, answered 409, not the first workload). "" = no key, or a
  // record from before digests were kept.
  std::string request_digest;
  std::optional<Allocation> allocation;
  // Each pod's rank, parallel to allocation->pods, for a kind that keeps
  // ranks (server/pod_ranks.h); empty = each pod's place in the list.
  // Agents key pods by (workload, rank, attempt): a pod whose rank changes
  // is a new pod to them.
  std::vector<int> pod_ranks;
  std::optional<StopNotice> stop;
  // The notice of allocation->leaving (pods a shrink removes: they keep
  // their rank and GPUs until they exit or this grace deadline passes).
  std::optional<StopNotice> shrink_notice;
  std::set<int> exited_ranks;
  std::set<int> ready_ranks;
  int64_t pod_started_ms = 0;
  // Placements so far: 1 after the first, +1 at each re-placement. Agents key
  // pods by (workload, rank, attempt), so a requeued rank that lands on the
  // same node again is restarted, not mistaken for the old process.
  int64_t attempt = 0;
  // Where ranks are kept: the rank the next new pod of this attempt takes.
  // No rank is reused within an attempt, since an agent cannot tell a list
  // naming a reused rank from one written before that rank's pod exited.
  int next_rank = 0;
  std::optional<RejectDecision> rejected;
  std::vector<RunInterval> runs;
  std::vector<PreemptionRecord> preemptions;
  std::vector<ScaleUp> scale_ups;
  int64_t finish_time_ms = 0;
  int64_t first_start_ms = 0;
  // Since when it waits: its submit, or its last requeue (queue-wait
  // metrics). The engine orders by the submit time, which a requeue keeps.
  int64_t queued_ms = 0;
  double utilization = -1;  // mean GPU utilization the agents reported, -1 = none
  double load_rps = 0, p95_ms = 0, p99_ms = 0;
  int64_t slo_samples = 0, slo_met = 0;
  // Seconds of missed SLO by dominant cause (core/diagnosis MissCause order),
  // for the report; what tidal_slo_miss_seconds_total{cause} counts.
  std::array<double, diagnosis::kMissCauseCount> slo_miss_s_by_cause{};
  int gang_start_failures = 0;

  // Memory only (rebuilt after a restart):
  // The latest load each inference replica reported, by rank; the service's
  // load is their sum over ready replicas.
  struct ReplicaLoad {
    double rps = 0, p95_ms = 0, p99_ms = 0;
  };
  std::map<int, ReplicaLoad> replica_load;
  // When the service's SLO was last judged (a load sample with a P99), and
  // the last missed interval's diagnosis, for explain.
  int64_t last_slo_sample_ms = 0;
  std::optional<diagnosis::MissDiagnosis> last_miss;
  int64_t last_miss_ms = 0;

  int RankOf(size_t pod) const { return pod < pod_ranks.size() ? pod_ranks[pod] : static_cast<int>(pod); }
  // The allocation's pod of that rank, if it has one.
  std::optional<size_t> PodOfRank(int rank) const {
    if (!allocation) return std::nullopt;
    if (pod_ranks.empty()) {  // ranks by place: no walk on each pod event
      return rank >= 0 && static_cast<size_t>(rank) < allocation->pods.size() ? std::optional<size_t>(rank)
                                                                               : std::nullopt;
    }
    for (size_t i = 0; i < allocation->pods.size(); ++i) {
      if (RankOf(i) == rank) return i;
    }
    return std::nullopt;
  }

  bool active() const {
    return w.state == WorkloadState::kAwaitingApproval || w.state == WorkloadState::kPending ||
           w.state == WorkloadState::kRunning || w.state == WorkloadState::kTerminating;
  }
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_WORKLOAD_RECORD_H_
