#include "config/cluster_loader.h"

#include <gtest/gtest.h>

namespace tidal::config {
namespace {

// A minimal valid cluster the error tests mutate one line at a time.
const char* kSmall = R"(racks: [r1, r2]
pools: [training, shared, "dedicated:nlp"]
nodes:
  - name: n{i}
    count: 4
    racks: [r1, r2]
    pool: training
    gpus: 8
    gpu_model: A100
    nvlink: 2x4
queues:
  - {name: org, guaranteed_gpus: 32}
  - {name: nlp, parent: org, guaranteed_gpus: 16, borrowing_limit_gpus: unlimited, pools: [training]}
projects:
  - {name: p1, tier: standard, queue: nlp}
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string ErrorOf(const std::string& text) {
  auto c = ParseClusterYaml(text, "cluster.yaml");
  return c.ok() ? "OK" : c.status().message();
}

TEST(ClusterLoaderTest, ExpandsNodeGroupsOverRacks) {
  auto c = ParseClusterYaml(kSmall);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->cluster.nodes.size(), 4u);
  // count 4 over 2 racks: n1, n2 in r1; n3, n4 in r2.
  EXPECT_EQ(c->cluster.nodes[0].name, "n1");
  EXPECT_EQ(c->cluster.racks[c->cluster.nodes[1].rack.value()].name, "r1");
  EXPECT_EQ(c->cluster.racks[c->cluster.nodes[2].rack.value()].name, "r2");
  EXPECT_EQ(c->cluster.nodes[3].id, NodeId(3));
  EXPECT_EQ(c->cluster.total_gpus(), 32);
  EXPECT_EQ(c->cluster.nodes[0].nvlink_domains, (std::vector<GpuMask>{0x0F, 0xF0}));
  // Default zone when none is declared.
  ASSERT_EQ(c->cluster.zones.size(), 1u);
  EXPECT_EQ(c->cluster.zones[0].name, "default");
}

TEST(ClusterLoaderTest, ResolvesQueuesPoolsAndProjects) {
  auto c = ParseClusterYaml(kSmall);
  ASSERT_TRUE(c.ok());
  const Pool* dedicated = c->FindPool("dedicated:nlp");
  ASSERT_NE(dedicated, nullptr);
  EXPECT_EQ(dedicated->kind, PoolKind::kDedicated);
  EXPECT_EQ(dedicated->owner, c->FindQueue("nlp")->id);
  const Queue* nlp = c->FindQueue("nlp");
  EXPECT_EQ(nlp->parent, c->FindQueue("org")->id);
  EXPECT_EQ(nlp->borrowing_limit_gpus, kUnlimited);
  EXPECT_EQ(nlp->pools, std::vector<PoolId>{c->FindPool("training")->id});
  const Project* p1 = c->FindProject("p1");
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->tenant, "p1");  // defaults to the project's name
  EXPECT_EQ(p1->default_queue, nlp->id);
}

TEST(ClusterLoaderTest, ErrorsNameFileLineAndField) {
  EXPECT_EQ(ErrorOf(Replace(kSmall, "gpus: 8", "gpus: -2")),
            "cluster.yaml:8: nodes[0].gpus: expected an integer from 1 to 64, got -2");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "gpus: 8", "gpus: \"8\"")),
            "cluster.yaml:8: nodes[0].gpus: expected an integer from 1 to 64, got \"8\"");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "gpu_model: A100", "gpu_modle: A100")).rfind(
                "cluster.yaml:9: nodes[0].gpu_modle: unknown field 'gpu_modle'", 0),
            0u);
  EXPECT_EQ(ErrorOf(Replace(kSmall, "pool: training", "pool: trainnig")),
            "cluster.yaml:7: nodes[0].pool: unknown pool 'trainnig'");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "queue: nlp}", "queue: cv}")),
            "cluster.yaml:15: projects[0].queue: unknown queue 'cv'");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "    gpu_model: A100\n", "")),
            "cluster.yaml:4: nodes[0].gpu_model: required field is missing");
}

TEST(ClusterLoaderTest, RejectsInconsistentTopologyAndQuota) {
  EXPECT_EQ(ErrorOf(Replace(kSmall, "nvlink: 2x4", "nvlink: 3x4")),
            "cluster.yaml:10: nodes[0].nvlink: 3x4 makes 12 GPUs but the node has 8");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "count: 4", "count: 3")),
            "cluster.yaml:6: nodes[0].racks: count 3 does not divide evenly over 2 racks");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "guaranteed_gpus: 32", "guaranteed_gpus: 8")),
            "cluster.yaml:12: queues[0].guaranteed_gpus: children of queue 'org' guarantee 16 GPUs, more than its 8");
  EXPECT_NE(ErrorOf(Replace(kSmall, "{name: org, guaranteed_gpus: 32}", "{name: org, parent: nlp, guaranteed_gpus: 32}"))
                .find("is its own ancestor"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(Replace(kSmall, "\"dedicated:nlp\"", "dedicated")),
            "cluster.yaml:2: pools[2].owner: a dedicated pool needs an owner queue");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "name: n{i}", "name: n")),
            "cluster.yaml:4: nodes[0].name: a node group's name needs a placeholder such as {i}");
}

