// The loaders of sim/*_trace_loader.h and sim/openb_cluster_loader.h, the
// VC queues of queue=vc,vc_nodes=PATH and the bounds every loader shares.
#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "config/policy_loader.h"
#include "sim/dlrm_trace_loader.h"
#include "sim/helios_trace_loader.h"
#include "sim/lora_trace_loader.h"
#include "sim/openb_cluster_loader.h"
#include "sim/sim_setup.h"
#include "sim/text_reader.h"
#include "sim/tiresias_trace_loader.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

using ::tidal::testing::MakeScratchDir;
using ::tidal::testing::SourceDir;
using ::tidal::testing::WriteScratchFile;

// Expects `r` to fail with "PATH:LINE: field 'FIELD'".
template <typename T>
void ExpectFieldError(const StatusOr<T>& r, const std::string& path, int line, const std::string& field) {
  ASSERT_FALSE(r.ok()) << path << " should fail at " << field;
  EXPECT_NE(r.status().message().find(path + ":" + std::to_string(line) + ": field '" + field + "'"),
            std::string::npos)
      << r.status().message();
}

TEST(TextReaderBoundsTest, AnOverlongLineIsAnErrorNotAnAllocation) {
  const std::string dir = MakeScratchDir("bounds");
  const std::string path = WriteScratchFile(
      dir, "t.csv", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n" +
                        std::string(kMaxTraceLineBytes + 10, '1') + "\n");
  auto r = LoadTiresiasTrace(path, TraceOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path + ":2: line longer than 65536 bytes"), std::string::npos)
      << r.status().message();
  auto empty = LoadTiresiasTrace(WriteScratchFile(dir, "e.csv", ""), TraceOptions{});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty file"), std::string::npos);
}

TEST(TiresiasLoaderTest, ReadsTheCommittedTraceAsGangs) {
  auto jobs = LoadTiresiasTrace(SourceDir() + "/tests/data/tiresias_60_job.csv", TraceOptions{});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  // 60 jobs: 30 x 1 GPU, 10 x 2, 10 x 4, 10 x 8 (all within one 8-GPU node).
  ASSERT_EQ(jobs->size(), 60u);
  int gpus = 0;
  for (const TraceJob& j : *jobs) gpus += j.pods * j.gpus_per_pod;
  EXPECT_EQ(gpus, 30 + 20 + 40 + 80);
  // Row 1: job 0, 1 GPU at 0 s for 164 s; row 2: job 1, 8 GPUs at 30 s.
  EXPECT_EQ((*jobs)[0].name, "tiresias-0");
  EXPECT_DOUBLE_EQ((*jobs)[0].duration_s, 164);
  EXPECT_EQ((*jobs)[0].group, "vgg19");
  EXPECT_DOUBLE_EQ((*jobs)[1].submit_s, 30);
  EXPECT_EQ((*jobs)[1].gpus_per_pod, 8);
  TraceOptions small;
  small.node_gpus = 4;  // 8 GPUs on 4-GPU nodes: 2 pods x 4
  auto split = LoadTiresiasTrace(SourceDir() + "/tests/data/tiresias_60_job.csv", small);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ((*split)[1].pods, 2);
  EXPECT_EQ((*split)[1].gpus_per_pod, 4);

  const std::string dir = MakeScratchDir("tiresias");
  const std::string header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
  for (const auto& [row, field] : std::vector<std::pair<std::string, std::string>>{
           {"0,0,0,606,vgg19,164,30", "num_gpu"},
           {"0,1,-5,606,vgg19,164,30", "submit_time"},
           {"0,1,0,606,vgg19,x,30", "duration"},
           {"0,1,0,606,,164,30", "model_name"},
           {"0,1,0,606", "row"}}) {
    const std::string path = WriteScratchFile(dir, "bad.csv", header + row + "\n");
    ExpectFieldError(LoadTiresiasTrace(path, TraceOptions{}), path, 2, field);
  }
}

