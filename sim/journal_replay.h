// Replays a server's edit journal (docs/formats.md "Journal") on a fresh
// StateMachine and checks that the lifecycle, the co-location controller and
// the engine make exactly the edits the server journaled.
//
// The world's edits (requests, agent reports) and the priority refresher's
// are inputs: they are applied as journaled (a refused one is counted, not
// fatal). Everything else is recomputed at its pass marker and compared, in
// order, with the journaled edits of that step:
//   tick             AdvanceTo, Tick            vs the lifecycle edits after it
//   load sample      ObserveLoad
//   plan_snapshot    plan = Prepare(snapshot)   (kept)
//   plan_apply       ApplyPlan(plan)            vs the colocation edits after it
//   engine_snapshot  decisions = Schedule(snapshot)
//   engine_apply     ApplyDecisions(decisions)  vs the engine edits after it
// A step's journaled edits end at the first record that is not an edit of
// the step's origin; what either side made beyond the other's is a
// difference too. Edits compare by their encoded record (the codec is
// canonical), the clock they applied at included.
//
// The machine runs with state::ServerLifecycleOptions(policy), a
// ColocationController(policy) and a Scheduler(policy): the server's. At a
// server_start record (the server restarted on its store) the replay
// restarts too: its state becomes state::RestartedState of its own (the
// nodes registered so far come back ready), and the controller, scheduler
// and timers start afresh, exactly as the server's did; so a journal that
// spans restarts replays as exactly as one that does not.
#ifndef TIDAL_SIM_JOURNAL_REPLAY_H_
#define TIDAL_SIM_JOURNAL_REPLAY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/cluster_config.h"
#include "core/colocation/colocation_controller.h"
#include "core/common/status.h"
#include "core/engine/scheduler.h"
#include "core/model/policy.h"
#include "core/state/state_machine.h"
#include "protocol/journal_record.h"
#include "protocol/journal_snapshot.h"

namespace tidal::sim {

struct ReplayDifference {
  Time pass_at;           // the step's marker
  std::string phase;      // "tick", "plan_apply", "engine_apply"
  std::string journaled;  // the journaled record, "" when the journal has none
  std::string replayed;   // the replayed record, "" when the replay made none
  // "at t=...ms engine_apply: journaled {...}, replayed {...}"
  std::string ToString() const;
};

// What one side's passes did: the journal's (what the server decided) or
// the replay's (what the engine decides now, under the replay's config).
struct ReplayTally {
  int64_t placements = 0;
  std::map<std::string, int64_t> preemptions;  // by cause: "priority", "reclaim", ...
  int64_t loans = 0;
  int64_t returns = 0;
  std::vector<double> waits_s;  // per placed workload: submit to first place
  double MeanWait_s() const;
  double P95Wait_s() const;
};

struct ReplayReport {
  int64_t records = 0;
  int passes = 0;         // tick markers
  int restarts = 0;       // server_start records (a fresh store starts with one)
  int64_t snapshot_seq = 0;  // the snapshot the replay started from (0 = the first record)
  int64_t compared = 0;   // journaled vs replayed edit pairs (lifecycle, colocation, engine)
  int64_t world_edits = 0;
  std::vector<std::string> refused;  // world/priority edits the replayed state refused, with why
  std::vector<ReplayDifference> differences;
  ReplayTally journal;
  ReplayTally replay;
  bool identical() const { return differences.empty(); }
};

class JournalReplay {
 public:
  JournalReplay(const config::ClusterConfig& cluster, const PolicyConfig& policy);

  // Starts from a journal snapshot instead of a fresh store, before the
  // first Feed (of the record after `snapshot.seq`): the state is the one
  // the snapshot holds, on `cluster`'s configuration, with its nodes'
  // registrations; the lifecycle's timers are armed from it, the
  // co-location controller gets the memory the snapshot holds (a snapshot
  // written before it was kept: the controller starts afresh), and the
  // scheduler, which keeps none, starts afresh. Tallies count from there; a workload placed before it is not counted
  // again.
  Status StartFromSnapshot(const config::ClusterConfig& cluster, const protocol::JournalSnapshot& snapshot);
  // StartFromSnapshot from a store's snapshot row: `text` is the snapshot,
  // `row_seq` the seq the store says it covers. A snapshot that does not
  // decode, or covers another record, is Internal: the journal before it is
  // compacted away, so there is nothing else to replay from.
  Status StartFromStoredSnapshot(const config::ClusterConfig& cluster, int64_t row_seq, std::string_view text);
  // Feeds the next record, in journal order. Fails only on a record that
  // breaks the format's order (an apply marker without its snapshot).
  Status Feed(const protocol::JournalRecord& record);
  // Decodes `text` first; a record that does not decode fails, naming `seq`.
  Status FeedText(int64_t seq, std::string_view text);
  // A load sample the store kept from before the snapshot the replay started
  // at (the compaction keeps kLoadHistoryWindow of them), in order, after
  // StartFromSnapshot and before the first Feed. The snapshot holds the
  // controller's memory, so it is not observed again; it only warms the
  // controller of a server_start after the snapshot, as it warmed the
  // server's. Other records the snapshot covers (a compaction in steps
  // had not reached them) are skipped; a record that does not decode fails.
  Status KeepLoadText(int64_t seq, std::string_view text);
  // The snapshot a server writes after record `seq`, when that is the last
  // record fed and no pass is in progress (the next one is a tick marker or
  // a world edit): the state and the controller's memory.
  protocol::JournalSnapshot SnapshotAt(int64_t seq) const;
  // Closes the last step and returns the report.
  ReplayReport Finish();

