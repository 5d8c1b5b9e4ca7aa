// Overload protection on a real server (server/overload_guard.h): a tenant
// over its unfinished-workload cap, over its submit rate, or a client over
// its failed-authentication budget gets 429, and another tenant (or a valid
// credential from the same address) is served as before. Each rejection is
// counted in tidal_http_rejected_total{reason}.
#include <string>

#include <gtest/gtest.h>

#include "protocol/node_registration.h"
#include "protocol/workload_batch.h"
#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

json Job(const std::string& name, const std::string& project) {
  return {{"name", name}, {"project", project}, {"gpus_per_replica", 1}, {"replicas", 1}};
}

// The value of one tidal_http_rejected_total series in /metrics.
double Rejected(const ServerProcess& s, const std::string& reason) {
  const std::string text = s.Get("/metrics", "").body;
  const std::string series = "tidal_http_rejected_total{reason=\"" + reason + "\"} ";
  const size_t at = text.find(series);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size()));
}

TEST(ServerOverload, ATenantAtItsUnfinishedCapIsRefusedAndOthersAreNot) {
  ServerProcess s(DefaultServerConfig("tenant_max_unfinished: 2\n"));
  EXPECT_EQ(Rejected(s, "unfinished_cap"), 0);  // exported before the first
  ASSERT_EQ(s.PostJson("/v1/workloads", kResearchToken, Job("a", "sandbox")).status, 201);
  ASSERT_EQ(s.PostJson("/v1/workloads", kResearchToken, Job("b", "vision")).status, 201);
  // Tenant research now has 2 unfinished workloads (across its projects).
  HttpReply third = s.PostJson("/v1/workloads", kResearchToken, Job("c", "sandbox"));
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_NE(third.body.find("tenant_max_unfinished"), std::string::npos) << third.body;
  EXPECT_EQ(s.PostJson("/v1/workloads", kAdsToken, Job("d", "ads-ranking")).status, 201);
  // A cancelled workload is finished: research may submit one more.
  ASSERT_EQ(s.Post("/v1/workloads/1/cancel", kResearchToken, "").status, 200);
  EXPECT_EQ(s.PostJson("/v1/workloads", kResearchToken, Job("e", "sandbox")).status, 201);
  EXPECT_EQ(Rejected(s, "unfinished_cap"), 1);
  // Nothing refused was stored: ids 1, 2, 3 (ads), 4 (e).
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 4u);
}

TEST(ServerOverload, ATenantOverItsSubmitRateIsRefusedWithRetryAfter) {
  // 2 tokens, refilled at 1 per 1000 s: the test cannot earn a third.
  ServerProcess s(DefaultServerConfig("tenant_submit_rate_per_s: 0.001\ntenant_submit_burst: 2\n"));
  ASSERT_EQ(s.PostJson("/v1/workloads", kResearchToken, Job("a", "sandbox")).status, 201);
  ASSERT_EQ(s.PostJson("/v1/dry-run", kResearchToken, Job("b", "sandbox")).status, 200);
  HttpReply third = s.PostJson("/v1/workloads", kResearchToken, Job("c", "sandbox"));
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_EQ(third.json()["error"]["code"], "resource_exhausted");
  // Why, then the wait the Retry-After header also carries.
  EXPECT_NE(third.body.find("over its submit rate (tenant_submit_rate_per_s); retry after 1000 s"), std::string::npos)
      << third.body;
  // Reads are not submits, admins are not gated, other tenants have their own.
  EXPECT_EQ(s.Get("/v1/workloads", kResearchToken).status, 200);
  EXPECT_EQ(s.PostJson("/v1/workloads", kAdminToken, Job("d", "sandbox")).status, 201);
  EXPECT_EQ(s.PostJson("/v1/workloads", kAdsToken, Job("e", "ads-ranking")).status, 201);
  EXPECT_EQ(Rejected(s, "submit_rate"), 1);
}

std::string Batch(std::vector<json> workloads) {
  return protocol::WorkloadBatchToJson({std::move(workloads)}).dump();
}

