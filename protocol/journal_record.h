// The edit journal's records (docs/formats.md "Journal"): every edit the
// server's StateMachine applied, the markers of its scheduling pass and the
// load samples fed to the co-location controller, one JSON object each, in
// the order they happened. `tidal sim replay` reads them back and reruns the
// pass (sim/journal_replay.h), so the codec is lossless: a decoded record
// equals the encoded one field for field (a SubmitEdit's whole Workload,
// derived priority included), and equal records encode to equal JSON, which
// is how the replay compares edits.
//
// Reading is strict: an unknown record kind or edit, an unknown or missing
// field, a wrong type, an id or enum out of range, or an oversized list is
// an error that names the field ("pods[3].gpus[0]: ...").
#ifndef TIDAL_PROTOCOL_JOURNAL_RECORD_H_
#define TIDAL_PROTOCOL_JOURNAL_RECORD_H_

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/common/ids.h"
#include "core/common/status.h"
#include "core/common/time.h"
#include "core/state/edit.h"

namespace tidal::protocol {

// The steps of one server pass, journaled in this order (docs/formats.md):
// tick (then the lifecycle's edits), plan_snapshot (the co-location plan is
// computed from the state here), plan_apply (then the plan's edits),
// engine_snapshot (Scheduler::Schedule runs on the state here), engine_apply
// (then the decisions' edits).
enum class PassPhase : uint8_t { kTick, kPlanSnapshot, kPlanApply, kEngineSnapshot, kEngineApply };
// "tick", "plan_snapshot", "plan_apply", "engine_snapshot", "engine_apply".
std::string_view PassPhaseName(PassPhase phase);

struct PassMarker {
  Time at;
  PassPhase phase = PassPhase::kTick;
};

// A service's observed request rate, as fed to ColocationController::ObserveLoad.
struct LoadSample {
  Time at;
  WorkloadId workload;
  double rps = 0;
};

// The server (re)started on this store at `at`: from here its state is
// state::RestartedState of what it kept, and its controller, scheduler and
// timers start afresh. A replay does the same at this record.
struct ServerStart {
  Time at;
};

using JournalRecord = std::variant<state::JournalEntry, PassMarker, LoadSample, ServerStart>;

// Bounds on what a record may hold; beyond them a record is refused as hostile.
inline constexpr size_t kMaxJournalRecordBytes = 1 << 20;
inline constexpr size_t kMaxJournalPods = 4096;
inline constexpr size_t kMaxJournalListEntries = 256;
inline constexpr size_t kMaxJournalStringBytes = 4096;

nlohmann::json JournalRecordToJson(const JournalRecord& record);
StatusOr<JournalRecord> JournalRecordFromJson(const nlohmann::json& j);

// One line of compact JSON (what the store keeps), and back. The text is
// refused beyond kMaxJournalRecordBytes or nested deeper than a record can be.
std::string JournalRecordToText(const JournalRecord& record);
StatusOr<JournalRecord> JournalRecordFromText(std::string_view text);

// The text of one applied edit, as JournalRecordToText gives it for a
// JournalEntry{at, origin, edit}, without copying the edit (the server's sink
// calls it for every edit; a submit's carries the whole workload).
std::string JournalEntryText(Time at, state::EditOrigin origin, const state::Edit& edit);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_JOURNAL_RECORD_H_
