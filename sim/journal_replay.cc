#include "sim/journal_replay.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "config/yaml_document.h"

namespace tidal::sim {
namespace {

// As a server with a fresh store starts (the journal begins there).
state::State InitialState(const config::ClusterConfig& c) {
  return state::State(state::ClusterAwaitingAgents(c.cluster), c.queues, c.projects);
}

}  // namespace

double ReplayTally::MeanWait_s() const {
  if (waits_s.empty()) return 0;
  double sum = 0;
  for (double w : waits_s) sum += w;
  return sum / static_cast<double>(waits_s.size());
}

// Nearest rank: the smallest wait that at least 95% of waits are <= to.
double ReplayTally::P95Wait_s() const {
  if (waits_s.empty()) return 0;
  std::vector<double> sorted = waits_s;
  std::sort(sorted.begin(), sorted.end());
  const size_t rank = (sorted.size() * 95 + 99) / 100;  // ceil(0.95 n), >= 1
  return sorted[rank - 1];
}

std::string ReplayDifference::ToString() const {
  return fmt::format("at t={}ms {}: journaled {}, replayed {}", ToMillis(pass_at), phase,
                     journaled.empty() ? "nothing" : journaled, replayed.empty() ? "nothing" : replayed);
}

JournalReplay::JournalReplay(const config::ClusterConfig& cluster, const PolicyConfig& policy)
    : policy_(policy) {
  Start(InitialState(cluster));
}

Status JournalReplay::StartFromSnapshot(const config::ClusterConfig& cluster,
                                        const protocol::JournalSnapshot& snapshot) {
  if (report_.records != 0) {
    return FailedPrecondition("journal replay: a snapshot must come before the first record");
  }
  auto restored = protocol::RestoreState(snapshot, cluster.cluster, cluster.queues, cluster.projects);
  if (!restored.ok()) {
    return restored.status().WithContext(fmt::format("the journal snapshot at seq {}: ", snapshot.seq));
  }
  registered_ = snapshot.registered;
  Start(*std::move(restored));
  if (snapshot.colocation) {
    if (Status s = controller_->Restore(*snapshot.colocation); !s.ok()) {
      return s.WithContext(fmt::format("the journal snapshot at seq {}: colocation: ", snapshot.seq));
    }
  }
  for (const Workload& w : machine_->state().snapshot().workloads) submitted_.emplace(w.id, w.submit_time);
  for (const Allocation& a : machine_->state().snapshot().allocations) {
    placed_journal_.insert(a.workload);
    placed_replay_.insert(a.workload);
  }
  report_.snapshot_seq = snapshot.seq;
  return Status::Ok();
}

Status JournalReplay::StartFromStoredSnapshot(const config::ClusterConfig& cluster, int64_t row_seq,
                                              std::string_view text) {
  auto snapshot = protocol::JournalSnapshotFromText(text);
  if (!snapshot.ok()) {
    return Internal(fmt::format("the store's journal snapshot (row {}) is damaged, and the journal "
                                "before it is compacted away: {}", row_seq, snapshot.status().message()));
  }
  if (snapshot->seq != row_seq) {
    return Internal(fmt::format("the store's journal snapshot (row {}) says it covers record {}", row_seq,
                                snapshot->seq));
  }
  return StartFromSnapshot(cluster, *snapshot);
}

void JournalReplay::Start(state::State state) {
  machine_.emplace(std::move(state), state::ServerLifecycleOptions(policy_));
  machine_->set_sink([this](Time at, state::EditOrigin origin, const state::Edit& edit) {
    if (const auto* reg = std::get_if<state::RegisterNodeEdit>(&edit)) {
      const size_t n = reg->node.id.value();
      if (n >= registered_.size()) registered_.resize(n + 1, false);
      registered_[n] = true;
    }
    if (!capturing_) return;
    captured_.push_back(protocol::JournalEntryText(at, origin, edit));
    Count(report_.replay, placed_replay_, at, edit);
  });
  controller_.emplace(policy_);
  scheduler_.emplace(policy_);
}

state::EditOrigin JournalReplay::OriginOf(Step step) {
  switch (step) {
    case Step::kTick: return state::EditOrigin::kLifecycle;
    case Step::kPlanApply: return state::EditOrigin::kColocation;
    case Step::kEngineApply:
    case Step::kNone: return state::EditOrigin::kEngine;
  }
  return state::EditOrigin::kEngine;
}

std::string_view JournalReplay::StepName(Step step) {
  switch (step) {
    case Step::kTick: return "tick";
    case Step::kPlanApply: return "plan_apply";
    case Step::kEngineApply: return "engine_apply";
    case Step::kNone: return "none";
  }
  return "none";
}

// What the replay made that the journal's step did not have.
void JournalReplay::CloseStep() {
  for (std::string& made : expected_) {
    report_.differences.push_back({step_at_, std::string(StepName(step_)), "", std::move(made)});
  }
  expected_.clear();
  step_ = Step::kNone;
}

void JournalReplay::OpenStep(Step step, Time at, std::vector<std::string> made) {
  step_ = step;
  step_at_ = at;
  expected_.assign(std::make_move_iterator(made.begin()), std::make_move_iterator(made.end()));
}

void JournalReplay::Count(ReplayTally& tally, std::unordered_set<WorkloadId>& placed, Time at,
                          const state::Edit& edit) {
  if (const auto* p = std::get_if<state::PlaceEdit>(&edit)) {
    ++tally.placements;
    const auto submit = submitted_.find(p->workload);
    if (submit != submitted_.end() && placed.insert(p->workload).second) {
      tally.waits_s.push_back(ToSeconds(at - submit->second));
    }
  } else if (const auto* n = std::get_if<state::NoticeEdit>(&edit)) {
    ++tally.preemptions[std::string(PreemptCauseName(n->cause))];
  } else if (std::holds_alternative<state::LendEdit>(edit)) {
    ++tally.loans;
  } else if (std::holds_alternative<state::ReturnEdit>(edit)) {
    ++tally.returns;
  }
}

void JournalReplay::CompareJournaled(const state::JournalEntry& entry) {
  Count(report_.journal, placed_journal_, entry.at, entry.edit);
  std::string journaled = protocol::JournalRecordToText(entry);
  ++report_.compared;
  if (expected_.empty()) {
    report_.differences.push_back({step_at_, std::string(StepName(step_)), std::move(journaled), ""});
    return;
  }
  std::string replayed = std::move(expected_.front());
  expected_.pop_front();
  if (replayed != journaled) {
    report_.differences.push_back(
        {step_at_, std::string(StepName(step_)), std::move(journaled), std::move(replayed)});
  }
}

Status JournalReplay::Feed(const protocol::JournalRecord& record) {
  ++report_.records;
  // A journaled edit of the open step's origin is compared; anything else
  // ends the step.
  if (const auto* entry = std::get_if<state::JournalEntry>(&record)) {
    if (step_ != Step::kNone && entry->origin == OriginOf(step_)) {
      CompareJournaled(*entry);
      return Status::Ok();
    }
    CloseStep();
    switch (entry->origin) {
      case state::EditOrigin::kWorld:
      case state::EditOrigin::kPriority: {
        ++report_.world_edits;
        if (const auto* submit = std::get_if<state::SubmitEdit>(&entry->edit)) {
          submitted_.emplace(submit->workload.id, submit->workload.submit_time);
        }
        machine_->AdvanceTo(entry->at);
        if (Status s = machine_->Apply(entry->edit, entry->origin); !s.ok()) {
          report_.refused.push_back(fmt::format("{} refused by the replayed state: {}",
                                                protocol::JournalRecordToText(*entry), s.message()));
        }
        return Status::Ok();
      }
      case state::EditOrigin::kLifecycle:
      case state::EditOrigin::kColocation:
      case state::EditOrigin::kEngine:
        // Outside its step: the journal has an edit the replay's pass
        // structure cannot have made.
        Count(report_.journal, placed_journal_, entry->at, entry->edit);
        ++report_.compared;
        report_.differences.push_back({entry->at, "outside a pass step", protocol::JournalRecordToText(*entry), ""});
        return Status::Ok();
    }
    return Status::Ok();
  }
  CloseStep();
  if (const auto* load = std::get_if<protocol::LoadSample>(&record)) {
    controller_->ObserveLoad(load->workload, load->at, load->rps);
    load_history_.push_back(*load);
    while (!load_history_.empty() && !InLoadHistoryWindow(load_history_.front().at, load->at))
      load_history_.pop_front();
    return Status::Ok();
  }
  if (const auto* start = std::get_if<protocol::ServerStart>(&record)) {
    machine_->AdvanceTo(start->at);
    Snapshot kept = machine_->state().snapshot();
    kept.now = machine_->state().now();
    auto restarted = state::RestartedState(std::move(kept), registered_, machine_->state().extras().scale_ups);
    if (!restarted.ok()) {
      return FailedPrecondition(fmt::format("journal: the state at the server_start of t={}ms does not restart: {}",
                                            ToMillis(start->at), restarted.status().message()));
    }
    ++report_.restarts;
    Start(*std::move(restarted));
    for (const protocol::LoadSample& s : load_history_) {
      if (InLoadHistoryWindow(s.at, start->at)) controller_->ObserveLoad(s.workload, s.at, s.rps);
    }
    return Status::Ok();
  }
  const auto& marker = std::get<protocol::PassMarker>(record);
  machine_->AdvanceTo(marker.at);
  capturing_ = true;
  captured_.clear();
  switch (marker.phase) {
    case protocol::PassPhase::kTick:
      ++report_.passes;
      machine_->Tick();
      OpenStep(Step::kTick, marker.at, std::move(captured_));
      break;
    case protocol::PassPhase::kPlanSnapshot:
      plan_ = controller_->Prepare(machine_->state().snapshot());
      break;
    case protocol::PassPhase::kPlanApply:
      if (!plan_) {
        capturing_ = false;
        return FailedPrecondition(fmt::format("journal: plan_apply at t={}ms without a plan_snapshot before it",
                                              ToMillis(marker.at)));
      }
      machine_->ApplyPlan(*plan_);
      plan_.reset();
      OpenStep(Step::kPlanApply, marker.at, std::move(captured_));
      break;
    case protocol::PassPhase::kEngineSnapshot:
      // Compared with the journaled edits only: no wait explanations.
      decisions_ = scheduler_->Schedule(machine_->state().snapshot(), ScheduleOptions{.explain_waits = false});
      break;
    case protocol::PassPhase::kEngineApply:
      if (!decisions_) {
        capturing_ = false;
        return FailedPrecondition(fmt::format(
            "journal: engine_apply at t={}ms without an engine_snapshot before it", ToMillis(marker.at)));
      }
      machine_->ApplyDecisions(*decisions_);
      decisions_.reset();
      OpenStep(Step::kEngineApply, marker.at, std::move(captured_));
      break;
  }
  capturing_ = false;
  captured_.clear();
  return Status::Ok();
}

Status JournalReplay::FeedText(int64_t seq, std::string_view text) {
  auto record = protocol::JournalRecordFromText(text);
  if (!record.ok()) return record.status().WithContext(fmt::format("journal row {}: ", seq));
  return Feed(*record);
}

Status JournalReplay::KeepLoadText(int64_t seq, std::string_view text) {
  auto record = protocol::JournalRecordFromText(text);
  if (!record.ok()) return record.status().WithContext(fmt::format("journal row {}: ", seq));
  // Any other record is one the snapshot covers and a compaction (in
  // steps) has not deleted yet.
  if (const auto* load = std::get_if<protocol::LoadSample>(&*record)) load_history_.push_back(*load);
  return Status::Ok();
}

protocol::JournalSnapshot JournalReplay::SnapshotAt(int64_t seq) const {
  protocol::JournalSnapshot snapshot = protocol::SnapshotOf(seq, machine_->state(), registered_);
  snapshot.colocation = controller_->memory();
  return snapshot;
}

ReplayReport JournalReplay::Finish() {
  CloseStep();
  return std::move(report_);
}

StatusOr<nlohmann::json> ConfigJson(std::string_view text, std::string_view what) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool json = first != std::string_view::npos && text[first] == '{';
  auto doc = json ? config::YamlDocument::ParseJson(text, std::string(what))
                  : config::YamlDocument::Parse(text, std::string(what));
  if (!doc.ok()) return doc.status();
  return doc->root();
}

StatusOr<config::ClusterConfig> ParseClusterText(std::string_view text, std::string_view what) {
  TIDAL_ASSIGN_OR_RETURN(nlohmann::json root, ConfigJson(text, what));
  auto parsed = config::ParseClusterJson(root);
  if (!parsed.ok()) return parsed.status().WithContext(std::string(what) + ": ");
  return parsed;
}

StatusOr<PolicyConfig> ParsePolicyText(std::string_view text, std::string_view what) {
  TIDAL_ASSIGN_OR_RETURN(nlohmann::json root, ConfigJson(text, what));
  auto parsed = config::ParsePolicyJson(root);
  if (!parsed.ok()) return parsed.status().WithContext(std::string(what) + ": ");
  return parsed;
}

}  // namespace tidal::sim