TEST(PolluxLoaderTest, NeedsARunTimeAndReadsTheCommittedSample) {
  const std::string path = SourceDir() + "/tests/data/pollux_workload1_head20.csv";
  auto none = LoadPolluxWorkload(path, TraceOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("set duration_s=SECONDS"), std::string::npos);
  TraceOptions o;
  o.job_duration_s = 1800;
  o.duration_scale = 2;
  auto jobs = LoadPolluxWorkload(path, o);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 20u);
  // Row 1: cifar10-0 at 107 s with 6 replicas; rebased to the first arrival.
  EXPECT_EQ((*jobs)[0].name, "cifar10-0");
  EXPECT_DOUBLE_EQ((*jobs)[0].submit_s, 0);
  EXPECT_EQ((*jobs)[0].gpus_per_pod * (*jobs)[0].pods, 6);
  EXPECT_EQ((*jobs)[0].group, "cifar10");
  EXPECT_DOUBLE_EQ((*jobs)[0].duration_s, 3600);  // 1800 s x duration_scale 2
  EXPECT_DOUBLE_EQ((*jobs)[1].submit_s, 3);       // deepspeech2-1 at 110 s
  const std::string dir = MakeScratchDir("pollux");
  const std::string bad = WriteScratchFile(dir, "bad.csv",
                                           "name,time,application,num_replicas,batch_size\n"
                                           "a,1,cifar10,0,128\n");
  ExpectFieldError(LoadPolluxWorkload(bad, o), bad, 2, "num_replicas");
}

constexpr char kHeliosHeader[] =
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n";

TEST(HeliosLoaderTest, MakesGangsPerNodeAndSkipsCpuJobsAndJobsThatNeverStarted) {
  const std::string dir = MakeScratchDir("helios");
  const std::string path = WriteScratchFile(
      dir, "cluster_log.csv",
      std::string(kHeliosHeader) +
          "j1,u1,vcA,16,64,2,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,50\n"
          "j2,u2,vcB,0,8,1,COMPLETED,2020-04-01 00:00:20,2020-04-01 00:00:20,2020-04-01 00:10:20,600,0\n"
          "j3,u1,vcA,1,4,1,CANCELLED,2020-04-01 00:00:30,,2020-04-01 00:05:30,0,300\n"
          "j4,u3,vcB,1,4,1,FAILED,2020-04-01 00:00:05,2020-04-01 00:00:06,2020-04-01 00:00:16,10,1\n");
  auto r = LoadHeliosTrace(path, TraceOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped_cpu_only, 1u);   // j2
  EXPECT_EQ(r->skipped_never_ran, 1u);  // j3: no start_time
  ASSERT_EQ(r->jobs.size(), 2u);
  // j4 (00:00:05) first, then j1 five seconds later: 16 GPUs over 2 nodes.
  EXPECT_EQ(r->jobs[0].name, "helios-j4");
  EXPECT_EQ(r->jobs[1].name, "helios-j1");
  EXPECT_DOUBLE_EQ(r->jobs[1].submit_s, 5);
  EXPECT_EQ(r->jobs[1].pods, 2);
  EXPECT_EQ(r->jobs[1].gpus_per_pod, 8);
  EXPECT_DOUBLE_EQ(r->jobs[1].duration_s, 3600);
  EXPECT_EQ(r->jobs[1].group, "vcA");
  const std::string bad = WriteScratchFile(
      dir, "bad.csv",
      std::string(kHeliosHeader) +
          "j1,u1,vcA,1,4,1,COMPLETED,2020-04-01 00:00:10,2020-03-01 00:00:00,2020-04-01 01:01:00,3600,0\n");
  ExpectFieldError(LoadHeliosTrace(bad, TraceOptions{}), bad, 2, "start_time");
}

constexpr char kDlrmHeader[] =
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
    "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
    "scheduled_time,deletion_time\n";

