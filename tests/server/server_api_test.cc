// API tests against a real `tidal server` process on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "protocol/workload_batch.h"
#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

json Submit(const ServerProcess& s, const std::string& token, const json& body, int expect = 201) {
  HttpReply r = s.PostJson("/v1/workloads", token, body);
  EXPECT_EQ(r.status, expect) << r.body;
  return r.json();
}

// Polls GET /v1/workloads/{id} until `pred` holds (or 15 s pass).
json WaitFor(const ServerProcess& s, uint64_t id, const std::function<bool(const json&)>& pred) {
  json w;
  for (int i = 0; i < 300; ++i) {
    w = s.Get("/v1/workloads/" + std::to_string(id), kAdminToken).json();
    if (pred(w)) return w;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "condition never held; last: " << w.dump();
  return w;
}

TEST(ServerApi, HealthAndReadiness) {
  ServerProcess s;
  ASSERT_TRUE(s.running());
  EXPECT_EQ(s.Get("/healthz", "").status, 200);
  EXPECT_EQ(s.Get("/readyz", "").status, 200);
}

TEST(ServerApi, SubmitFillsDefaultsAndDerivesPriority) {
  ServerProcess s;
  json w = Submit(s, kResearchToken, {{"name", "ft"}, {"project", "vision"}, {"gpus_per_replica", 8}, {"replicas", 2}});
  EXPECT_GT(w["id"].get<uint64_t>(), 0u);
  EXPECT_EQ(w["tenant"], "research");     // from the token
  EXPECT_EQ(w["queue"], "research");      // the project's default queue
  EXPECT_EQ(w["min_replicas"], 2);        // training: a rigid gang by default
  EXPECT_EQ(w["labels"]["tidal.io/project"], "vision");
  EXPECT_EQ(w["budget_gpu_hours"], 8000.0);
  // DefaultPolicy: tier standard base 500, training +0, within guarantee +0.
  EXPECT_EQ(w["priority"]["value"], 500);
  EXPECT_EQ(w["priority"]["derivation"].back(), "total 500");
  json got = s.Get("/v1/workloads/" + std::to_string(w["id"].get<uint64_t>()), kResearchToken).json();
  EXPECT_EQ(got["name"], "ft");
}

TEST(ServerApi, SchedulingLoopPlacesAGangWhole) {
  ServerProcess s;
  s.RegisterClusterNodes();
  json w = Submit(s, kResearchToken, {{"name", "gang"}, {"project", "vision"}, {"gpus_per_replica", 8}, {"replicas", 2}});
  json running = WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  ASSERT_TRUE(running["allocation"].is_object());
  EXPECT_EQ(running["allocation"]["pods"].size(), 2u);
  for (const json& p : running["allocation"]["pods"]) EXPECT_EQ(p["gpus"].size(), 8u);
  json audit = s.Get("/v1/audit?workload=" + std::to_string(w["id"].get<uint64_t>()), kAdminToken).json();
  std::vector<std::string> actions;
  for (const json& a : audit["audit"]) actions.push_back(a["action"]);
  EXPECT_EQ(actions, (std::vector<std::string>{"admit", "priority", "place"}));
}

TEST(ServerApi, ListFiltersByProjectKindAndState) {
  ServerProcess s;
  Submit(s, kResearchToken, {{"name", "a"}, {"project", "vision"}, {"gpus_per_replica", 1}});
  Submit(s, kResearchToken, {{"name", "b"}, {"project", "sandbox"}, {"kind", "debug"}});
  Submit(s, kAdsToken, {{"name", "c"}, {"gpus_per_replica", 1}});  // ads has one project: ads-ranking
  json all = s.Get("/v1/workloads", kAdminToken).json();
  EXPECT_EQ(all["workloads"].size(), 3u);
  json own = s.Get("/v1/workloads", kResearchToken).json();
  EXPECT_EQ(own["workloads"].size(), 2u);  // a user sees only its tenant
  json debug = s.Get("/v1/workloads?kind=debug", kAdminToken).json();
  ASSERT_EQ(debug["workloads"].size(), 1u);
  EXPECT_EQ(debug["workloads"][0]["name"], "b");
  json vision = s.Get("/v1/workloads?project=vision", kAdminToken).json();
  ASSERT_EQ(vision["workloads"].size(), 1u);
  EXPECT_EQ(vision["workloads"][0]["name"], "a");
}

TEST(ServerApi, CancelPendingEndsAtOnceAndRunningGetsNotice) {
  ServerProcess s;
  s.RegisterClusterNodes();
  // The ads queue guarantees 8 GPUs and may not borrow: the second waits.
  json first = Submit(s, kAdsToken, {{"name", "one"}, {"gpus_per_replica", 8}});
  json second = Submit(s, kAdsToken, {{"name", "two"}, {"gpus_per_replica", 8}});
  WaitFor(s, first["id"], [](const json& x) { return x["state"] == "running"; });
  HttpReply c2 = s.Post("/v1/workloads/" + std::to_string(second["id"].get<uint64_t>()) + "/cancel", kAdsToken, "");
  EXPECT_EQ(c2.status, 200) << c2.body;
  EXPECT_EQ(c2.json()["state"], "cancelled");
  HttpReply c1 = s.Post("/v1/workloads/" + std::to_string(first["id"].get<uint64_t>()) + "/cancel", kAdsToken, "");
  EXPECT_EQ(c1.json()["state"], "terminating");
  EXPECT_EQ(c1.json()["stop"]["cause"], "cancel");
  // Cancelling a finished workload is refused.
  EXPECT_EQ(s.Post("/v1/workloads/" + std::to_string(second["id"].get<uint64_t>()) + "/cancel", kAdsToken, "").status, 409);
}

TEST(ServerApi, TopTierWaitsForAdminApproval) {
  ServerProcess s;
  s.RegisterClusterNodes();
  json w = Submit(s, kResearchToken, {{"name", "pretrain"}, {"project", "llm-pretrain"}, {"gpus_per_replica", 8}});
  EXPECT_EQ(w["state"], "awaiting_approval");
  EXPECT_TRUE(w["priority"]["awaiting_approval"].get<bool>());
  const std::string path = "/v1/workloads/" + std::to_string(w["id"].get<uint64_t>());
  json explain = s.Get(path + "/explain", kResearchToken).json();
  EXPECT_EQ(explain["reason"], "awaiting_approval");
  EXPECT_EQ(s.Post(path + "/approve", kResearchToken, "").status, 403);
  HttpReply ok = s.Post(path + "/approve", kAdminToken, "");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["state"], "pending");
  // Critical tier base 1000 once approved, versus the standard fallback 500.
  EXPECT_GT(ok.json()["priority"]["value"].get<int>(), w["priority"]["value"].get<int>());
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
}

