// A request no node of the cluster could ever run is refused at submit with
// a 400 naming the field (as an oversized gang is), and a dry run of it
// answers "never" (would_start false, detail "rejected: ...").
#include <gtest/gtest.h>

#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

TEST(ServerFeasibility, ImpossibleModelOrLabelsAreRefusedAtSubmitNamingTheField) {
  ServerProcess s;
  const json base = {{"name", "x"}, {"project", "vision"}, {"gpus_per_replica", 1}};
  struct Case {
    json extra;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{"gpu_models", {{"required", {"TPU-v5"}}}}}, "gpu_models.required"},
      {{{"node_selector", {{"zone", "mars"}}}}, "node_selector.zone"},
      {{{"gpus_per_replica", 64}}, "gpus_per_replica"},  // the largest node has 8
  };
  for (const Case& c : cases) {
    json body = base;
    body.update(c.extra);
    HttpReply r = s.PostJson("/v1/workloads", kResearchToken, body);
    EXPECT_EQ(r.status, 400) << c.field << ": " << r.body;
    EXPECT_EQ(r.json()["error"]["field"], c.field) << r.body;
    HttpReply dry = s.PostJson("/v1/dry-run", kResearchToken, body);
    ASSERT_EQ(dry.status, 200) << c.field << ": " << dry.body;
    EXPECT_EQ(dry.json()["would_start"], false) << dry.body;
    EXPECT_TRUE(dry.json()["detail"].get<std::string>().starts_with("rejected: " + c.field + ":")) << dry.body;
  }
  // A model and a label that exist (on the default cluster's nodes) pass.
  const json nodes = s.Get("/v1/nodes", kAdminToken).json();
  ASSERT_FALSE(nodes["nodes"].empty());
  json ok = base;
  ok["gpu_models"] = {{"required", {nodes["nodes"][0]["gpu_model"]}}};
  EXPECT_EQ(s.PostJson("/v1/workloads", kResearchToken, ok).status, 201);
  EXPECT_EQ(s.Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 1u);  // nothing else was stored
}

}  // namespace
}  // namespace tidal::testing