TEST(DlrmLoaderTest, GpuInstancesBecomeReplicasThatMayOutliveTheTrace) {
  const std::string dir = MakeScratchDir("dlrm");
  const std::string path = WriteScratchFile(
      dir, "dlrm.csv",
      std::string(kDlrmHeader) +
          "i0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,500.0\n"      // before the trace
          "i1,CN,app_0,8,8,0,0,0,0,64.0,64.0,100.0,100.0,-1,10.0,11.0,900.0\n"  // CPU
          "i2,HN,app_1,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,100.0,110.0,\n"  // outlives it
          "i3,HN,app_1,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,200.0,200.5,2000.0\n");
  auto r = LoadDlrmInstances(path, TraceOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped_cpu_only, 1u);
  ASSERT_EQ(r->jobs.size(), 3u);
  for (const TraceJob& j : r->jobs) EXPECT_EQ(j.kind, WorkloadKind::kInference);
  EXPECT_EQ(r->jobs[0].name, "i0");
  EXPECT_DOUBLE_EQ(r->jobs[0].submit_s, 0);
  EXPECT_DOUBLE_EQ(r->jobs[0].duration_s, 500);  // from the trace start to 500 s
  EXPECT_EQ(r->jobs[1].group, "app_1");
  // The trace ends at its latest time, 2000 s: 2000 - 110 s.
  EXPECT_DOUBLE_EQ(r->jobs[1].duration_s, 1890);
  EXPECT_DOUBLE_EQ(r->jobs[2].duration_s, 1799.5);  // 2000 - 200.5
  const std::string bad = WriteScratchFile(
      dir, "bad.csv",
      std::string(kDlrmHeader) + "i0,XN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,500.0\n");
  ExpectFieldError(LoadDlrmInstances(bad, TraceOptions{}), bad, 2, "role");
  const std::string late = WriteScratchFile(
      dir, "late.csv",
      std::string(kDlrmHeader) + "i0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,50,40,500.0\n");
  ExpectFieldError(LoadDlrmInstances(late, TraceOptions{}), late, 2, "scheduled_time");
}

constexpr char kLoraHeader[] =
    "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,"
    "negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,"
    "num_lora\n";