TEST(ServerApi, ExplainGivesTheDominantReasonWithNumbers) {
  ServerProcess s;
  s.RegisterClusterNodes();
  Submit(s, kAdsToken, {{"name", "fill"}, {"gpus_per_replica", 8}});
  json w = Submit(s, kAdsToken, {{"name", "more"}, {"gpus_per_replica", 8}});
  const std::string path = "/v1/workloads/" + std::to_string(w["id"].get<uint64_t>()) + "/explain";
  json e;
  for (int i = 0; i < 200; ++i) {
    e = s.Get(path, kAdsToken).json();
    if (e["reason"] != "not_yet_scheduled") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(e["reason"], "quota") << e.dump();
  EXPECT_NE(e["detail"].get<std::string>().find("8"), std::string::npos) << e.dump();
  EXPECT_EQ(e["queue"]["guaranteed_gpus"], 8);
  EXPECT_FALSE(e["priority"]["derivation"].empty());
  EXPECT_FALSE(e["history"].empty());
}

TEST(ServerApi, DryRunAnswersWithoutStoringAnything) {
  ServerProcess s;
  s.RegisterClusterNodes();
  HttpReply r = s.PostJson("/v1/dry-run", kResearchToken, json{{"name", "probe"}, {"project", "vision"}, {"gpus_per_replica", 4}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json()["would_start"].get<bool>());
  EXPECT_EQ(r.json()["placement"].size(), 1u);
  HttpReply too_big = s.PostJson("/v1/dry-run", kAdsToken, json{{"name", "big"}, {"gpus_per_replica", 8}, {"replicas", 2}});
  ASSERT_EQ(too_big.status, 200);
  EXPECT_FALSE(too_big.json()["would_start"].get<bool>());
  EXPECT_EQ(too_big.json()["reason"], "quota");
  EXPECT_TRUE(s.Get("/v1/workloads", kAdminToken).json()["workloads"].empty());
}

TEST(ServerApi, IdempotencyKeyAppliesASubmitOnce) {
  ServerProcess s;
  const std::string body = json{{"name", "once"}, {"project", "vision"}, {"gpus_per_replica", 1}}.dump();
  HttpReply a = s.Post("/v1/workloads", kResearchToken, body, {{"Idempotency-Key", "k-1"}});
  HttpReply b = s.Post("/v1/workloads", kResearchToken, body, {{"Idempotency-Key", "k-1"}});
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(a.json()["id"], b.json()["id"]);
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 1u);
}

std::string Batch(std::vector<json> workloads) {
  return protocol::WorkloadBatchToJson({std::move(workloads)}).dump();
}

json Trial(const std::string& name) {
  return {{"name", name}, {"project", "vision"}, {"gpus_per_replica", 1}};
}

TEST(ServerApi, ABatchIsAdmittedWholeInItsOrder) {
  ServerProcess s;
  HttpReply r = s.Post("/v1/workloads:batch", kResearchToken, Batch({Trial("t0"), Trial("t1"), Trial("t2")}));
  ASSERT_EQ(r.status, 201) << r.body;
  auto batch = protocol::WorkloadBatchFromJson(r.json());
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ASSERT_EQ(batch->workloads.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(batch->workloads[i]["name"], "t" + std::to_string(i));
    EXPECT_EQ(batch->workloads[i]["id"], i + 1);
    EXPECT_EQ(batch->workloads[i]["tenant"], "research");
  }
  EXPECT_EQ(s.Get("/v1/workloads", kResearchToken).json()["workloads"].size(), 3u);
}

TEST(ServerApi, ABatchWithOneBadWorkloadAdmitsNoneAndNamesIt) {
  ServerProcess s;
  json bad = Trial("t2");
  bad["gpus_per_replica"] = -1;
  HttpReply r = s.Post("/v1/workloads:batch", kResearchToken, Batch({Trial("t0"), Trial("t1"), bad}));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "workloads[2].gpus_per_replica") << r.body;
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 0u);
  // The envelope is checked too: no items, or a non-object.
  EXPECT_EQ(s.Post("/v1/workloads:batch", kResearchToken, Batch({})).json()["error"]["field"], "workloads");
  EXPECT_EQ(s.Post("/v1/workloads:batch", kResearchToken, R"({"workloads": [3]})").json()["error"]["field"],
            "workloads[0]");
}

