// A misspelt field in a workload file, a server API body or an agent
// message is refused with the nearest known name.
#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "config/workload_loader.h"
#include "core/common/did_you_mean.h"
#include "protocol/pod_event.h"

namespace tidal {
namespace {

TEST(DidYouMeanTest, EditDistanceCountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("gpu_per_replica", "gpus_per_replica"), 1u);  // one insertion
  EXPECT_EQ(EditDistance("replcias", "replicas"), 1u);                 // one swap
  EXPECT_EQ(EditDistance("kind", "mind"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("project", "project"), 0u);
}

TEST(DidYouMeanTest, ClosestNameOnlyWhenItIsLikelyATypo) {
  const std::vector<std::string_view> known = {"gpus_per_replica", "replicas", "min_replicas", "project"};
  EXPECT_EQ(ClosestName("gpu_per_replica", known), "gpus_per_replica");
  EXPECT_EQ(ClosestName("replica", known), "replicas");
  EXPECT_EQ(ClosestName("colour", known), "");  // 7+ edits from anything
  EXPECT_EQ(DidYouMean("projetc", known), " (did you mean 'project'?)");
}

TEST(DidYouMeanTest, WorkloadFileSuggestsTheField) {
  auto cluster = config::ParseClusterYaml(R"(pools: [training]
nodes:
  - {name: "n{i}", count: 1, gpus: 8, gpu_model: A100}
queues:
  - {name: nlp, guaranteed_gpus: 8}
projects:
  - {name: llm, tenant: research, tier: standard, queue: nlp}
)");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto w = config::ParseWorkloadYaml("workloads:\n  - {name: a, project: llm, gpu_per_replica: 2, duration_s: 60}\n",
                                     *cluster);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("unknown field 'gpu_per_replica': did you mean 'gpus_per_replica'?"),
            std::string::npos)
      << w.status().message();
  auto far = config::ParseWorkloadYaml("workloads:\n  - {name: a, project: llm, colour: red, duration_s: 60}\n", *cluster);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().message().find("did you mean"), std::string::npos) << far.status().message();
}

TEST(DidYouMeanTest, AgentMessagesSuggestTheFieldToo) {
  auto e = protocol::PodEventFromJson({{"workload", 1}, {"rank", 0}, {"exit_cod", 1}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("did you mean 'exit_code'?"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace tidal