  const state::StateMachine& machine() const { return *machine_; }

 private:
  enum class Step { kNone, kTick, kPlanApply, kEngineApply };

  void CloseStep();
  void OpenStep(Step step, Time at, std::vector<std::string> made);
  void CompareJournaled(const state::JournalEntry& entry);
  void Count(ReplayTally& tally, std::unordered_set<WorkloadId>& placed, Time at, const state::Edit& edit);
  static state::EditOrigin OriginOf(Step step);
  static std::string_view StepName(Step step);
  // (Re)makes the machine, the controller and the scheduler on `state`.
  void Start(state::State state);

  PolicyConfig policy_;
  std::optional<state::StateMachine> machine_;
  std::optional<ColocationController> controller_;
  std::optional<Scheduler> scheduler_;
  // Load samples of the last kLoadHistoryWindow: a restart's warm start
  // feeds them to the new controller, as the server does from its store.
  std::deque<protocol::LoadSample> load_history_;
  std::vector<bool> registered_;  // by NodeId: nodes whose agent registered
  // What the replay's own calls applied, encoded, while capturing.
  bool capturing_ = false;
  std::vector<std::string> captured_;

  Step step_ = Step::kNone;
  Time step_at_;
  std::deque<std::string> expected_;  // the replay's edits of the open step not yet matched
  std::optional<ColocationPlan> plan_;
  std::optional<Decisions> decisions_;
  ReplayReport report_;
  std::unordered_map<WorkloadId, Time> submitted_;
  std::unordered_set<WorkloadId> placed_journal_;
  std::unordered_set<WorkloadId> placed_replay_;
};

// The cluster or policy file's content as the store's meta keeps it: JSON
// text (the file as parsed, YamlDocument::root().dump()); YAML text is read
// too. `what` names it in errors ("meta cluster").
StatusOr<nlohmann::json> ConfigJson(std::string_view text, std::string_view what);
StatusOr<config::ClusterConfig> ParseClusterText(std::string_view text, std::string_view what);
StatusOr<PolicyConfig> ParsePolicyText(std::string_view text, std::string_view what);

// A store of a server's journal, as ReplayStore reads it: server::Store
// (server/store.h). sim may not depend on the server (docs/ARCHITECTURE.md),
// so the reads it uses are named here and the caller, which links both,
// instantiates ReplayStore with the server's store.
template <typename S>
concept JournalStore = requires(S& store, int64_t after_seq, int limit) {
  store.ReadSnapshot();                 // StatusOr<std::optional<row>>: seq, snapshot
  store.ReadJournal(after_seq, limit);  // StatusOr<std::vector<row>>: seq, entry; in seq order
};

// Feeds `replay` what `store` keeps of the journal: its latest snapshot,
// when it has one (a compacted journal starts after it, but for the load
// samples it kept and rows a compaction has not reached: KeepLoadText), then every record after that, `page_rows` at a time (enough to amortize the query, few
// enough to bound memory). Stops at the first read or record that fails;
// then Finish reports the records fed before it.
template <JournalStore S>
Status ReplayStore(S& store, const config::ClusterConfig& cluster, JournalReplay& replay, int page_rows = 4096) {
  int64_t snapshot_seq = 0;
  auto snapshot_row = store.ReadSnapshot();
  if (!snapshot_row.ok()) return snapshot_row.status();
  if (snapshot_row->has_value()) {
    TIDAL_RETURN_IF_ERROR(
        replay.StartFromStoredSnapshot(cluster, (*snapshot_row)->seq, (*snapshot_row)->snapshot));
    snapshot_seq = (*snapshot_row)->seq;
  }
  int64_t after = 0;
  while (true) {
    auto rows = store.ReadJournal(after, page_rows);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return Status::Ok();
    for (const auto& row : *rows) {
      TIDAL_RETURN_IF_ERROR(row.seq <= snapshot_seq ? replay.KeepLoadText(row.seq, row.entry)
                                                    : replay.FeedText(row.seq, row.entry));
      after = row.seq;
    }
  }
}

}  // namespace tidal::sim

#endif  // TIDAL_SIM_JOURNAL_REPLAY_H_