TEST(ServerApi, AHostileBatchCannotReachAnotherTenantNorGrowUnbounded) {
  ServerProcess s;
  // One item names another tenant: refused whole, as a single submit is.
  json theirs = Trial("theirs");
  theirs["tenant"] = "ads";
  HttpReply r = s.Post("/v1/workloads:batch", kResearchToken, Batch({Trial("mine"), theirs}));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.json()["error"]["field"], "workloads[1].tenant") << r.body;
  // More items than a batch may carry: refused on the count.
  std::vector<json> many(protocol::kMaxBatchWorkloads + 1, Trial("x"));
  HttpReply too_many = s.Post("/v1/workloads:batch", kResearchToken, Batch(many));
  EXPECT_EQ(too_many.status, 400) << too_many.body;
  EXPECT_EQ(too_many.json()["error"]["field"], "workloads");
  // No token: no batch.
  EXPECT_EQ(s.Post("/v1/workloads:batch", "", Batch({Trial("anon")})).status, 401);
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 0u);
}

TEST(ServerApi, IdempotencyKeyAppliesABatchOnce) {
  ServerProcess s;
  const std::string body = Batch({Trial("a"), Trial("b")});
  HttpReply first = s.Post("/v1/workloads:batch", kResearchToken, body, {{"Idempotency-Key", "sweep-1"}});
  HttpReply again = s.Post("/v1/workloads:batch", kResearchToken, body, {{"Idempotency-Key", "sweep-1"}});
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(again.status, 200) << again.body;
  // The same workloads, as they are now.
  ASSERT_EQ(again.json()["workloads"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(again.json()["workloads"][i]["id"], first.json()["workloads"][i]["id"]);
  // The same key for another request is a conflict, whatever differs.
  HttpReply longer = s.Post("/v1/workloads:batch", kResearchToken, Batch({Trial("a"), Trial("b"), Trial("c")}),
                            {{"Idempotency-Key", "sweep-1"}});
  EXPECT_EQ(longer.status, 409) << longer.body;
  HttpReply changed = s.Post("/v1/workloads:batch", kResearchToken, Batch({Trial("a"), Trial("z")}),
                             {{"Idempotency-Key", "sweep-1"}});
  EXPECT_EQ(changed.status, 409) << changed.body;
  EXPECT_NE(changed.body.find("workloads[1]"), std::string::npos) << changed.body;
  // A batch's key and a single submit's do not meet.
  EXPECT_EQ(s.Post("/v1/workloads", kResearchToken, Trial("a").dump(), {{"Idempotency-Key", "sweep-1"}}).status, 201);
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 3u);
}

TEST(ServerApi, ResizeElasticJobWithinItsBounds) {
  ServerProcess s;
  json w = Submit(s, kResearchToken, {{"name", "elastic"}, {"project", "vision"}, {"gpus_per_replica", 1}, {"replicas", 1},
                                      {"min_replicas", 1}, {"max_replicas", 4}});
  const std::string path = "/v1/workloads/" + std::to_string(w["id"].get<uint64_t>()) + "/resize";
  HttpReply ok = s.PostJson(path, kResearchToken, json{{"replicas", 3}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["replicas"], 3);
  HttpReply bad = s.PostJson(path, kResearchToken, json{{"replicas", 9}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["field"], "replicas");
}

TEST(ServerApi, QueuesAndNodesShowUsage) {
  ServerProcess s;
  s.RegisterClusterNodes();
  json w = Submit(s, kResearchToken, {{"name", "use"}, {"project", "vision"}, {"gpus_per_replica", 8}});
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  json queues = s.Get("/v1/queues", kResearchToken).json();
  bool found = false;
  for (const json& q : queues["queues"]) {
    if (q["name"] != "research") continue;
    found = true;
    EXPECT_EQ(q["guaranteed_gpus"], 40);
    EXPECT_EQ(q["allocated_gpus"], 8);
    EXPECT_EQ(q["running"], 1);
  }
  EXPECT_TRUE(found);
  json nodes = s.Get("/v1/nodes", kResearchToken).json();
  ASSERT_EQ(nodes["nodes"].size(), 8u);  // examples/basic: 2 racks x 4 nodes
  int used = 0;
  for (const json& n : nodes["nodes"]) used += n["gpu_count"].get<int>() - n["free_gpus"].get<int>();
  EXPECT_EQ(used, 8);
}

TEST(ServerApi, AgentRunsPodsToCompletion) {
  ServerProcess s;
  json reg = {{"name", "gpu-x"}, {"pool", "training"}, {"gpu_model", "A100-80GB"}, {"gpu_memory_gib", 80},
              {"gpus", json::array({json{{"index", 0}}, json{{"index", 1}}})},
              {"labels", {{"host", "gpu-x"}}}};
  // An admin may label a node; the node then works with its own credential.
  HttpReply r = s.PostJson("/v1/agent/register", kAdminToken, reg);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["node"], "gpu-x");
  const std::string node_token = r.json()["credential"];
  ASSERT_EQ(node_token.size(), 64u) << r.body;
  json w = Submit(s, kResearchToken, {{"name", "on-x"}, {"project", "vision"}, {"gpus_per_replica", 2},
                                      {"node_selector", {{"host", "gpu-x"}}}, {"command", {"/bin/true"}}});
  const uint64_t id = w["id"];
  WaitFor(s, id, [](const json& x) { return x["state"] == "running"; });
  json pods = s.Get("/v1/agent/nodes/gpu-x/pods", node_token).json();
  ASSERT_EQ(pods["pods"].size(), 1u);
  EXPECT_EQ(pods["pods"][0]["workload"], id);
  EXPECT_EQ(pods["pods"][0]["desired"], "run");
  EXPECT_EQ(pods["pods"][0]["gpus"], json::array({0, 1}));
  EXPECT_EQ(pods["pods"][0]["command"], json::array({"/bin/true"}));
  HttpReply hb = s.PostJson("/v1/agent/nodes/gpu-x/heartbeat", node_token,
                        json{{"gpus", json::array({json{{"index", 0}, {"utilization", 0.5}}})}});
  EXPECT_EQ(hb.status, 200) << hb.body;
  HttpReply st = s.PostJson("/v1/agent/nodes/gpu-x/pods/status", node_token,
                        json{{"events", json::array({json{{"workload", id}, {"rank", 0}, {"phase", "running"}},
                                                     json{{"workload", id}, {"rank", 0}, {"phase", "exited"}, {"exit_code", 0}}})}});
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.json()["accepted"], 2);
  json done = WaitFor(s, id, [](const json& x) { return x["state"] == "succeeded"; });
  EXPECT_TRUE(done["allocation"].is_null());
  EXPECT_TRUE(s.Get("/v1/agent/nodes/gpu-x/pods", node_token).json()["pods"].empty());
}

TEST(ServerApi, LostNodeRequeuesItsWorkloads) {
  ServerProcess s(DefaultServerConfig("node_lease_s: 1\n"));
  json reg = {{"name", "flaky"}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}})},
              {"labels", {{"host", "flaky"}}}};
  ASSERT_EQ(s.PostJson("/v1/agent/register", kAdminToken, reg).status, 200);
  json w = Submit(s, kResearchToken, {{"name", "victim"}, {"project", "vision"}, {"gpus_per_replica", 1},
                                      {"node_selector", {{"host", "flaky"}}}});
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  // No heartbeat: after the 1 s lease the node is lost and the job requeued.
  json back = WaitFor(s, w["id"], [](const json& x) { return x["state"] == "pending"; });
  EXPECT_EQ(back["runs"][0]["end_reason"], "node_lost");
  json audit = s.Get("/v1/audit?action=node_lost", kAdminToken).json();
  ASSERT_EQ(audit["audit"].size(), 1u);
  EXPECT_EQ(audit["audit"][0]["detail"]["node"], "flaky");
}

