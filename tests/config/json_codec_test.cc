#include "config/json_codec.h"

#include <gtest/gtest.h>

#include "config/cluster_loader.h"
#include "config/workload_loader.h"

namespace tidal::config {
namespace {

using nlohmann::json;

ClusterConfig TestCluster() {
  auto c = ParseClusterYaml(R"(racks: [r1]
pools: [training, inference-reserved]
nodes:
  - {name: "a{i}", count: 2, pool: training, gpus: 8, gpu_model: H100, nvlink: 2x4, labels: {x: y}, taints: [k=v]}
queues:
  - {name: nlp, guaranteed_gpus: 8, lending_limit_gpus: 4, pools: [training]}
projects:
  - {name: llm, tenant: research, tier: standard, queue: nlp}
)");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(JsonCodecTest, StoredWorkloadRoundTrips) {
  const ClusterConfig cluster = TestCluster();
  auto specs = ParseWorkloadYaml(R"(- name: job
  kind: training
  project: llm
  gpus_per_replica: 4
  replicas: 2
  min_replicas: 1
  max_replicas: 4
  duration_s: 1.5
  checkpoint_interval_s: 600
  deadline_s: 7200
  preemptible: false
  submit_at_s: 20
  gpu_models: {required: [H100]}
  node_selector: {x: y}
  tolerations: [{key: k, value: v}]
  topology: {level: node, required: false}
)",
                                 cluster);
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  Workload w = (*specs)[0].workload;
  w.id = WorkloadId(77);
  w.state = WorkloadState::kRunning;
  w.priority = Priority{450, PreemptibilityClass::kPreemptible, "default", {"tier standard: base 500", "total 450"}, false};

  const NameScope scope = ScopeOf(cluster);
  const json j = WorkloadToJson(w, scope);
  EXPECT_EQ(j["project"], "llm");
  EXPECT_EQ(j["queue"], "nlp");
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["deadline_s"], 7200.0);
  EXPECT_EQ(j["priority"]["value"], 450);

  WorkloadJsonOptions stored;
  stored.mode = WorkloadJsonMode::kStored;
  auto back = WorkloadFromJson(j, scope, stored);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // Equal in every field the codec carries: compare their encodings.
  EXPECT_EQ(WorkloadToJson(back->workload, scope), j);
  EXPECT_EQ(back->workload.id, WorkloadId(77));
  EXPECT_EQ(back->workload.submit_time, w.submit_time);
  EXPECT_EQ(back->workload.batch.deadline, w.batch.deadline);
  EXPECT_EQ(back->workload.expected_duration, milliseconds(1500));
  EXPECT_EQ(back->workload.priority.derivation, w.priority.derivation);
}

TEST(JsonCodecTest, SubmissionsMayNotCarryServerFields) {
  const ClusterConfig cluster = TestCluster();
  const NameScope scope = ScopeOf(cluster);
  json body = {{"name", "j"}, {"kind", "training"}, {"project", "llm"}, {"gpus_per_replica", 1}};
  WorkloadJsonOptions options;
  options.id = 5;
  options.submit_base = TimeFromMillis(1000);
  auto ok = WorkloadFromJson(body, scope, options);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->workload.id, WorkloadId(5));
  EXPECT_EQ(ok->workload.submit_time, TimeFromMillis(1000));

  json with_id = body;
  with_id["id"] = 3;
  EXPECT_EQ(WorkloadFromJson(with_id, scope).status().message(),
            "id: is set by the server; remove field 'id'");
  json with_priority = body;
  with_priority["priority"] = 1000;
  EXPECT_EQ(WorkloadFromJson(with_priority, scope).status().message(),
            "priority: priority is derived from templates; remove field 'priority'");
}

TEST(JsonCodecTest, WrongTypesAndAbsurdSizesNameTheField) {
  const ClusterConfig cluster = TestCluster();
  const NameScope scope = ScopeOf(cluster);
  json body = {{"name", "j"}, {"kind", "training"}, {"project", "llm"}, {"gpus_per_replica", 1}};
  json t = body;
  t["replicas"] = "two";
  EXPECT_EQ(WorkloadFromJson(t, scope, {}, "workload").status().message(),
            "workload.replicas: expected an integer from 1 to 4096, got \"two\"");
  t = body;
  t["gpus_per_replica"] = -1;
  EXPECT_EQ(WorkloadFromJson(t, scope).status().message(),
            "gpus_per_replica: expected an integer from 1 to 64, got -1");
  t = body;
  t["gpus_per_replica"] = 64;
  t["replicas"] = 65;  // 4160 GPUs
  EXPECT_EQ(WorkloadFromJson(t, scope).status().message(),
            "replicas: 65 x 64 GPUs is more than the 4096 GPUs a workload may ask for");
  t = body;
  t["topology"] = {{"level", "rack"}, {"required", "yes"}};
  EXPECT_EQ(WorkloadFromJson(t, scope).status().message(),
            "topology.required: expected true or false, got \"yes\"");
  EXPECT_EQ(WorkloadFromJson(json::array(), scope).status().message(),
            "(document): expected an object, got a list");
  // A save on request is bounded (a notice cannot wait hours for one) and
  // belongs to training alone.
  t = body;
  t["checkpoint_on_request_s"] = 3601;
  EXPECT_NE(WorkloadFromJson(t, scope).status().message().find("checkpoint_on_request_s"), std::string::npos);
  t["checkpoint_on_request_s"] = 45;
  auto saved = WorkloadFromJson(t, scope);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->workload.training.checkpoint_on_request, seconds(45));
  EXPECT_EQ(WorkloadToJson(saved->workload, scope)["checkpoint_on_request_s"], 45.0);
  t["kind"] = "inference";
  EXPECT_NE(WorkloadFromJson(t, scope).status().message().find("checkpoint_on_request_s"), std::string::npos);
}

