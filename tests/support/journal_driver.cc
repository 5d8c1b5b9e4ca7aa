#include "tests/support/journal_driver.h"

#include <gtest/gtest.h>

#include <optional>
#include <variant>

namespace tidal::testing {

using protocol::JournalRecord;
using protocol::PassPhase;

JournalDriver::JournalDriver(state::State initial, const PolicyConfig& policy)
    : machine_(std::move(initial), state::ServerLifecycleOptions(policy)), controller_(policy), scheduler_(policy) {
  // The server's sink: every applied edit is encoded, in order.
  machine_.set_sink([this](Time at, state::EditOrigin origin, const state::Edit& edit) {
    records_.push_back(protocol::JournalEntryText(at, origin, edit));
    if (origin == state::EditOrigin::kWorld || origin == state::EditOrigin::kPriority) return;
    if (std::holds_alternative<state::PlaceEdit>(edit)) ++placements_;
    if (std::holds_alternative<state::NoticeEdit>(edit)) ++notices_;
    if (std::holds_alternative<state::LendEdit>(edit)) ++lends_;
    if (std::holds_alternative<state::ReturnEdit>(edit)) ++returns_;
  });
}

Status JournalDriver::World(Time at, const state::Edit& edit, state::EditOrigin origin) {
  machine_.AdvanceTo(at);
  return machine_.Apply(edit, origin);
}

void JournalDriver::Marker(Time at, PassPhase phase) {
  records_.push_back(protocol::JournalRecordToText(protocol::PassMarker{at, phase}));
}

void JournalDriver::Pass(Time now, const std::vector<std::pair<WorkloadId, double>>& loads,
                         const std::function<void(PassPhase after)>& between) {
  machine_.AdvanceTo(now);
  // Markers carry the state's clock, which is what every edit after them
  // applies at.
  const auto clock = [&] { return machine_.state().now(); };
  Marker(clock(), PassPhase::kTick);
  machine_.Tick();

  for (const auto& [service, rps] : loads) {
    controller_.ObserveLoad(service, clock(), rps);
    records_.push_back(protocol::JournalRecordToText(protocol::LoadSample{clock(), service, rps}));
  }
  Marker(clock(), PassPhase::kPlanSnapshot);
  const ColocationPlan plan = controller_.Prepare(machine_.state().snapshot());
  if (between) between(PassPhase::kPlanSnapshot);
  Marker(clock(), PassPhase::kPlanApply);
  machine_.ApplyPlan(plan);

  Marker(clock(), PassPhase::kEngineSnapshot);
  const Decisions decisions = scheduler_.Schedule(machine_.state().snapshot());
  if (between) between(PassPhase::kEngineSnapshot);
  Marker(clock(), PassPhase::kEngineApply);
  machine_.ApplyDecisions(decisions);
}

std::vector<std::string> JournalDriver::TakeNew() {
  std::vector<std::string> out(records_.begin() + static_cast<std::ptrdiff_t>(taken_), records_.end());
  taken_ = records_.size();
  return out;
}

void ExpectServerJournalOrder(const std::vector<std::string>& records) {
  // The origin of the step whose edits may follow (a plain flag and value:
  // GCC 12 warns falsely about an optional of an enum here).
  bool open = false;
  state::EditOrigin open_origin = state::EditOrigin::kWorld;
  std::optional<PassPhase> last_phase;
  Time last_at = Time::min();
  for (size_t i = 0; i < records.size(); ++i) {
    auto decoded = protocol::JournalRecordFromText(records[i]);
    ASSERT_TRUE(decoded.ok()) << "record " << i << ": " << decoded.status().ToString();
    const JournalRecord& r = *decoded;
    const Time at = std::visit([](const auto& x) { return x.at; }, r);
    EXPECT_GE(at, last_at) << "record " << i << " goes back in time: " << records[i];
    last_at = at;
    if (const auto* e = std::get_if<state::JournalEntry>(&r)) {
      const bool made_by_pass = e->origin == state::EditOrigin::kLifecycle ||
                                e->origin == state::EditOrigin::kColocation ||
                                e->origin == state::EditOrigin::kEngine;
      if (made_by_pass) {
        EXPECT_TRUE(open && open_origin == e->origin)
            << "record " << i << " is not inside its pass step: " << records[i];
      } else {
        open = false;
      }
      continue;
    }
    open = false;
    const auto* m = std::get_if<protocol::PassMarker>(&r);
    if (m == nullptr) continue;  // a load sample
    switch (m->phase) {
      case PassPhase::kTick:
        open = true;
        open_origin = state::EditOrigin::kLifecycle;
        break;
      case PassPhase::kPlanApply:
        EXPECT_TRUE(last_phase == PassPhase::kPlanSnapshot) << "record " << i << ": plan_apply without its snapshot";
        open = true;
        open_origin = state::EditOrigin::kColocation;
        break;
      case PassPhase::kEngineApply:
        EXPECT_TRUE(last_phase == PassPhase::kEngineSnapshot) << "record " << i << ": engine_apply without its snapshot";
        open = true;
        open_origin = state::EditOrigin::kEngine;
        break;
      case PassPhase::kPlanSnapshot:
      case PassPhase::kEngineSnapshot:
        EXPECT_TRUE(last_phase.has_value() && *last_phase < m->phase)
            << "record " << i << ": " << protocol::PassPhaseName(m->phase) << " out of order";
        break;
    }
    last_phase = m->phase;
  }
}

}  // namespace tidal::testing