TEST(ServerApi, GpuFaultDrainsTheNode) {
  ServerProcess s;
  json reg = {{"name", "sick"}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}, json{{"index", 1}}})},
              {"labels", {{"host", "sick"}}}};
  HttpReply registered = s.PostJson("/v1/agent/register", kAdminToken, reg);
  ASSERT_EQ(registered.status, 200);
  const std::string node_token = registered.json()["credential"];
  json w = Submit(s, kResearchToken, {{"name", "on-sick"}, {"project", "vision"}, {"gpus_per_replica", 1},
                                      {"node_selector", {{"host", "sick"}}}});
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  HttpReply hb = s.PostJson("/v1/agent/nodes/sick/heartbeat", node_token,
                        json{{"gpus", json::array({json{{"index", 1}, {"xid", 79}}})}});
  ASSERT_EQ(hb.status, 200) << hb.body;
  // The fault kicks a pass, whose lifecycle tick drains the node; the next
  // heartbeat carries the notice.
  WaitFor(s, w["id"], [](const json& x) { return !x["stop"].is_null(); });
  hb = s.PostJson("/v1/agent/nodes/sick/heartbeat", node_token, json::object());
  ASSERT_EQ(hb.status, 200) << hb.body;
  ASSERT_EQ(hb.json()["pods"].size(), 1u);
  EXPECT_EQ(hb.json()["pods"][0]["desired"], "stop");
  EXPECT_EQ(hb.json()["pods"][0]["notice"]["cause"], "drain");
  json nodes = s.Get("/v1/nodes", kAdminToken).json();
  for (const json& n : nodes["nodes"]) {
    if (n["name"] != "sick") continue;
    EXPECT_TRUE(n["cordoned"].get<bool>());
    EXPECT_EQ(n["failed_gpus"], json::array({1}));
  }
  // An operator puts it back in service: its failed GPU stays out.
  HttpReply uncordoned = s.PostJson("/v1/nodes/sick/uncordon", kAdminToken, json::object());
  ASSERT_EQ(uncordoned.status, 200) << uncordoned.body;
  EXPECT_FALSE(uncordoned.json()["cordoned"].get<bool>());
  EXPECT_EQ(uncordoned.json()["failed_gpus"], json::array({1}));
  // prometheus-cpp writes the labels sorted by name.
  EXPECT_NE(s.Get("/metrics", "").body.find("tidal_gpu_errors_total{kind=\"xid\",node=\"sick\"} 1\n"),
            std::string::npos);
}

