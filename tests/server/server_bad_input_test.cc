// Bad input: each request gets a 4xx whose message names the field, the
// server keeps serving, and nothing changes.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include <fmt/format.h>

#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

struct BadCase {
  std::string method, path, body;
  int status;
  std::string field;  // "" = no field expected
};

TEST(ServerBadInput, EveryBadRequestIsA4xxNamingTheFieldAndChangesNothing) {
  ServerProcess s;
  json reg = {{"name", "n1"}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}})}};
  HttpReply registered = s.PostJson("/v1/agent/register", kAgentToken, reg);
  ASSERT_EQ(registered.status, 200);
  const std::string n1_credential = registered.json()["credential"];
  // One workload that no pass will touch (it awaits approval), to resize.
  HttpReply held = s.PostJson("/v1/workloads", kAdminToken,
                              json{{"name", "held"}, {"project", "llm-pretrain"}, {"gpus_per_replica", 1}, {"replicas", 1},
                                   {"min_replicas", 1}, {"max_replicas", 2}});
  ASSERT_EQ(held.status, 201) << held.body;
  ASSERT_EQ(held.json()["id"], 1);
  // Let a scheduling pass record its wait reason, so later passes change nothing.
  for (int i = 0; i < 200 && s.Get("/v1/workloads/1", kAdminToken).json()["wait"].is_null(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The audit rows requests can cause (co-location loans come from the loop).
  auto request_audit = [&] {
    json rows = json::array();
    const json all = s.Get("/v1/audit", kAdminToken).json();
    for (const json& a : all["audit"]) {
      if (a["action"] != "loan" && a["action"] != "return") rows.push_back(a);
    }
    return rows;
  };
  const json audit_before = request_audit();
  const std::string workloads_before = s.Get("/v1/workloads", kAdminToken).body;
  const std::vector<BadCase> cases = {
      {"POST", "/v1/workloads", "{", 400, "body"},
      {"POST", "/v1/workloads", "", 400, "body"},
      {"POST", "/v1/workloads", "[]", 400, ""},
      {"POST", "/v1/workloads", R"({"project": "vision"})", 400, "name"},
      {"POST", "/v1/workloads", R"({"name": 7, "project": "vision"})", 400, "name"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "replicas": "two"})", 400, "replicas"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "replicas": -2})", 400, "replicas"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "replicas": 1.5})", 400, "replicas"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "gpus_per_replica": 1000})", 400, "gpus_per_replica"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "gpus_per_replica": 16})", 400, "gpus_per_replica"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "gpus_per_replica": 8, "replicas": 600})", 400, "replicas"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "replicas": 2, "min_replicas": 3})", 400, "min_replicas"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "gpu": 1})", 400, "gpu"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "priority": 9000})", 400, "priority"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "queue": "nope"})", 400, "queue"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "nope"})", 400, "project"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "kind": "quantum"})", 400, "kind"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "topology": {"level": "galaxy"}})", 400, "topology.level"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "tolerations": "all"})", 400, "tolerations"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "duration_s": -5})", 400, "duration_s"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "chat-serving", "kind": "inference"})", 400, "replica_capacity_rps"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "readiness": {"port": 70000}})", 400, "readiness.port"},
      {"POST", "/v1/workloads", R"({"name": "x", "project": "vision", "env": {"A": 1}})", 400, "env.A"},
      {"POST", "/v1/workloads", "{\"name\": \"" + std::string(2 << 20, 'a') + "\"}", 413, ""},
      {"GET", "/v1/workloads/abc", "", 400, "id"},
      {"GET", "/v1/workloads/-1", "", 400, "id"},
      {"GET", "/v1/workloads/999", "", 404, ""},
      {"GET", "/v1/workloads?kind=foo", "", 400, "kind"},
      {"GET", "/v1/workloads?limit=-1", "", 400, "limit"},
      {"GET", "/v1/workloads?colour=red", "", 400, "colour"},
      {"GET", "/v1/audit?from_ms=yesterday", "", 400, "from_ms"},
      {"GET", "/v1/loans?hours=0", "", 400, "hours"},
      {"GET", "/v1/loans?hours=100000", "", 400, "hours"},
      {"GET", "/v1/loans?slot_minutes=1", "", 400, "slot_minutes"},
      {"GET", "/v1/loans?hours=1&slot_minutes=120", "", 400, "slot_minutes"},
      {"GET", "/v1/loans?days=2", "", 400, "days"},
      {"GET", "/v1/reports?format=xml", "", 400, "format"},
      {"POST", "/v1/workloads/999/cancel", "", 404, ""},
      {"POST", "/v1/workloads/999/resize", R"({"replicas": 2})", 404, ""},
      {"POST", "/v1/workloads/1/resize", R"({"replicas": "x"})", 400, "replicas"},
      {"POST", "/v1/dry-run", R"({"name": "x", "project": "vision", "replicas": 0})", 400, "replicas"},
      {"POST", "/v1/agent/register", R"({"name": "n2", "gpus": []})", 400, "gpus"},
      {"POST", "/v1/agent/register", R"({"name": "n2", "gpus": [{"index": 0}], "pool": "moon"})", 400, "pool"},
      {"POST", "/v1/agent/register", R"({"gpus": [{"index": 0}]})", 400, "name"},
      {"POST", "/v1/agent/nodes/ghost/heartbeat", "{}", 404, ""},
      {"POST", "/v1/agent/nodes/n1/heartbeat", R"({"gpus": [{"index": 5}]})", 400, "gpus[0].index"},
      {"POST", "/v1/agent/nodes/n1/heartbeat", R"({"gpus": [{"index": 0, "utilization": 7}]})", 400, "gpus[0].utilization"},
      {"POST", "/v1/agent/nodes/n1/pods/status", R"({"events": [{"workload": 1, "rank": 0, "phase": "dancing"}]})", 400, "events[0].phase"},
      {"POST", "/v1/agent/nodes/n1/pods/status", R"({"events": {}})", 400, "events"},
      {"GET", "/v1/no-such-route", "", 404, ""},
  };
  for (const BadCase& c : cases) {
    // Registration takes the bootstrap token, n1's endpoints n1's own
    // credential; the rest (a node nobody registered) an admin's.
    const std::string token = c.path.starts_with("/v1/agent/register") ? kAgentToken
                              : c.path.starts_with("/v1/agent/nodes/n1/") ? n1_credential
                                                                          : kAdminToken;
    const HttpReply r = c.method == "GET" ? s.Get(c.path, token) : s.Post(c.path, token, c.body);
    const std::string what = c.method + " " + c.path + " " + c.body.substr(0, 120) + " -> " + r.body.substr(0, 300);
    ASSERT_NE(r.status, 0) << "the server stopped answering after: " << what;
    EXPECT_EQ(r.status, c.status) << what;
    const json err = r.json();
    if (c.status != 413) {
      ASSERT_TRUE(err.is_object() && err.contains("error")) << what;
      EXPECT_FALSE(err["error"]["message"].get<std::string>().empty()) << what;
    }
    if (!c.field.empty()) {
      EXPECT_EQ(err["error"]["field"], c.field) << what;
      EXPECT_NE(err["error"]["message"].get<std::string>().find(c.field), std::string::npos) << what;
    }
  }
  // Nothing changed: the same workloads, no new audit row.
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).body, workloads_before);
  EXPECT_EQ(request_audit(), audit_before);
  EXPECT_EQ(s.Get("/healthz", "").status, 200);
}

