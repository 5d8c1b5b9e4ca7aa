#include "protocol/loan_calendar.h"

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/object_reader.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;

Status ReadTime(const ObjectReader& r, std::string_view key, Time* out) {
  if (!r.Has(key)) return r.Missing(key);
  int64_t ms = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64(key, &ms));
  *out = TimeFromMillis(ms);
  return Status::Ok();
}

Status ReadOptionalTime(const ObjectReader& r, std::string_view key, std::optional<Time>* out) {
  if (!r.Has(key)) return Status::Ok();
  Time t;
  TIDAL_RETURN_IF_ERROR(ReadTime(r, key, &t));
  *out = t;
  return Status::Ok();
}

Status ReadCounts(const ObjectReader& r, std::string_view key, std::vector<int>* out) {
  if (!r.Has(key)) return r.Missing(key);
  return r.IntList(key, out, 0, std::numeric_limits<int>::max());
}

// Every per-slot list has one entry per slot.
Status CheckSlots(const ObjectReader& r, std::string_view key, size_t size, int slots) {
  if (size == static_cast<size_t>(slots)) return Status::Ok();
  return FieldError(r.FieldPath(key), "expected " + std::to_string(slots) + " entries (one per slot), got " +
                                          std::to_string(size));
}

}  // namespace

json LoanCalendarToJson(const LoanCalendar& c) {
  json nodes = json::array();
  for (const NodeLoanPlan& n : c.nodes) {
    json windows = json::array();
    for (const LoanWindow& w : n.windows) {
      windows.push_back({{"lend_at_ms", ToMillis(w.lend_at)},
                         {"return_by_ms", OptionalMillisJson(w.return_by)},
                         {"notice_at_ms", OptionalMillisJson(w.notice_at)},
                         {"return_earliest_ms", ToMillis(w.return_earliest)},
                         {"return_latest_ms", OptionalMillisJson(w.return_latest)}});
    }
    nodes.push_back({{"node", n.name}, {"timeline", n.timeline}, {"windows", std::move(windows)}});
  }
  json services = json::array();
  for (const ServiceLoadPlan& s : c.services) {
    json load = json::array();
    for (const LoadBand& b : s.load) load.push_back({{"low", b.low}, {"planned", b.planned}, {"high", b.high}});
    services.push_back({{"id", s.service.value()},
                        {"name", s.name},
                        {"profiled", s.profiled},
                        {"load_rps", std::move(load)},
                        {"planned_replicas", s.planned_replicas}});
  }
  return {{"from_ms", ToMillis(c.from)},
          {"slot_ms", c.slot.count()},
          {"slots", c.slots},
          {"mode", ColocationModeName(c.mode)},
          {"lookahead_ms", c.lookahead.count()},
          {"lent_low_load", c.lent_low_load},
          {"lent_planned", c.lent_planned},
          {"lent_high_load", c.lent_high_load},
          {"nodes", std::move(nodes)},
          {"services", std::move(services)}};
}