TEST(ServerApi, AnAdminCordonsAndUncordonsANode) {
  ServerProcess s;
  json reg = {{"name", "spare"}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}, json{{"index", 1}}})},
              {"labels", {{"host", "spare"}}}};
  HttpReply registered = s.PostJson("/v1/agent/register", kAdminToken, reg);
  ASSERT_EQ(registered.status, 200);
  const std::string node_token = registered.json()["credential"];
  // Only an admin may: not a tenant's user, not the node's own agent.
  EXPECT_EQ(s.PostJson("/v1/nodes/spare/cordon", kResearchToken, json::object()).status, 403);
  EXPECT_EQ(s.PostJson("/v1/nodes/spare/cordon", node_token, json::object()).status, 403);
  EXPECT_EQ(s.PostJson("/v1/nodes/nope/cordon", kAdminToken, json::object()).status, 404);
  HttpReply cordoned = s.PostJson("/v1/nodes/spare/cordon", kAdminToken, json::object());
  ASSERT_EQ(cordoned.status, 200) << cordoned.body;
  EXPECT_TRUE(cordoned.json()["cordoned"].get<bool>());
  // Cordoned, it takes no new work: the job for it waits, for that reason.
  json w = Submit(s, kResearchToken, {{"name", "for-spare"}, {"project", "vision"}, {"gpus_per_replica", 1},
                                      {"node_selector", {{"host", "spare"}}}});
  json waiting = WaitFor(s, w["id"], [](const json& x) { return !x["wait"].is_null(); });
  EXPECT_EQ(waiting["state"], "pending") << waiting.dump();
  EXPECT_EQ(waiting["wait"]["reason"], "node_health") << waiting.dump();
  // Uncordoned, it does. Twice is the same answer, audited once.
  HttpReply uncordoned = s.PostJson("/v1/nodes/spare/uncordon", kAdminToken, json::object());
  ASSERT_EQ(uncordoned.status, 200) << uncordoned.body;
  EXPECT_FALSE(uncordoned.json()["cordoned"].get<bool>());
  EXPECT_EQ(s.PostJson("/v1/nodes/spare/uncordon", kAdminToken, json::object()).status, 200);
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  json audit = s.Get("/v1/audit?action=uncordon", kAdminToken).json();
  ASSERT_EQ(audit["audit"].size(), 1u);
  EXPECT_EQ(audit["audit"][0]["detail"]["node"], "spare");
  EXPECT_EQ(audit["audit"][0]["actor"], "admin");
}