TEST(ClusterLoaderTest, NvlinkForms) {
  auto explicit_domains = ParseNvlink(nlohmann::json::parse("[[0,1],[2,3]]"), 4, "nvlink");
  ASSERT_TRUE(explicit_domains.ok());
  EXPECT_EQ(*explicit_domains, (std::vector<GpuMask>{0b0011, 0b1100}));
  EXPECT_EQ(*ParseNvlink("none", 2, "nvlink"), (std::vector<GpuMask>{0b01, 0b10}));
  EXPECT_EQ(*ParseNvlink("all", 8, "nvlink"), (std::vector<GpuMask>{0xFF}));
  auto overlap = ParseNvlink(nlohmann::json::parse("[[0,1],[1,2,3]]"), 4, "nvlink");
  ASSERT_FALSE(overlap.ok());
  EXPECT_EQ(overlap.status().message(), "nvlink[1][0]: GPU 1 is in two domains");
  auto gap = ParseNvlink(nlohmann::json::parse("[[0,1]]"), 4, "nvlink");
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.status().message(), "nvlink: domains cover 2 of the node's 4 GPUs");
}

TEST(ClusterLoaderTest, SingleNodesWithAllAttributes) {
  const char* text = R"({"zones": ["z1", "z2"],
  "racks": [{"name": "r1", "zone": "z2"}],
  "nodes": [{"name": "solo", "rack": "r1", "gpus": 4, "gpu_model": "L40S", "gpu_memory_gib": 48,
             "mig": true, "driver": 550.5, "nic_gbps": 100, "rdma": true,
             "labels": {"gen": 5, "team": "vision"}, "taints": ["gpu=l40s", {"key": "spot"}],
             "health": "degraded", "failed_gpus": [3], "cordoned": true}]})";
  auto c = ParseClusterYaml(text, "cluster.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Node& n = c->cluster.nodes[0];
  EXPECT_EQ(c->cluster.zones[n.zone.value()].name, "z2");
  EXPECT_EQ(n.gpu_memory_gib, 48);
  EXPECT_TRUE(n.mig_capable);
  EXPECT_EQ(n.driver_version, "550.5");
  EXPECT_DOUBLE_EQ(n.network.nic_gbps, 100);
  EXPECT_EQ(n.labels.at("gen"), "5");
  EXPECT_EQ(n.taints, (std::vector<Taint>{{"gpu", "l40s"}, {"spot", ""}}));
  EXPECT_EQ(n.health, Health::kDegraded);
  EXPECT_EQ(n.failed_gpus, GpuMask{0b1000});
  EXPECT_TRUE(n.cordoned);
  EXPECT_EQ(n.nvlink_domains.size(), 4u);  // no nvlink: one domain per GPU
  EXPECT_EQ(c->cluster.pools[0].name, "training");  // the default pool
}

TEST(ClusterLoaderTest, ProjectsDeclareTheirQueuesAndKinds) {
  auto c = ParseClusterYaml(Replace(kSmall, "queue: nlp}", "queue: nlp, allowed_queues: [org, nlp], allowed_kinds: [training, debug]}"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Project& p = c->projects[0];
  // The default queue is always allowed and not repeated.
  EXPECT_EQ(p.allowed_queues, std::vector<QueueId>{c->FindQueue("org")->id});
  EXPECT_TRUE(p.MayUseQueue(c->FindQueue("nlp")->id));
  EXPECT_TRUE(p.MaySubmitKind(WorkloadKind::kDebug));
  EXPECT_FALSE(p.MaySubmitKind(WorkloadKind::kInference));
  // Without the fields: its own queue only, every kind.
  auto plain = ParseClusterYaml(kSmall);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->projects[0].MayUseQueue(plain->FindQueue("org")->id));
  EXPECT_TRUE(plain->projects[0].MaySubmitKind(WorkloadKind::kInference));

  EXPECT_EQ(ErrorOf(Replace(kSmall, "queue: nlp}", "queue: nlp, allowed_queues: [ml]}")),
            "cluster.yaml:15: projects[0].allowed_queues[0]: unknown queue 'ml'");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "queue: nlp}", "queue: nlp, allowed_kinds: [serving]}")),
            "cluster.yaml:15: projects[0].allowed_kinds[0]: expected one of "
            "training|inference|batch_inference|debug, got \"serving\"");
  EXPECT_EQ(ErrorOf(Replace(kSmall, "queue: nlp}", "queue: nlp, allowed_kinds: []}")),
            "cluster.yaml:15: projects[0].allowed_kinds: must name at least one kind (leave the field out to "
            "allow all)");
}

}  // namespace
}  // namespace tidal::config