StatusOr<LoanCalendar> LoanCalendarFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::nullopt));
  LoanCalendar c;
  TIDAL_RETURN_IF_ERROR(ReadTime(r, "from_ms", &c.from));
  int64_t slot_ms = 0;
  if (!r.Has("slot_ms")) return r.Missing("slot_ms");
  TIDAL_RETURN_IF_ERROR(r.Int64("slot_ms", &slot_ms, 1));
  c.slot = Duration(slot_ms);
  if (!r.Has("slots")) return r.Missing("slots");
  TIDAL_RETURN_IF_ERROR(r.Int("slots", &c.slots, 0, kMaxLoanCalendarSlots));
  std::string mode;
  if (!r.Has("mode")) return r.Missing("mode");
  TIDAL_RETURN_IF_ERROR(r.String("mode", &mode));
  bool known = false;
  for (ColocationMode m : {ColocationMode::kStatic, ColocationMode::kReactive, ColocationMode::kPredictive}) {
    if (ColocationModeName(m) == mode) {
      c.mode = m;
      known = true;
    }
  }
  if (!known) return FieldError(r.FieldPath("mode"), "unknown co-location mode " + Shown(r.at("mode")));
  int64_t lookahead_ms = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64("lookahead_ms", &lookahead_ms, 0));
  c.lookahead = Duration(lookahead_ms);
  TIDAL_RETURN_IF_ERROR(ReadCounts(r, "lent_low_load", &c.lent_low_load));
  TIDAL_RETURN_IF_ERROR(ReadCounts(r, "lent_planned", &c.lent_planned));
  TIDAL_RETURN_IF_ERROR(ReadCounts(r, "lent_high_load", &c.lent_high_load));
  TIDAL_RETURN_IF_ERROR(CheckSlots(r, "lent_low_load", c.lent_low_load.size(), c.slots));
  TIDAL_RETURN_IF_ERROR(CheckSlots(r, "lent_planned", c.lent_planned.size(), c.slots));
  TIDAL_RETURN_IF_ERROR(CheckSlots(r, "lent_high_load", c.lent_high_load.size(), c.slots));

  if (!r.Has("nodes")) return r.Missing("nodes");
  TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("nodes"), r.FieldPath("nodes")));
  size_t i = 0;
  for (const json& nj : r.at("nodes")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader nr, ObjectReader::Open(nj, IndexPath("nodes", i++), std::nullopt));
    NodeLoanPlan n;
    if (!nr.Has("node")) return nr.Missing("node");
    TIDAL_RETURN_IF_ERROR(nr.String("node", &n.name));
    TIDAL_RETURN_IF_ERROR(nr.String("timeline", &n.timeline));
    TIDAL_RETURN_IF_ERROR(CheckSlots(nr, "timeline", n.timeline.size(), c.slots));
    if (nr.Has("windows")) {
      TIDAL_RETURN_IF_ERROR(ExpectArray(nr.at("windows"), nr.FieldPath("windows")));
      size_t k = 0;
      for (const json& wj : nr.at("windows")) {
        TIDAL_ASSIGN_OR_RETURN(ObjectReader wr, ObjectReader::Open(wj, IndexPath(nr.FieldPath("windows"), k++),
                                                                   std::nullopt));
        LoanWindow w;
        TIDAL_RETURN_IF_ERROR(ReadTime(wr, "lend_at_ms", &w.lend_at));
        TIDAL_RETURN_IF_ERROR(ReadOptionalTime(wr, "return_by_ms", &w.return_by));
        TIDAL_RETURN_IF_ERROR(ReadOptionalTime(wr, "notice_at_ms", &w.notice_at));
        TIDAL_RETURN_IF_ERROR(ReadTime(wr, "return_earliest_ms", &w.return_earliest));
        TIDAL_RETURN_IF_ERROR(ReadOptionalTime(wr, "return_latest_ms", &w.return_latest));
        n.windows.push_back(w);
      }
    }
    c.nodes.push_back(std::move(n));
  }

  if (r.Has("services")) {
    TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("services"), r.FieldPath("services")));
    i = 0;
    for (const json& sj : r.at("services")) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader sr, ObjectReader::Open(sj, IndexPath("services", i++), std::nullopt));
      ServiceLoadPlan s;
      int64_t id = 0;
      if (!sr.Has("id")) return sr.Missing("id");
      TIDAL_RETURN_IF_ERROR(sr.Int64("id", &id, 1));
      s.service = WorkloadId(static_cast<uint64_t>(id));
      TIDAL_RETURN_IF_ERROR(sr.String("name", &s.name));
      TIDAL_RETURN_IF_ERROR(sr.Bool("profiled", &s.profiled));
      if (sr.Has("load_rps")) {
        TIDAL_RETURN_IF_ERROR(ExpectArray(sr.at("load_rps"), sr.FieldPath("load_rps")));
        size_t k = 0;
        for (const json& bj : sr.at("load_rps")) {
          TIDAL_ASSIGN_OR_RETURN(ObjectReader br, ObjectReader::Open(bj, IndexPath(sr.FieldPath("load_rps"), k++),
                                                                     std::nullopt));
          LoadBand b;
          constexpr double kMax = std::numeric_limits<double>::max();
          TIDAL_RETURN_IF_ERROR(br.Double("low", &b.low, 0, kMax));
          TIDAL_RETURN_IF_ERROR(br.Double("planned", &b.planned, 0, kMax));
          TIDAL_RETURN_IF_ERROR(br.Double("high", &b.high, 0, kMax));
          s.load.push_back(b);
        }
      }
      if (sr.Has("planned_replicas")) {
        TIDAL_RETURN_IF_ERROR(sr.IntList("planned_replicas", &s.planned_replicas, 0, std::numeric_limits<int>::max()));
      }
      TIDAL_RETURN_IF_ERROR(CheckSlots(sr, "load_rps", s.load.size(), c.slots));
      TIDAL_RETURN_IF_ERROR(CheckSlots(sr, "planned_replicas", s.planned_replicas.size(), c.slots));
      c.services.push_back(std::move(s));
    }
  }
  return c;
}

}  // namespace tidal::protocol