TEST(ServerApi, MetricsAreExposedInPrometheusFormat) {
  ServerProcess s;
  s.RegisterClusterNodes();
  json w = Submit(s, kResearchToken, {{"name", "m"}, {"project", "vision"}, {"gpus_per_replica", 1}});
  // The allocation gauge follows the placement: wait for that, not a clock.
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text = s.Get("/metrics", "").body;
    if (text.find("tidal_queue_allocated_gpus{queue=\"research\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const char* needle :
       {"tidal_queue_guaranteed_gpus{queue=\"research\"} 40", "# TYPE tidal_queue_wait_seconds histogram",
        "tidal_scheduling_pass_seconds_count", "tidal_api_request_seconds_bucket{method=\"POST\",route=\"/v1/workloads\"",
        "tidal_pool_gpus{pool=\"training\",state=\"total\"} 32", "tidal_queue_allocated_gpus{queue=\"research\"} 1"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  }
}

TEST(ServerApi, ReportsAreScopedToTheTenantAndComeAsCsv) {
  ServerProcess s;
  s.RegisterClusterNodes();
  json w = Submit(s, kResearchToken, {{"name", "r"}, {"project", "vision"}, {"gpus_per_replica", 8}});
  Submit(s, kAdsToken, {{"name", "a"}, {"gpus_per_replica", 8}});
  WaitFor(s, w["id"], [](const json& x) { return x["state"] == "running"; });
  // The report counts the open run up to now: poll until 0.3 s of 8 GPUs
  // (8 * 0.3 / 3600 GPU-hours) show, rather than sleeping a fixed time.
  json mine;
  double vision_hours = -1;
  for (int i = 0; i < 300 && !(vision_hours > 8 * 0.3 / 3600); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    mine = s.Get("/v1/reports", kResearchToken).json();
    for (const json& row : mine["rows"]) {
      if (row["project"] == "vision") vision_hours = row["gpu_hours"]["training"];
    }
  }
  ASSERT_FALSE(mine["rows"].empty());
  for (const json& row : mine["rows"]) EXPECT_EQ(row["tenant"], "research");
  EXPECT_GT(vision_hours, 8 * 0.3 / 3600);
  EXPECT_EQ(s.Get("/v1/reports?tenant=ads", kResearchToken).status, 403);
  HttpReply csv = s.Get("/v1/reports?format=csv", kAdminToken);
  ASSERT_EQ(csv.status, 200);
  EXPECT_EQ(csv.body.rfind("tenant,project,gpu_hours_training", 0), 0u);
  EXPECT_NE(csv.body.find("\nads,ads-ranking,"), std::string::npos);
}

}  // namespace
}  // namespace tidal::testing