TEST(GenaiLoraLoaderTest, CountsRequestsPerWindowWhateverTheirStatus) {
  const std::string dir = MakeScratchDir("lora");
  const std::string path = WriteScratchFile(
      dir, "lora.csv",
      std::string(kLoraHeader) +
          "2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0\n"
          "2024-11-15 16:58:10,IMG_2_IMG,FAILED,1.0,G0001,93.0,,1.0,40.0,M0001,2\n"
          "2024-11-15 17:00:49,TXT_2_IMG,PENDING,,G0002,10.0,,1.0,20.0,M0000,0\n"
          "2024-11-15 16:57:55,TXT_2_IMG,SUCCEED,12.0,G0000,63.0,26.0,1.0,30.0,M0000,1\n");
  TraceOptions o;
  o.window_s = 60;
  o.load_scale = 2;
  auto s = LoadGenaiLoraTrace(path, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Offsets from 16:57:50: 0, 20, 179, 5 s -> windows 0, 0, 2, 0: {3, 0, 1} / 60 s x 2.
  ASSERT_EQ(s->rps.size(), 3u);
  EXPECT_DOUBLE_EQ(s->rps[0], 3.0 / 60 * 2);
  EXPECT_DOUBLE_EQ(s->rps[1], 0);
  EXPECT_DOUBLE_EQ(s->rps[2], 1.0 / 60 * 2);
  for (const auto& [row, field] : std::vector<std::pair<std::string, std::string>>{
           {"2024-11-15 16:57,TXT_2_IMG,SUCCEED,32.0,G0,63.0,26.0,1.0,30.0,M0,0", "gmt_create"},
           {"2024-11-15 16:57:50,TXT_2_IMG,DONE,32.0,G0,63.0,26.0,1.0,30.0,M0,0", "predict_status"},
           {"2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,-1,G0,63.0,26.0,1.0,30.0,M0,0", "exec_time_seconds"},
           {"2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,3,G0,63.0,26.0,1.0,30.0,M0,x", "num_lora"}}) {
    const std::string bad = WriteScratchFile(dir, "bad.csv", std::string(kLoraHeader) + row + "\n");
    ExpectFieldError(LoadGenaiLoraTrace(bad, o), bad, 2, field);
  }
  auto spec = ParseTraceSpec("chat=genai_lora:" + path + ",window_s=60");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto series = ReadLoadTrace(*spec);
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  EXPECT_EQ(series->rps.size(), 3u);
}

TEST(GenaiLoraLoaderTest, FiltersByModelAndRequestTypeOnTheWholeFilesClock) {
  const std::string dir = MakeScratchDir("lora-filter");
  const std::string path = WriteScratchFile(
      dir, "lora.csv",
      std::string(kLoraHeader) +
          "2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0\n"
          "2024-11-15 16:58:10,IMG_2_IMG,FAILED,1.0,G0001,93.0,,1.0,40.0,M0001,2\n"
          "2024-11-15 17:00:49,TXT_2_IMG,PENDING,,G0002,10.0,,1.0,20.0,M0001,0\n"
          "2024-11-15 17:01:10,INPAINTING,SUCCEED,9.0,G0002,10.0,,1.0,20.0,,0\n"
          "2024-11-15 16:57:55,TXT_2_IMG,SUCCEED,12.0,G0000,63.0,26.0,1.0,30.0,M0000,1\n");
  TraceOptions o;
  o.window_s = 60;
  // M0001 only: its first request is 20 s after the file's first, so the
  // curve still starts at 16:57:50 (window 0), not at its own first request.
  LoraRequestFilter m1;
  m1.models = {"M0001"};
  auto s = LoadGenaiLoraTrace(path, o, m1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->rps.size(), 4u);  // runs to the file's last request (window 3)
  EXPECT_DOUBLE_EQ(s->rps[0], 1.0 / 60);
  EXPECT_DOUBLE_EQ(s->rps[2], 1.0 / 60);
  EXPECT_DOUBLE_EQ(s->rps[3], 0);
  // TXT_2_IMG of M0000 or M0001: both filters must match.
  LoraRequestFilter txt;
  txt.models = {"M0000", "M0001"};
  txt.request_types = {"TXT_2_IMG"};
  auto t = LoadGenaiLoraTrace(path, o, txt);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_DOUBLE_EQ(t->rps[0], 2.0 / 60);
  EXPECT_DOUBLE_EQ(t->rps[2], 1.0 / 60);
  // The request with an empty model id is kept by a type filter alone.
  LoraRequestFilter inpaint;
  inpaint.request_types = {"INPAINTING"};
  auto i = LoadGenaiLoraTrace(path, o, inpaint);
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_DOUBLE_EQ(i->rps[3], 1.0 / 60);
  EXPECT_DOUBLE_EQ(i->rps[0] + i->rps[1] + i->rps[2], 0);
  // Curves of a split add up to the unfiltered one.
  LoraRequestFilter rest;
  rest.request_types = {"IMG_2_IMG", "INPAINTING"};
  auto all = LoadGenaiLoraTrace(path, o);
  auto txt_only = LoadGenaiLoraTrace(path, o, LoraRequestFilter{{}, {"TXT_2_IMG"}});
  auto others = LoadGenaiLoraTrace(path, o, rest);
  ASSERT_TRUE(all.ok() && txt_only.ok() && others.ok());
  for (size_t w = 0; w < all->rps.size(); ++w)
    EXPECT_DOUBLE_EQ(txt_only->rps[w] + others->rps[w], all->rps[w]) << "window " << w;

  // A value no request has is an error naming the column and the key.
  LoraRequestFilter typo;
  typo.models = {"M0001", "M9999"};
  auto bad = LoadGenaiLoraTrace(path, o, typo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ": field 'checkpoint_model_version_id': no request "
                                                "has checkpoint_model_version_id \"M9999\" (key 'model'"),
            std::string::npos)
      << bad.status().message();
  auto bad_type = LoadGenaiLoraTrace(path, o, LoraRequestFilter{{}, {"TXT2IMG"}});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("field 'predict_type'"), std::string::npos)
      << bad_type.status().message();
  EXPECT_NE(bad_type.status().message().find("key 'request_type'"), std::string::npos);

  // Through the spec: model=A|B and request_type=T.
  auto spec = ParseTraceSpec("sd=genai_lora:" + path + ",model=M0000|M0001,request_type=TXT_2_IMG");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto series = ReadLoadTrace(*spec);
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  EXPECT_EQ(series->rps, t->rps);
  auto typo_spec = ParseTraceSpec("sd=genai_lora:" + path + ",model=M0007");
  ASSERT_TRUE(typo_spec.ok());
  auto typo_series = ReadLoadTrace(*typo_spec);
  ASSERT_FALSE(typo_series.ok());
  EXPECT_NE(typo_series.status().message().find("M0007"), std::string::npos);
}

