// The loan calendar GET /v1/loans answers survives encode -> decode
// unchanged, and decode errors name the field.
#include <gtest/gtest.h>

#include "protocol/loan_calendar.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;

json Wire(const json& j) { return json::parse(j.dump()); }

LoanCalendar Sample() {
  LoanCalendar c;
  c.from = TimeFromMillis(1'764'000'000'000);
  c.slot = minutes(30);
  c.slots = 3;
  c.mode = ColocationMode::kReactive;
  c.lookahead = minutes(6);
  c.lent_low_load = {2, 2, 1};
  c.lent_planned = {2, 1, 0};
  c.lent_high_load = {1, 0, 0};
  NodeLoanPlan a;
  a.name = "gpu-s1";
  a.timeline = "Ll.";
  LoanWindow w;
  w.lend_at = c.from;
  w.return_by = c.from + minutes(60);
  w.notice_at = c.from + minutes(54);
  w.return_earliest = c.from + minutes(30);
  w.return_latest = std::nullopt;
  a.windows.push_back(w);
  NodeLoanPlan b;
  b.name = "gpu-s2";
  b.timeline = "L-.";
  LoanWindow open;
  open.lend_at = c.from;
  open.return_by = c.from + minutes(30);
  open.notice_at = c.from + minutes(24);
  open.return_earliest = c.from + minutes(30);
  open.return_latest = c.from + minutes(60);
  b.windows.push_back(open);
  c.nodes = {a, b};
  ServiceLoadPlan s;
  s.service = WorkloadId(7);
  s.name = "chat";
  s.profiled = true;
  s.load = {{10, 12.5, 20}, {30, 40, 55.25}, {0, 0, 0}};
  s.planned_replicas = {2, 5, 1};
  c.services = {s};
  return c;
}

TEST(LoanCalendarCodecTest, RoundTripsEveryField) {
  const LoanCalendar c = Sample();
  auto decoded = LoanCalendarFromJson(Wire(LoanCalendarToJson(c)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, c);
}

TEST(LoanCalendarCodecTest, ErrorsNameTheField) {
  json j = LoanCalendarToJson(Sample());
  j["mode"] = "tidal";
  auto bad = LoanCalendarFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("mode:", 0), 0u) << bad.status().message();

  j = LoanCalendarToJson(Sample());
  j["nodes"][1]["windows"][0]["lend_at_ms"] = "soon";
  bad = LoanCalendarFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("nodes[1].windows[0].lend_at_ms:", 0), 0u) << bad.status().message();

  j = LoanCalendarToJson(Sample());
  j["services"][0]["load_rps"][1]["high"] = -1;
  bad = LoanCalendarFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("services[0].load_rps[1].high:", 0), 0u) << bad.status().message();

  // A list that does not match the slots is refused, not read past.
  j = LoanCalendarToJson(Sample());
  j["nodes"][0]["timeline"] = "LL";
  bad = LoanCalendarFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("nodes[0].timeline: expected 3 entries", 0), 0u) << bad.status().message();
  j = LoanCalendarToJson(Sample());
  j["lent_planned"] = json::array();
  EXPECT_FALSE(LoanCalendarFromJson(j).ok());

  j = LoanCalendarToJson(Sample());
  j.erase("slot_ms");
  bad = LoanCalendarFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("slot_ms"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace tidal::protocol