// A hostile tenant's probes (a research user unless the case says admin):
// each is refused with a 4xx naming the field and the rule, and the server
// keeps serving.
TEST(ServerBadInput, HostileSubmissionsAreRefusedNamingTheRule) {
  ServerProcess s;
  json reg = {{"name", "n1"}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}})}};
  ASSERT_EQ(s.PostJson("/v1/agent/register", kAgentToken, reg).status, 200);
  const std::string ok = R"("name": "x", "project": "vision", "gpus_per_replica": 1)";
  auto nested = [](const std::string& key) {
    return "{\"name\": \"x\", \"project\": \"vision\", \"" + key + "\": " + std::string(150000, '[') +
           std::string(150000, ']') + "}";
  };
  auto many = [](size_t n, bool map) {
    std::string out = map ? "{" : "[";
    for (size_t i = 0; i < n; ++i) {
      if (i) out += ",";
      out += map ? fmt::format("\"K{}\": \"v\"", i) : std::string("\"a\"");
    }
    return out + (map ? "}" : "]");
  };
  struct Case {
    std::string path, body;
    int status;
    std::string field, message;  // message: a substring the error must contain
  };
  const std::vector<Case> cases = {
      // 1: a queue the project is not granted (serving belongs to chat).
      {"/v1/workloads", "{" + ok + R"(, "queue": "serving"})", 403, "queue", "may not use queue \"serving\""},
      // 2: a kind the project is not granted.
      {"/v1/workloads", R"({"name": "x", "project": "vision", "kind": "inference", "replica_capacity_rps": 5})",
       403, "kind", "may not submit kind inference"},
      // 5: nesting bombs, in several fields and on the dry run.
      {"/v1/workloads", nested("labels"), 400, "body", "limit of 64"},
      {"/v1/workloads", nested("env"), 400, "body", "limit of 64"},
      {"/v1/workloads", nested("command"), 400, "body", "limit of 64"},
      {"/v1/dry-run", nested("node_selector"), 400, "body", "limit of 64"},
      // 6: numbers.
      {"/v1/workloads", "{" + ok + R"(, "replicas": 1e309})", 400, "body", "1e309"},
      {"/v1/workloads", "{" + ok + R"(, "replicas": 9223372036854775808})", 400, "replicas", "got 9223372036854775808"},
      {"/v1/workloads", R"({"name": "x", "project": "vision", "gpus_per_replica": null})", 400, "gpus_per_replica",
       "from 1 to 64, got nothing"},
      // 6: names.
      {"/v1/workloads", R"({"name": "a\u0000b", "project": "vision", "gpus_per_replica": 1})", 400, "name", "DNS-1123"},
      {"/v1/workloads", R"({"name": "a\nb", "project": "vision", "gpus_per_replica": 1})", 400, "name", "DNS-1123"},
      {"/v1/workloads", R"({"name": "evil\u202e", "project": "vision", "gpus_per_replica": 1})", 400, "name", "DNS-1123"},
      {"/v1/workloads", R"({"name": "Upper", "project": "vision", "gpus_per_replica": 1})", 400, "name", "DNS-1123"},
      {"/v1/workloads", "{\"name\": \"" + std::string(64, 'a') + "\", \"project\": \"vision\", \"gpus_per_replica\": 1}",
       400, "name", "64 characters"},
      {"/v1/agent/register", R"({"name": "../../x", "gpus": [{"index": 0}]})", 400, "name", "DNS-1123"},
      // 6: label text and list sizes.
      {"/v1/workloads", "{" + ok + R"(, "labels": {"team": "a\nb"}})", 400, "labels.team", "printable"},
      {"/v1/workloads", "{" + ok + R"(, "node_selector": {"k": "\u202e"}})", 400, "node_selector.k", "printable"},
      {"/v1/workloads", "{" + ok + ", \"command\": " + many(100000, false) + "}", 400, "command", "at most 1024"},
      {"/v1/workloads", "{" + ok + ", \"env\": " + many(40000, true) + "}", 400, "env", "at most 1024"},
      {"/v1/workloads", "{" + ok + ", \"labels\": " + many(40000, true) + "}", 400, "labels", "at most 64"},
      {"/v1/workloads", "{" + ok + R"(, "env": {"A=B": "x"}})", 400, "env.A=B", "environment variable name"},
      // 2: a deadline moments away.
      {"/v1/workloads", "{" + ok + R"(, "deadline_s": 100, "duration_s": 99})", 400, "deadline_s", "at least 600 s"},
      // 9: a training job must say its GPUs.
      {"/v1/workloads", R"({"name": "x", "project": "vision"})", 400, "gpus_per_replica", "required for kind training"},
      {"/v1/workloads", R"({"name": "x", "project": "vision", "kind": "batch_inference"})", 400, "gpus_per_replica",
       "required for kind batch_inference"},
  };
  for (const Case& c : cases) {
    const std::string token = c.path.find("/agent/") != std::string::npos ? kAgentToken : kResearchToken;
    const HttpReply r = s.Post(c.path, token, c.body);
    const std::string what = c.path + " " + c.body.substr(0, 100) + " -> " + r.body.substr(0, 300);
    ASSERT_NE(r.status, 0) << "the server stopped answering after: " << what;
    EXPECT_EQ(r.status, c.status) << what;
    const json err = r.json();
    if (!err.is_object() || !err.contains("error")) {
      ADD_FAILURE() << "no error: " << what;
      continue;
    }
    EXPECT_EQ(err["error"]["field"], c.field) << what;
    EXPECT_NE(err["error"]["message"].get<std::string>().find(c.message), std::string::npos) << what;
  }
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 0u);
  // What stays allowed: the project's own queue, a debug job without GPUs given.
  EXPECT_EQ(s.Post("/v1/workloads", kResearchToken, "{" + ok + R"(, "queue": "research"})").status, 201);
  EXPECT_EQ(s.Post("/v1/workloads", kResearchToken,
                   R"({"name": "nb", "project": "sandbox", "kind": "debug"})").status, 201);
}

