// The auth matrix: every endpoint x every role x own/other tenant. Missing or
// unknown tokens get 401; a known token with the wrong role or tenant 403;
// an allowed caller anything but 401/403.
#include <gtest/gtest.h>

#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

enum class Who { kNone, kBadToken, kOwner, kOtherTenant, kAdmin, kAgent };

const char* TokenOf(Who w) {
  switch (w) {
    case Who::kNone: return "";
    case Who::kBadToken: return "not-a-token";
    case Who::kOwner: return kResearchToken;
    case Who::kOtherTenant: return kAdsToken;
    case Who::kAdmin: return kAdminToken;
    case Who::kAgent: return kAgentToken;
  }
  return "";
}

const char* NameOf(Who w) {
  switch (w) {
    case Who::kNone: return "no token";
    case Who::kBadToken: return "unknown token";
    case Who::kOwner: return "owner (user of tenant research)";
    case Who::kOtherTenant: return "user of tenant ads";
    case Who::kAdmin: return "admin";
    case Who::kAgent: return "agent";
  }
  return "";
}

enum class Expect { kAllowed, kForbidden, kUnauthenticated, kOpen };

struct Endpoint {
  std::string method;
  std::string path;  // "{id}" is replaced by a fresh research workload
  std::string body;
  std::vector<Who> allowed;  // besides these, known tokens get 403
  bool open = false;         // no token needed
};

class AuthMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess();
    // A node for the agent endpoints.
    json reg = {{"name", "n1"}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}})}};
    ASSERT_EQ(server_->PostJson("/v1/agent/register", kAgentToken, reg).status, 200);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static std::string FreshWorkload() {
    HttpReply r = server_->PostJson("/v1/workloads", kAdminToken,
                                    json{{"name", "w"}, {"project", "vision"}, {"gpus_per_replica", 1}, {"replicas", 1},
                                         {"min_replicas", 1}, {"max_replicas", 2}});
    EXPECT_EQ(r.status, 201) << r.body;
    return std::to_string(r.json()["id"].get<uint64_t>());
  }
  static ServerProcess* server_;
};

ServerProcess* AuthMatrix::server_ = nullptr;

TEST_F(AuthMatrix, EveryEndpointChecksRoleAndTenant) {
  const std::vector<Who> users_admin = {Who::kOwner, Who::kOtherTenant, Who::kAdmin};
  const std::vector<Who> owner_admin = {Who::kOwner, Who::kAdmin};
  const std::vector<Who> agent_admin = {Who::kAgent, Who::kAdmin};
  const std::string submit = json{{"name", "x"}, {"project", "vision"}, {"gpus_per_replica", 1}}.dump();
  const std::vector<Endpoint> endpoints = {
      {"POST", "/v1/workloads", submit, owner_admin},
      {"GET", "/v1/workloads", "", users_admin},
      {"GET", "/v1/workloads/{id}", "", owner_admin},
      {"POST", "/v1/workloads/{id}/cancel", "", owner_admin},
      {"POST", "/v1/workloads/{id}/resize", R"({"replicas": 2})", owner_admin},
      {"GET", "/v1/workloads/{id}/explain", "", owner_admin},
      {"POST", "/v1/workloads/{id}/approve", "", {Who::kAdmin}},
      {"POST", "/v1/dry-run", submit, owner_admin},
      {"GET", "/v1/queues", "", users_admin},
      {"GET", "/v1/nodes", "", users_admin},
      {"GET", "/v1/audit", "", users_admin},
      {"GET", "/v1/reports", "", users_admin},
      {"POST", "/v1/agent/register", R"({"name": "n1", "gpus": [{"index": 0}]})", agent_admin},
      {"POST", "/v1/agent/nodes/n1/heartbeat", "{}", agent_admin},
      {"GET", "/v1/agent/nodes/n1/pods", "", agent_admin},
      {"POST", "/v1/agent/nodes/n1/pods/status", R"({"events": []})", agent_admin},
      {"GET", "/healthz", "", {}, true},
      {"GET", "/readyz", "", {}, true},
      {"GET", "/metrics", "", {}, true},
  };
  int checked = 0;
  for (const Endpoint& e : endpoints) {
    for (Who who : {Who::kNone, Who::kBadToken, Who::kOwner, Who::kOtherTenant, Who::kAdmin, Who::kAgent}) {
      std::string path = e.path;
      if (auto at = path.find("{id}"); at != std::string::npos) path.replace(at, 4, FreshWorkload());
      const HttpReply r = e.method == "GET" ? server_->Get(path, TokenOf(who))
                                            : server_->Post(path, TokenOf(who), e.body);
      const std::string what = e.method + " " + e.path + " as " + NameOf(who) + ": " + r.body;
      ++checked;
      if (e.open) {
        EXPECT_EQ(r.status, 200) << what;
      } else if (who == Who::kNone || who == Who::kBadToken) {
        EXPECT_EQ(r.status, 401) << what;
      } else if (std::find(e.allowed.begin(), e.allowed.end(), who) != e.allowed.end()) {
        EXPECT_NE(r.status, 401) << what;
        EXPECT_NE(r.status, 403) << what;
        EXPECT_LT(r.status, 500) << what;
      } else {
        EXPECT_EQ(r.status, 403) << what;
      }
    }
  }
  EXPECT_EQ(checked, 19 * 6);
}

TEST_F(AuthMatrix, UsersSeeOnlyTheirTenant) {
  FreshWorkload();
  json other = server_->Get("/v1/workloads", kAdsToken).json();
  for (const json& w : other["workloads"]) EXPECT_EQ(w["tenant"], "ads");
  EXPECT_EQ(server_->Get("/v1/workloads?tenant=research", kAdsToken).status, 403);
  json audit = server_->Get("/v1/audit", kAdsToken).json();
  for (const json& a : audit["audit"]) EXPECT_EQ(a["tenant"], "ads");
  // A user may not submit as another tenant.
  HttpReply r = server_->PostJson("/v1/workloads", kAdsToken, json{{"name", "x"}, {"tenant", "research"}, {"project", "vision"}, {"gpus_per_replica", 1}});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.json()["error"]["field"], "tenant");
}

}  // namespace
}  // namespace tidal::testing