TEST(OpenbClusterLoaderTest, SplitsEachModelBetweenSharedAndTrainingPools) {
  const std::string dir = MakeScratchDir("openb-nodes");
  const std::string path = WriteScratchFile(dir, "nodes.csv",
                                            "sn,cpu_milli,memory_mib,gpu,model\n"
                                            "openb-node-0000,32000,262144,0,\n"
                                            "openb-node-0001,96000,786432,8,G2\n"
                                            "openb-node-0002,96000,786432,8,G2\n"
                                            "openb-node-0003,96000,786432,8,G2\n"
                                            "openb-node-0004,64000,262144,2,T4\n");
  auto c = LoadOpenbClusterSpec("openb:" + path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->skipped_cpu_nodes, 1);
  const config::ClusterConfig& cfg = c->config;
  ASSERT_EQ(cfg.cluster.nodes.size(), 4u);
  // G2: nodes 1 and 3 of 3 go to shared (1 <= 0.5 x 1, 2 <= 0.5 x 3), node 2
  // to training; T4's only node to shared: serving 8 + 8 + 2, batch 8.
  EXPECT_EQ(cfg.FindQueue("serving")->guaranteed_gpus, 18);
  EXPECT_EQ(cfg.FindQueue("batch")->guaranteed_gpus, 8);
  const Node* t4 = cfg.FindNode("openb-node-0004");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->gpu_model, "T4");
  EXPECT_EQ(t4->gpu_count, 2);
  EXPECT_EQ(t4->gpu_memory_gib, 16);
  ASSERT_NE(cfg.FindProject("online"), nullptr);
  ASSERT_NE(cfg.FindProject("batch"), nullptr);
  auto all_training = LoadOpenbClusterSpec("openb:" + path + ",inference_share=0");
  ASSERT_TRUE(all_training.ok()) << all_training.status().ToString();
  EXPECT_EQ(all_training->config.FindQueue("serving")->guaranteed_gpus, 0);
  EXPECT_FALSE(LoadOpenbClusterSpec("openb:" + path + ",share=1").ok());
  const std::string bad = WriteScratchFile(dir, "bad.csv",
                                           "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,8,\n");
  ExpectFieldError(LoadOpenbClusterSpec("openb:" + bad), bad, 2, "model");
  // Through LoadSimInput: --cluster openb:PATH.
  SimFiles files;
  files.cluster = "openb:" + path;
  auto in = LoadSimInput(files);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->cluster.cluster.nodes.size(), 4u);
}

