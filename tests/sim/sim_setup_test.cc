#include "sim/sim_setup.h"

#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

TEST(TraceSpecTest, ParsesFormatPathAndKeys) {
  auto s = ParseTraceSpec("philly:/x/p.csv,limit=20,time_scale=0.5,project=research,queue=vc");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, "philly");
  EXPECT_EQ(s->path, "/x/p.csv");
  EXPECT_EQ(s->options.limit, 20u);
  EXPECT_DOUBLE_EQ(s->options.time_scale, 0.5);
  EXPECT_EQ(s->project, "research");
  EXPECT_EQ(s->queue, "vc");
  auto l = ParseTraceSpec("chat=azure_llm:a.csv,diurnal_trough=0.3,smooth=5");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->service, "chat");
  EXPECT_DOUBLE_EQ(l->diurnal_trough, 0.3);
  EXPECT_EQ(l->smooth_windows, 5);
  auto g = ParseTraceSpec("sd=genai_lora:t.csv,model=M0002|M0001,request_type=TXT_2_IMG,window_s=300");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->lora_filter.models, (std::vector<std::string>{"M0002", "M0001"}));
  EXPECT_EQ(g->lora_filter.request_types, (std::vector<std::string>{"TXT_2_IMG"}));
  EXPECT_DOUBLE_EQ(g->options.window_s, 300);
}

TEST(TraceSpecTest, RejectsBadSpecsWithTheKey) {
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& c : {Case{"philly", "expected FORMAT:PATH"},
                        Case{"nope:x.csv", "unknown format 'nope'"},
                        Case{"philly:x.csv,limit=-1", "key 'limit'"},
                        Case{"philly:x.csv,time_scale=0", "key 'time_scale'"},
                        Case{"philly:x.csv,colour=red", "unknown key 'colour'"},
                        Case{"philly:x.csv,limit", "expected key=value"},
                        Case{"azure_llm:x.csv", "needs its service"},
                        Case{"chat=philly:x.csv", "takes no service"},
                        Case{"c=azure_llm:x.csv,diurnal_trough=2", "key 'diurnal_trough'"},
                        Case{"c=genai_lora:x.csv,model=", "key 'model': expected VALUE"},
                        Case{"c=genai_lora:x.csv,model=M1||M2", "key 'model': expected VALUE"},
                        Case{"c=genai_lora:x.csv,model=M1|M1", "key 'model': 'M1' is listed twice"},
                        Case{"c=genai_lora:x.csv,model=M1,model=M2", "key 'model': given twice"},
                        Case{"c=genai_lora:x.csv,request_type=TXT 2", "key 'request_type': 'TXT 2'"},
                        Case{"c=genai_lora:x.csv,request_type=" + std::string(65, 'T'),
                             "key 'request_type': expected VALUE"},
                        Case{"c=azure_llm:x.csv,model=M1", "key 'model' applies only to genai_lora"},
                        Case{"philly:x.csv,request_type=TXT_2_IMG",
                             "key 'request_type' applies only to genai_lora"}}) {
    auto s = ParseTraceSpec(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

TEST(AddWorkloadTraceTest, MakesRigidGangsInTheProjectsQueue) {
  auto cluster = config::ParseClusterYaml(testing::SmallClusterYaml(1, 1, 4));
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto spec = ParseTraceSpec("philly:" + testing::SourceDir() +
                             "/tests/data/philly_head50.csv,project=research,limit=10,checkpoint_interval_s=600");
  ASSERT_TRUE(spec.ok());
  std::vector<SimWorkload> w;
  ASSERT_TRUE(AddWorkloadTrace(*spec, *cluster, w).ok());
  ASSERT_EQ(w.size(), 10u);
  const Queue* research = cluster->FindQueue("research");
  for (const SimWorkload& s : w) {
    EXPECT_EQ(s.workload.kind, WorkloadKind::kTraining);
    EXPECT_EQ(s.workload.queue, research->id);
    EXPECT_EQ(s.workload.min_pods, s.workload.pods);
    EXPECT_EQ(s.workload.training.checkpoint_interval, seconds(600));
  }
  // Two projects and none named: an error that says how to fix it.
  auto unnamed = ParseTraceSpec("philly:" + testing::SourceDir() + "/tests/data/philly_head50.csv");
  ASSERT_TRUE(unnamed.ok());
  Status s = AddWorkloadTrace(*unnamed, *cluster, w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("set project=NAME"), std::string::npos);
  // queue=vc needs a queue per Philly virtual cluster.
  auto vc = ParseTraceSpec("philly:" + testing::SourceDir() + "/tests/data/philly_head50.csv,project=research,queue=vc");
  ASSERT_TRUE(vc.ok());
  s = AddWorkloadTrace(*vc, *cluster, w);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("field 'cluster': no queue named"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("vc_nodes=PATH"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tidal::sim
