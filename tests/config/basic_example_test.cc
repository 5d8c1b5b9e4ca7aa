// The shipped example (examples/basic) loads, its compiled-in copy matches
// the files, and one pass over it explains every workload.
#include <cstdlib>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "config/embedded_examples.h"
#include "config/policy_loader.h"
#include "config/schedule_pass.h"
#include "config/workload_loader.h"
#include "config/yaml_document.h"

namespace tidal::config {
namespace {

std::string ExamplePath(const std::string& file) {
  const char* root = std::getenv("TIDAL_SOURCE_DIR");
  return std::string(root ? root : ".") + "/examples/basic/" + file;
}

TEST(BasicExampleTest, EmbeddedCopiesEqualTheFiles) {
  const std::pair<std::string, std::string_view> files[] = {{"cluster.yaml", kBasicClusterYaml},
                                                            {"policy.yaml", kBasicPolicyYaml},
                                                            {"workloads.yaml", kBasicWorkloadsYaml}};
  for (const auto& [file, embedded] : files) {
    auto text = ReadTextFile(ExamplePath(file));
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, embedded) << file << " changed: run examples/basic/embed.sh";
  }
}

TEST(BasicExampleTest, ClusterFileLoads) {
  auto c = LoadClusterFile(ExamplePath("cluster.yaml"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // 2 racks x 4 nodes x 8 GPUs.
  EXPECT_EQ(c->cluster.nodes.size(), 8u);
  EXPECT_EQ(c->cluster.total_gpus(), 64);
  EXPECT_EQ(c->cluster.racks.size(), 2u);
  EXPECT_EQ(c->cluster.pools.size(), 3u);
  EXPECT_EQ(c->queues.size(), 4u);
  EXPECT_EQ(c->projects.size(), 6u);
  const Node* trn = c->FindNode("trn-rack-b-2");
  ASSERT_NE(trn, nullptr);
  EXPECT_EQ(c->cluster.racks[trn->rack.value()].name, "rack-b");
  EXPECT_EQ(c->cluster.pools[trn->pool.value()].kind, PoolKind::kTraining);
  EXPECT_EQ(trn->nvlink_domains, (std::vector<GpuMask>{0x0F, 0xF0}));
  EXPECT_TRUE(trn->network.rdma);
  const Node* inf2 = c->FindNode("inf-2");
  ASSERT_NE(inf2, nullptr);
  EXPECT_EQ(c->cluster.racks[inf2->rack.value()].name, "rack-b");
  EXPECT_EQ(c->cluster.pools[inf2->pool.value()].kind, PoolKind::kInferenceReserved);
  EXPECT_EQ(c->FindQueue("ads")->borrowing_limit_gpus, 0);
  EXPECT_EQ(c->FindProject("llm-pretrain")->default_queue, c->FindQueue("llm")->id);
  // One training node is drained, declared on its own after a node group.
  const Node* drained = c->FindNode("trn-rack-b-2");
  EXPECT_TRUE(drained->cordoned);
  EXPECT_EQ(drained->failed_gpus, GpuMask{1} << 5);
  EXPECT_EQ(c->FindNode("trn-rack-a-2")->rack, c->FindNode("trn-rack-a-1")->rack);
  EXPECT_FALSE(c->FindProject("llm-pretrain")->top_tier_approved);
}

TEST(BasicExampleTest, PolicyFileIsTheDefaultPolicy) {
  auto p = LoadPolicyFile(ExamplePath("policy.yaml"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const PolicyConfig d = DefaultPolicy();
  ASSERT_EQ(p->templates.size(), d.templates.size());
  EXPECT_EQ(p->templates[0].tiers.at("standard").base, d.templates[0].tiers.at("standard").base);
  EXPECT_EQ(p->preemption.min_runtime, d.preemption.min_runtime);
}

TEST(BasicExampleTest, WorkloadFileLoads) {
  auto c = LoadClusterFile(ExamplePath("cluster.yaml"));
  ASSERT_TRUE(c.ok());
  auto w = LoadWorkloadFile(ExamplePath("workloads.yaml"), *c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->size(), 8u);
  const Workload& chat = (*w)[0].workload;
  EXPECT_EQ(chat.name, "chat-api");
  EXPECT_EQ(chat.kind, WorkloadKind::kInference);
  EXPECT_EQ(chat.queue, c->FindQueue("serving")->id);
  EXPECT_EQ(chat.tenant, "chat");
  const Workload& pretrain = (*w)[3].workload;
  EXPECT_EQ(pretrain.name, "llm-pretrain-70b");
  EXPECT_EQ(pretrain.min_gpus(), 32);
  EXPECT_EQ(pretrain.constraints.topology.level, TopologyLevel::kRack);
  EXPECT_FALSE(pretrain.constraints.topology.required);
  EXPECT_EQ((*w)[7].submit_offset, seconds(120));
}

TEST(BasicExampleTest, OnePassDecidesEveryWorkloadOnceAndExplainsApproval) {
  auto c = ParseClusterYaml(kBasicClusterYaml);
  auto p = ParsePolicyYaml(kBasicPolicyYaml);
  ASSERT_TRUE(c.ok() && p.ok());
  auto w = ParseWorkloadYaml(kBasicWorkloadsYaml, *c);
  ASSERT_TRUE(w.ok());
  auto result = RunSchedulePass(*c, *p, *w);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->snapshot.now, TimeFromMillis(120'000));  // the last submission

  // Priorities as docs/priority.md derives them.
  const auto& ws = result->snapshot.workloads;
  EXPECT_EQ(ws[0].priority.value, 1500);  // chat-api: 1000 + 500
  EXPECT_EQ(ws[2].priority.value, 650);   // ads-ctr: 500 + 100 + 50
  EXPECT_EQ(ws[3].priority.value, 550);   // llm-pretrain-70b at standard: 500 + 50
  EXPECT_TRUE(ws[3].priority.awaiting_approval);
  EXPECT_EQ(ws[3].state, WorkloadState::kAwaitingApproval);
  EXPECT_EQ(ws[7].priority.value, 650);   // embed-catalog: 500 - 50 + 200 (slack 2200 s)

  // Every workload gets exactly one decision: placed, waiting or rejected.
  std::multiset<uint64_t> decided;
  for (const auto& d : result->decisions.places) decided.insert(d.workload.value());
  for (const auto& d : result->decisions.waits) decided.insert(d.workload.value());
  for (const auto& d : result->decisions.rejects) decided.insert(d.workload.value());
  EXPECT_EQ(decided, (std::multiset<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  // What the example is built to show (workloads.yaml header).
  std::map<uint64_t, ReasonCode> reasons;
  for (const auto& d : result->decisions.waits) reasons[d.workload.value()] = d.reason;
  EXPECT_EQ(reasons[4], ReasonCode::kAwaitingApproval);  // llm-pretrain-70b
  EXPECT_EQ(reasons[6], ReasonCode::kQuota);             // ads-retrain: ads has 0 of 4 left
  EXPECT_EQ(reasons[7], ReasonCode::kGang);              // llm-sft: 32 GPUs, 24 usable
  EXPECT_EQ(result->decisions.places.size(), 5u);

  const std::string text = RenderScheduleText(*result);
  EXPECT_NE(text.find("WAITING"), std::string::npos);
  EXPECT_NE(text.find("llm-pretrain-70b"), std::string::npos);
  EXPECT_NE(text.find("awaiting_approval"), std::string::npos);
  const nlohmann::json j = ScheduleToJson(*result);
  EXPECT_EQ(j["workloads"].size(), 8u);
  EXPECT_EQ(j["now_ms"], 120000);
}

TEST(SchedulePassTest, Formatting) {
  EXPECT_EQ(FormatDelay(Duration(0)), "now");
  EXPECT_EQ(FormatDelay(seconds(45)), "+45s");
  EXPECT_EQ(FormatDelay(minutes(12)), "+12m");
  EXPECT_EQ(FormatDelay(hours(3) + minutes(5)), "+3h05m");
  EXPECT_EQ(FormatDelay(hours(52)), "+2d04h");
  Cluster c;
  c.nodes.resize(2);
  c.nodes[0].name = "a";
  c.nodes[1].name = "b";
  // Pods on one node merge; GPU runs print as ranges.
  EXPECT_EQ(FormatPods({{NodeId(1), 0b0011}, {NodeId(0), 0b1101}, {NodeId(1), 0b1000}}, c), "a:0,2-3 b:0-1,3");
}

}  // namespace
}  // namespace tidal::config