TEST(VcQueuesTest, QueueVcCreatesTheQueuesFromTheVcNodeList) {
  // Training: 4 nodes x 8 = 32 GPUs in research, split over the 11 VCs of
  // philly_vc_nodes.csv (352 nodes) by node count: 6214e9 has 64 nodes, so
  // floor(32 x 64 / 352) = 5 GPUs; ed69ec 8 nodes -> floor(32 x 8 / 352) = 0.
  auto cluster = config::ParseClusterYaml(testing::SmallClusterYaml(1, 1, 4));
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string dir = MakeScratchDir("vc");
  const std::string trace = WriteScratchFile(dir, "p.csv",
                                             "timestamp,duration,num_gpus,gpu_time,cluster\n"
                                             "2017-10-09 07:01:55,66.0,1,66.0,6214e9\n"
                                             "2017-10-09 07:02:55,66.0,1,66.0,23dbec\n");
  auto spec = ParseTraceSpec("philly:" + trace + ",project=research,queue=vc,vc_nodes=" + SourceDir() +
                             "/tests/data/philly_vc_nodes.csv");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const size_t queues_before = cluster->queues.size();
  std::vector<SimWorkload> w;
  Status s = AddWorkloadTrace(*spec, *cluster, w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // 11 from the file and 23dbec, which the file does not list (guarantee 0).
  EXPECT_EQ(cluster->queues.size(), queues_before + 12);
  const Queue* research = cluster->FindQueue("research");
  const Queue* big = cluster->FindQueue("6214e9");
  const Queue* unlisted = cluster->FindQueue("23dbec");
  ASSERT_NE(big, nullptr);
  ASSERT_NE(unlisted, nullptr);
  EXPECT_EQ(big->parent, research->id);
  EXPECT_EQ(big->pools, research->pools);  // no wider than the parent's
  EXPECT_EQ(big->guaranteed_gpus, 5);
  EXPECT_EQ(cluster->FindQueue("ed69ec")->guaranteed_gpus, 0);
  EXPECT_EQ(unlisted->guaranteed_gpus, 0);
  int children = 0;
  for (const Queue& q : cluster->queues)
    if (q.parent == research->id) children += q.guaranteed_gpus;
  EXPECT_LE(children, research->guaranteed_gpus);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].workload.queue, big->id);
  EXPECT_EQ(w[1].workload.queue, unlisted->id);
  const Project* p = cluster->FindProject("research");
  EXPECT_TRUE(p->MayUseQueue(big->id));
  // The result is a valid cluster: the simulator runs it.
  SimInput in;
  in.cluster = *cluster;
  in.policy = config::DefaultPolicy();
  in.workloads = w;
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->summary.training.completed, 2);
  EXPECT_FALSE(ParseTraceSpec("philly:x.csv,vc_nodes=v.csv").ok());  // needs queue=vc
}

TEST(TraceCountsTest, TheSummarySaysWhatTheOpenbLoaderSkipped) {
  const std::string dir = MakeScratchDir("openb-counts");
  const std::string pods = WriteScratchFile(
      dir, "pods.csv",
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
      "scheduled_time\n"
      "pod-a,12000,16384,1,1000,,BE,Running,100,1100,150\n"
      "pod-b,6000,12288,1,460,,BE,Pending,40,540,\n"
      "pod-c,4000,8192,0,0,,BE,Running,60,90,60\n");
  const std::string nodes = WriteScratchFile(dir, "nodes.csv",
                                             "sn,cpu_milli,memory_mib,gpu,model\n"
                                             "n1,96000,786432,8,G2\nn2,96000,786432,8,G2\n");
  SimFiles files;
  files.cluster = "openb:" + nodes;
  files.traces = {"openb:" + pods + ",project=batch"};
  auto in = LoadSimInput(files);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->traces.jobs, 1);
  EXPECT_EQ(in->traces.skipped_cpu_only, 1);
  EXPECT_EQ(in->traces.skipped_never_ran, 1);
  SimOptions o;
  o.wall_times = false;
  auto r = RunSimulation(*in, o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto j = r->summary.ToJson();
  EXPECT_EQ(j["traces"]["skipped_never_ran"], 1);
  EXPECT_EQ(j["traces"]["skipped_cpu_only"], 1);
  EXPECT_EQ(j["traces"]["jobs"], 1);
}

}  // namespace
}  // namespace tidal::sim