TEST(ServerOverload, ABatchCountsEachWorkloadAgainstTheCapAndTheRate) {
  ServerProcess s(DefaultServerConfig("tenant_max_unfinished: 3\n"
                                      "tenant_submit_rate_per_s: 0.001\ntenant_submit_burst: 4\n"));
  // 2 + 2 would pass the rate (4 tokens) but not the cap (3 unfinished).
  ASSERT_EQ(s.Post("/v1/workloads:batch", kResearchToken, Batch({Job("a", "sandbox"), Job("b", "vision")})).status,
            201);
  HttpReply over_cap = s.Post("/v1/workloads:batch", kResearchToken, Batch({Job("c", "sandbox"), Job("d", "vision")}));
  EXPECT_EQ(over_cap.status, 429) << over_cap.body;
  EXPECT_NE(over_cap.body.find("the batch adds 2, over the server's limit of 3"), std::string::npos) << over_cap.body;
  EXPECT_EQ(Rejected(s, "unfinished_cap"), 1);
  // That refusal took 2 tokens (the rate is checked first); 0 are left.
  HttpReply over_rate = s.Post("/v1/workloads:batch", kResearchToken, Batch({Job("e", "sandbox")}));
  EXPECT_EQ(over_rate.status, 429) << over_rate.body;
  EXPECT_NE(over_rate.body.find("over its submit rate"), std::string::npos) << over_rate.body;
  // A batch larger than the burst could never pass: 400, not a retry.
  std::vector<json> five(5, Job("f", "sandbox"));
  HttpReply too_big = s.Post("/v1/workloads:batch", kResearchToken, Batch(five));
  EXPECT_EQ(too_big.status, 400) << too_big.body;
  EXPECT_NE(too_big.body.find("tenant_submit_burst"), std::string::npos) << too_big.body;
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 2u);
}

TEST(ServerOverload, FailedAuthenticationsPastTheBudgetAre429AndValidTokensStillPass) {
  ServerProcess s(DefaultServerConfig("auth_failure_burst: 3\nauth_failure_rate_per_s: 0.001\n"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.Get("/v1/workloads", "guess-" + std::to_string(i)).status, 401);
  HttpReply throttled = s.Get("/v1/workloads", "guess-3");
  EXPECT_EQ(throttled.status, 429) << throttled.body;
  EXPECT_NE(throttled.body.find("too many failed authentications"), std::string::npos);
  EXPECT_EQ(s.Get("/v1/workloads", "").status, 429);  // no token is a failure too
  // The same address with a valid token: a hostile pod shares its node's
  // address and must not lock the agent (or anyone) out.
  EXPECT_EQ(s.Get("/v1/workloads", kResearchToken).status, 200);
  EXPECT_EQ(Rejected(s, "auth_failures"), 2);
}

TEST(ServerOverload, NodeAccessRefusalsAreAuditedOnlyWithinTheCallersBudget) {
  ServerProcess s(DefaultServerConfig("auth_failure_burst: 3\nauth_failure_rate_per_s: 0.001\n"));
  const json nodes = s.Get("/v1/nodes", kAdminToken).json()["nodes"];
  ASSERT_GE(nodes.size(), 2u);
  const std::string mine = nodes[0]["name"], other = nodes[1]["name"];
  protocol::NodeRegistration node;
  node.name = mine;
  HttpReply reg = s.PostJson("/v1/agent/register", kAgentToken, protocol::NodeRegistrationToJson(node));
  ASSERT_EQ(reg.status, 200) << reg.body;
  const std::string credential = reg.json()["credential"];
  // The node's credential asks for another node's pods 5 times: 403 each
  // time, but only the first 3 refusals become audit rows.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.Get("/v1/agent/nodes/" + other + "/pods", credential).status, 403);
  const json denied = s.Get("/v1/audit?action=access_denied", kAdminToken).json();
  EXPECT_EQ(denied["audit"].size(), 3u) << denied.dump();
  EXPECT_EQ(Rejected(s, "auth_failures"), 2);
  // Its own node is still served.
  EXPECT_EQ(s.Get("/v1/agent/nodes/" + mine + "/pods", credential).status, 200);
}

}  // namespace
}  // namespace tidal::testing