TEST(JsonCodecTest, DecisionsCarryNamesReasonsAndTimes) {
  const ClusterConfig cluster = TestCluster();
  std::vector<Workload> workloads(2);
  workloads[0].id = WorkloadId(1);
  workloads[0].name = "big";
  workloads[1].id = WorkloadId(2);
  workloads[1].name = "small";
  NameScope scope = ScopeOf(cluster);
  scope.workloads = &workloads;

  Decisions d;
  d.places.push_back(PlaceDecision{WorkloadId(2), {PodPlacement{NodeId(1), 0b0110}}, true});
  d.waits.push_back(WaitDecision{WorkloadId(1), ReasonCode::kGang, "gang: 8 of 16 GPUs fit", TimeFromMillis(5000)});
  d.waits.push_back(WaitDecision{WorkloadId(1), ReasonCode::kQuota, "quota", std::nullopt});
  PreemptDecision p;
  p.victim = WorkloadId(2);
  p.preemptor = WorkloadId(1);
  p.cause = PreemptCause::kReclaim;
  p.notice_time = TimeFromMillis(100);
  p.grace_deadline = TimeFromMillis(60100);
  p.lost_gpu_seconds = 12.5;
  d.preempts.push_back(p);
  d.rejects.push_back(RejectDecision{WorkloadId(1), ReasonCode::kCapacity, "too big"});

  const json j = DecisionsToJson(d, scope);
  EXPECT_EQ(j["places"][0]["name"], "small");
  EXPECT_EQ(j["places"][0]["gpus"], 2);
  EXPECT_EQ(j["places"][0]["borrowed"], true);
  EXPECT_EQ(j["places"][0]["pods"][0]["node"], "a2");
  EXPECT_EQ(j["places"][0]["pods"][0]["gpus"], json::array({1, 2}));
  EXPECT_EQ(j["waits"][0]["reason"], "gang");
  EXPECT_EQ(j["waits"][0]["estimated_start_ms"], 5000);
  EXPECT_TRUE(j["waits"][1]["estimated_start_ms"].is_null());
  EXPECT_EQ(j["preempts"][0]["cause"], "reclaim");
  EXPECT_EQ(j["preempts"][0]["victim_name"], "small");
  EXPECT_EQ(j["preempts"][0]["grace_deadline_ms"], 60100);
  EXPECT_EQ(j["rejects"][0]["reason"], "capacity");
  EXPECT_TRUE(j["resizes"].empty());
}

TEST(JsonCodecTest, ClusterNodeQueueAndPriority) {
  const ClusterConfig cluster = TestCluster();
  const json c = ClusterToJson(cluster.cluster);
  EXPECT_EQ(c["total_gpus"], 16);
  ASSERT_EQ(c["nodes"].size(), 2u);
  const json& n = c["nodes"][0];
  EXPECT_EQ(n["name"], "a1");
  EXPECT_EQ(n["pool"], "training");
  EXPECT_EQ(n["rack"], "r1");
  EXPECT_EQ(n["nvlink"], json::parse("[[0,1,2,3],[4,5,6,7]]"));
  EXPECT_EQ(n["labels"]["x"], "y");
  EXPECT_EQ(n["taints"][0]["key"], "k");
  EXPECT_EQ(c["pools"][1]["kind"], "inference-reserved");

  const json q = QueueToJson(cluster.queues[0], ScopeOf(cluster));
  EXPECT_EQ(q["lending_limit_gpus"], 4);
  EXPECT_EQ(q["borrowing_limit_gpus"], "unlimited");
  EXPECT_EQ(q["pools"], json::array({"training"}));
  EXPECT_TRUE(q["parent"].is_null());

  const json pj = ProjectToJson(cluster.projects[0], ScopeOf(cluster));
  EXPECT_EQ(pj["queue"], "nlp");
  EXPECT_EQ(pj["tenant"], "research");

  Priority p{1300, PreemptibilityClass::kNever, "default", {"tier critical: base 1000", "total 1300"}, true, 40, -200};
  auto back = PriorityFromJson(PriorityToJson(p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->value, 1300);
  EXPECT_EQ(back->resume_bonus, 40);
  EXPECT_EQ(back->borrowing_start_delta, -200);
  EXPECT_EQ(back->preemptibility, PreemptibilityClass::kNever);
  EXPECT_TRUE(back->awaiting_approval);
  EXPECT_EQ(back->derivation, p.derivation);
  EXPECT_EQ(PriorityFromJson(json{{"value", "high"}}).status().message(),
            "priority.value: expected an integer, got \"high\"");
}

TEST(JsonCodecTest, GpuIndices) {
  EXPECT_EQ(GpuIndices(0b1010), (std::vector<int>{1, 3}));
  EXPECT_TRUE(GpuIndices(0).empty());
  EXPECT_EQ(GpuIndices(GpuMask{1} << 63), std::vector<int>{63});
}

}  // namespace
}  // namespace tidal::config
