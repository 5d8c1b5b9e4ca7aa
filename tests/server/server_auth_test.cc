// The auth matrix: every endpoint x every role x own/other tenant x own/other
// node. Missing or unknown tokens get 401; a known token with the wrong role,
// tenant or node 403; an allowed caller anything but 401/403.
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "protocol/workload_batch.h"
#include "server/http_api.h"
#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

enum class Who { kNone, kBadToken, kOwner, kOtherTenant, kAdmin, kAgent, kNodeSelf, kNodeOther };
constexpr Who kEveryone[] = {Who::kNone,  Who::kBadToken, Who::kOwner,    Who::kOtherTenant,
                             Who::kAdmin, Who::kAgent,    Who::kNodeSelf, Who::kNodeOther};

// The credentials the server issued to n1 and n2 (each registration issues
// a new one).
std::map<std::string, std::string>& NodeCredentials() {
  static std::map<std::string, std::string> credentials;
  return credentials;
}

std::string TokenOf(Who w) {
  switch (w) {
    case Who::kNodeSelf: return NodeCredentials()["n1"];
    case Who::kNodeOther: return NodeCredentials()["n2"];
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
    case Who::kAgent: return "agent (bootstrap) token";
    case Who::kNodeSelf: return "node n1's credential";
    case Who::kNodeOther: return "node n2's credential";
  }
  return "";
}

enum class Expect { kAllowed, kForbidden, kUnauthenticated, kOpen };

// The expectations for one row of the server's route table (ApiRoutes()).
struct Endpoint {
  std::string method;
  std::string path;  // the route's name: "{id}" becomes a fresh research workload, "{node}" n1
  std::string body;
  std::vector<Who> allowed;  // besides these, known tokens get 403
  bool open = false;         // no token needed
};

class AuthMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess();
    // Two nodes for the agent endpoints: n1's own, and another's.
    for (const char* name : {"n1", "n2"}) {
      json reg = {{"name", name}, {"pool", "training"}, {"gpus", json::array({json{{"index", 0}}})}};
      HttpReply r = server_->PostJson("/v1/agent/register", kAgentToken, reg);
      ASSERT_EQ(r.status, 200) << r.body;
      NodeCredentials()[name] = r.json()["credential"];
    }
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
  // The bootstrap token may only register (n1 is registered: it gets 409
  // past auth); n1's credential only touches n1.
  const std::vector<Who> register_allowed = {Who::kAgent, Who::kNodeSelf, Who::kAdmin};
  const std::vector<Who> node_admin = {Who::kNodeSelf, Who::kAdmin};
  const std::string submit = json{{"name", "x"}, {"project", "vision"}, {"gpus_per_replica", 1}}.dump();
  const std::vector<Endpoint> endpoints = {
      {"POST", "/v1/workloads", submit, owner_admin},
      {"POST", "/v1/workloads:batch", protocol::WorkloadBatchToJson({{json::parse(submit)}}).dump(), owner_admin},
      {"GET", "/v1/workloads", "", users_admin},
      {"GET", "/v1/workloads/{id}", "", owner_admin},
      {"POST", "/v1/workloads/{id}/cancel", "", owner_admin},
      {"POST", "/v1/workloads/{id}/resize", R"({"replicas": 2})", owner_admin},
      {"GET", "/v1/workloads/{id}/explain", "", owner_admin},
      {"GET", "/v1/workloads/{id}/logs", "", owner_admin},
      {"POST", "/v1/workloads/{id}/approve", "", {Who::kAdmin}},
      {"POST", "/v1/dry-run", submit, owner_admin},
      {"GET", "/v1/queues", "", users_admin},
      {"GET", "/v1/nodes", "", users_admin},
      {"POST", "/v1/nodes/{node}/cordon", "", {Who::kAdmin}},
      {"POST", "/v1/nodes/{node}/uncordon", "", {Who::kAdmin}},
      {"GET", "/v1/loans", "", users_admin},
      {"GET", "/v1/audit", "", users_admin},
      {"GET", "/v1/reports", "", users_admin},
      {"POST", "/v1/agent/register", R"({"name": "n1", "gpus": [{"index": 0}]})", register_allowed},
      {"POST", "/v1/agent/nodes/{node}/heartbeat", "{}", node_admin},
      {"GET", "/v1/agent/nodes/{node}/pods", "", node_admin},
      {"POST", "/v1/agent/nodes/{node}/pods/status", R"({"events": []})", node_admin},
      {"POST", "/v1/agent/nodes/{node}/pods/logs", R"({"chunks": []})", node_admin},
      {"GET", "/healthz", "", {}, true},
      {"GET", "/readyz", "", {}, true},
      {"GET", "/metrics", "", {}, true},
  };
  // Generated from the route table the server registers its handlers from:
  // a route added without a row here fails.
  int checked = 0;
  for (const server::ApiRoute& route : server::ApiRoutes()) {
    auto e = std::find_if(endpoints.begin(), endpoints.end(), [&](const Endpoint& x) {
      return x.method == route.method && x.path == route.name;
    });
    if (e == endpoints.end()) {
      ADD_FAILURE() << route.method << " " << route.name << ": no row in the auth matrix; add its expectations";
      continue;
    }
    for (Who who : kEveryone) {
      std::string path = e->path;
      if (auto at = path.find("{id}"); at != std::string::npos) path.replace(at, 4, FreshWorkload());
      if (auto at = path.find("{node}"); at != std::string::npos) path.replace(at, 6, "n1");
      const HttpReply r = e->method == "GET" ? server_->Get(path, TokenOf(who))
                                             : server_->Post(path, TokenOf(who), e->body);
      const std::string what = e->method + " " + e->path + " as " + NameOf(who) + ": " + r.body;
      ++checked;
      // A registration issues n1 a new credential.
      if (e->path == "/v1/agent/register" && r.status == 200) NodeCredentials()["n1"] = r.json()["credential"];
      if (e->open) {
        EXPECT_EQ(r.status, 200) << what;
      } else if (who == Who::kNone || who == Who::kBadToken) {
        EXPECT_EQ(r.status, 401) << what;
      } else if (std::find(e->allowed.begin(), e->allowed.end(), who) != e->allowed.end()) {
        EXPECT_NE(r.status, 401) << what;
        EXPECT_NE(r.status, 403) << what;
        EXPECT_LT(r.status, 500) << what;
      } else {
        EXPECT_EQ(r.status, 403) << what;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(endpoints.size()) * 8);
  EXPECT_EQ(server::ApiRoutes().size(), endpoints.size()) << "a row for a route the server does not have";
}

// The hostile tenant's probes of security issue #11 with the one shared
// agent token, and with another node's credential: each refused, audited.
TEST_F(AuthMatrix, NodeEndpointsRefuseTheBootstrapTokenAndOtherNodes) {
  const std::string exit_event = R"({"events": [{"workload": 1, "rank": 0, "phase": "exited", "exit_code": 1}]})";
  for (const std::string& token : {std::string(kAgentToken), NodeCredentials()["n2"]}) {
    EXPECT_EQ(server_->Post("/v1/agent/nodes/n1/pods/status", token, exit_event).status, 403);
    EXPECT_EQ(server_->Post("/v1/agent/nodes/never-registered/pods/status", token, exit_event).status, 403);
    EXPECT_EQ(server_->Get("/v1/agent/nodes/n1/pods", token).status, 403);
  }
  // The bootstrap token registers n1 once: not again while n1 is alive.
  HttpReply again = server_->PostJson("/v1/agent/register", kAgentToken,
                                      json{{"name", "n1"}, {"gpus", json::array({json{{"index", 0}}})}});
  EXPECT_EQ(again.status, 409) << again.body;
  json denied = server_->Get("/v1/audit?action=access_denied", kAdminToken).json();
  EXPECT_GE(denied["audit"].size(), 6u) << denied.dump();
  json refused = server_->Get("/v1/audit?action=register_refused", kAdminToken).json();
  EXPECT_FALSE(refused["audit"].empty());
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