namespace tidal::testing {
namespace {

// Reclaim end to end: research borrows ads' idle guarantee; when ads needs
// it, a research job gets notice (audited with its lost work), is requeued
// after its grace, and when it runs again the time until then is recorded
// against the preemption.
TEST(ServerApi, ReclaimIsAuditedWithLostWorkAndRecoveryTime) {
  ServerProcess s;
  s.RegisterClusterNodes();
  // Research may hold 40 guaranteed + 8 borrowed GPUs: six 8-GPU sandbox
  // jobs fill the training and shared pools. They checkpoint, since the
  // policy lets only checkpointing training borrow the shared pool.
  std::vector<uint64_t> low;
  for (int i = 0; i < 6; ++i) {
    low.push_back(Submit(s, kResearchToken, {{"name", "low" + std::to_string(i)}, {"project", "sandbox"},
                                             {"gpus_per_replica", 8}, {"checkpoint_interval_s", 600}})["id"]);
  }
  for (uint64_t id : low) WaitFor(s, id, [](const json& x) { return x["state"] == "running"; });
  json ads = Submit(s, kAdsToken, {{"name", "owner"}, {"gpus_per_replica", 8}});
  json running = WaitFor(s, ads["id"], [](const json& x) { return x["state"] == "running"; });
  ASSERT_EQ(running["state"], "running");
  json stops = s.Get("/v1/audit?action=reclaim", kAdminToken).json()["audit"];
  if (stops.empty()) stops = s.Get("/v1/audit?action=preempt", kAdminToken).json()["audit"];
  ASSERT_FALSE(stops.empty());
  const json& p = stops[0];
  EXPECT_EQ(p["detail"]["preemptor"], ads["id"]);
  EXPECT_TRUE(p["detail"]["lost_gpu_seconds"].is_number());
  EXPECT_EQ(p["detail"]["victims"], json::array({p["workload"]}));
  const uint64_t victim = p["workload"];
  EXPECT_EQ(s.Get("/v1/workloads/" + std::to_string(victim), kAdminToken).json()["preemptions"].size(), 1u);
  // Free the capacity: the victim runs again and its recovery is recorded.
  ASSERT_EQ(s.Post("/v1/workloads/" + std::to_string(ads["id"].get<uint64_t>()) + "/cancel", kAdsToken, "").status, 200);
  json back = WaitFor(s, victim, [](const json& x) { return x["state"] == "running" && x["preemptions"][0]["recovery_s"] >= 0; });
  EXPECT_GT(back["preemptions"][0]["recovery_s"].get<double>(), 0);
  json recovery = s.Get("/v1/audit?action=recovery&workload=" + std::to_string(victim), kAdminToken).json()["audit"];
  ASSERT_EQ(recovery.size(), 1u);
  EXPECT_EQ(recovery[0]["detail"]["preemption_seq"], p["seq"]);
  // The report counts it for both sides.
  json report = s.Get("/v1/reports", kAdminToken).json();
  int caused = 0, suffered = 0;
  for (const json& row : report["rows"]) {
    if (row["project"] == "ads-ranking") caused += row["preemptions_caused"].get<int>();
    if (row["project"] == "sandbox") suffered += row["preemptions_suffered"].get<int>();
  }
  EXPECT_EQ(caused, 1);
  EXPECT_EQ(suffered, 1);
}

}  // namespace
}  // namespace tidal::testing