TEST(ServerBadInput, IdempotencyKeyReusedWithAnotherBodyIsAConflictNamingTheKey) {
  ServerProcess s;
  const std::string body = R"({"name": "a", "project": "vision", "gpus_per_replica": 1})";
  HttpReply first = s.Post("/v1/workloads", kResearchToken, body, {{"Idempotency-Key", "k-7"}});
  ASSERT_EQ(first.status, 201) << first.body;
  // The same body, spelled differently, is a retry.
  HttpReply retry = s.Post("/v1/workloads", kResearchToken,
                           R"({"gpus_per_replica": 1,  "project": "vision", "name": "a"})",
                           {{"Idempotency-Key", "k-7"}});
  EXPECT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(retry.json()["id"], first.json()["id"]);
  HttpReply other = s.Post("/v1/workloads", kResearchToken,
                           R"({"name": "b", "project": "vision", "gpus_per_replica": 8})",
                           {{"Idempotency-Key", "k-7"}});
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_NE(other.body.find("k-7"), std::string::npos) << other.body;
  // Also after a restart, from what the store kept.
  s.Kill(SIGKILL);
  ASSERT_TRUE(s.Start());
  EXPECT_EQ(s.Post("/v1/workloads", kResearchToken, R"({"name": "b", "project": "vision", "gpus_per_replica": 8})",
                   {{"Idempotency-Key", "k-7"}}).status, 409);
  EXPECT_EQ(s.Post("/v1/workloads", kResearchToken, body, {{"Idempotency-Key", "k-7"}}).status, 200);
}

}  // namespace
}  // namespace tidal::testing
