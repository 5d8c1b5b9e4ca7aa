#include "config/workload_loader.h"

#include <gtest/gtest.h>

#include <fstream>

#include "config/cluster_loader.h"

namespace tidal::config {
namespace {

ClusterConfig SmallCluster() {
  auto c = ParseClusterYaml(R"(pools: [training]
nodes:
  - {name: "n{i}", count: 2, gpus: 8, gpu_model: A100}
queues:
  - {name: nlp, guaranteed_gpus: 8}
  - {name: cv, guaranteed_gpus: 8}
projects:
  - {name: llm, tenant: research, tier: standard, queue: nlp}
  - {name: chat, tenant: chat, tier: critical, queue: cv, allowed_queues: [nlp]}
  - {name: lab, tenant: research, tier: standard, queue: cv, allowed_kinds: [debug]}
)");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

const char* kWorkloads = R"(workloads:
  - name: pretrain
    kind: training
    project: llm
    gpus_per_replica: 8
    replicas: 2
    duration_s: 3600
    checkpoint_interval_s: 600
    deadline_s: 7200
    submit_at_s: 10
    gpu_models: {required: [A100], preferred: [H100]}
    node_selector: {zone: a}
    tolerations: ["dedicated=nlp"]
    topology: {level: rack, required: true}
  - name: api
    kind: inference
    project: chat
    queue: nlp
    replicas: 4
    max_replicas: 8
    target_p99_ms: 200
    cold_start_s: 30
    replica_capacity_rps: 12.5
    model_size_gib: 40
    model_source: shared_storage
)";

std::string ErrorOf(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  auto w = ParseWorkloadYaml(text, SmallCluster());
  return w.ok() ? "OK" : w.status().message();
}

TEST(WorkloadLoaderTest, ParsesFieldsAndFillsDefaultsFromTheProject) {
  const ClusterConfig cluster = SmallCluster();
  auto specs = ParseWorkloadYaml(kWorkloads, cluster);
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  ASSERT_EQ(specs->size(), 2u);
  const Workload& t = (*specs)[0].workload;
  EXPECT_EQ(t.id, WorkloadId(1));
  EXPECT_EQ(t.kind, WorkloadKind::kTraining);
  EXPECT_EQ(t.tenant, "research");  // from the project
  EXPECT_EQ(t.queue, cluster.FindQueue("nlp")->id);  // the project's default queue
  EXPECT_EQ(t.gpus_per_pod, 8);
  EXPECT_EQ(t.pods, 2);
  EXPECT_EQ(t.min_pods, 2);  // training is a rigid gang by default
  EXPECT_EQ(t.max_pods, 2);
  EXPECT_EQ(t.min_gpus(), 16);
  EXPECT_EQ(t.expected_duration, hours(1));
  EXPECT_EQ(t.training.checkpoint_interval, minutes(10));
  EXPECT_EQ((*specs)[0].submit_offset, seconds(10));
  EXPECT_EQ(t.submit_time, TimeFromMillis(10'000));
  EXPECT_EQ(t.batch.deadline, TimeFromMillis(10'000 + 7'200'000));  // relative to submission
  EXPECT_EQ(t.constraints.required_gpu_models, std::vector<std::string>{"A100"});
  EXPECT_EQ(t.constraints.preferred_gpu_models, std::vector<std::string>{"H100"});
  EXPECT_EQ(t.constraints.node_selector.at("zone"), "a");
  EXPECT_EQ(t.constraints.tolerations, (std::vector<Taint>{{"dedicated", "nlp"}}));
  EXPECT_EQ(t.constraints.topology.level, TopologyLevel::kRack);
  EXPECT_TRUE(t.constraints.topology.required);

  const Workload& api = (*specs)[1].workload;
  EXPECT_EQ(api.id, WorkloadId(2));
  EXPECT_EQ(api.queue, cluster.FindQueue("nlp")->id);  // explicit queue wins
  EXPECT_EQ(api.gpus_per_pod, 1);
  EXPECT_EQ(api.min_pods, 1);  // a service may shrink to one replica
  EXPECT_EQ(api.max_pods, 8);
  EXPECT_EQ(api.inference.target_p99, milliseconds(200));
  EXPECT_EQ(api.inference.cold_start, seconds(30));
  EXPECT_DOUBLE_EQ(api.inference.replica_capacity_rps, 12.5);
  EXPECT_EQ(api.inference.model_source, ModelSource::kSharedStorage);
  EXPECT_EQ(api.submit_time, TimeFromMillis(0));
}

TEST(WorkloadLoaderTest, PriorityIsRefused) {
  EXPECT_EQ(ErrorOf(kWorkloads, "    replicas: 2\n", "    replicas: 2\n    priority: 900\n"),
            "workloads.yaml:7: workloads[0].priority: priority is derived from templates; "
            "remove field 'priority'");
}

TEST(WorkloadLoaderTest, ErrorsNameLineAndField) {
  EXPECT_EQ(ErrorOf(kWorkloads, "project: llm", "project: nope"),
            "workloads.yaml:4: workloads[0].project: unknown project 'nope'");
  EXPECT_EQ(ErrorOf(kWorkloads, "queue: nlp", "queue: ml"),
            "workloads.yaml:18: workloads[1].queue: unknown queue 'ml'");
  EXPECT_EQ(ErrorOf(kWorkloads, "gpus_per_replica: 8", "gpus_per_replica: 65"),
            "workloads.yaml:5: workloads[0].gpus_per_replica: expected an integer from 1 to 64, got 65");
  EXPECT_EQ(ErrorOf(kWorkloads, "replicas: 2\n", "replicas: 513\n"),
            "workloads.yaml:6: workloads[0].replicas: 513 x 8 GPUs is more than the 4096 GPUs a "
            "workload may ask for");
  EXPECT_EQ(ErrorOf(kWorkloads, "duration_s: 3600", "duration_s: -5"),
            "workloads.yaml:7: workloads[0].duration_s: expected a number from 0 to 1000000000, got -5");
  EXPECT_EQ(ErrorOf(kWorkloads, "max_replicas: 8", "max_replicas: 2"),
            "workloads.yaml:20: workloads[1].max_replicas: 2 is less than replicas 4");
  EXPECT_EQ(ErrorOf(kWorkloads, "kind: training", "kind: train"),
            "workloads.yaml:3: workloads[0].kind: expected one of "
            "training|inference|batch_inference|debug, got \"train\"");
  EXPECT_EQ(ErrorOf(kWorkloads, "target_p99_ms: 200", "checkpoint_interval_s: 200"),
            "workloads.yaml:21: workloads[1].checkpoint_interval_s: does not apply to kind inference");
  EXPECT_EQ(ErrorOf(kWorkloads, "project: chat", "project: chat\n    tenant: research"),
            "workloads.yaml:18: workloads[1].tenant: project 'chat' belongs to tenant 'chat', not 'research'");
  EXPECT_EQ(ErrorOf(kWorkloads, "name: api", "name: pretrain"),
            "workloads.yaml:15: workloads[1].name: duplicate workload 'pretrain'");
  EXPECT_EQ(ErrorOf(kWorkloads, "level: rack", "level: switch"),
            "workloads.yaml:14: workloads[0].topology.level: expected one of none|nvlink|node|rack, got \"switch\"");
}

TEST(WorkloadLoaderTest, AcceptsABareListAndJson) {
  auto specs = ParseWorkloadYaml(R"([{"name": "d", "kind": "debug", "project": "llm", "max_runtime_s": 60}])",
                                 SmallCluster(), "w.json");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  EXPECT_EQ((*specs)[0].workload.debug.max_runtime, minutes(1));
  auto bad = ParseWorkloadYaml(R"([{"name": "d", "kind": "debug"}])", SmallCluster(), "w.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "w.json:1: [0].project: required field is missing");
}

TEST(WorkloadLoaderTest, MissingFileIsAnError) {
  auto specs = LoadWorkloadFile("/nonexistent/w.yaml", SmallCluster());
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.status().code(), StatusCode::kNotFound);
}

// Entitlements from the cluster file: a project's own queue and the queues
// it is granted; the kinds it is granted.
TEST(WorkloadLoaderTest, QueuesAndKindsAreTheProjectsEntitlements) {
  // llm (queue nlp) has no grant for cv; chat is granted nlp (the api above).
  EXPECT_EQ(ErrorOf(kWorkloads, "    project: llm\n", "    project: llm\n    queue: cv\n"),
            "workloads.yaml:5: workloads[0].queue: project 'llm' may not use queue 'cv' (allowed: nlp)");
  EXPECT_EQ(ErrorOf(kWorkloads, "project: chat", "project: lab"),
            "workloads.yaml:16: workloads[1].kind: project 'lab' may not submit kind inference (allowed: debug)");
}

TEST(WorkloadLoaderTest, HostileValuesAreRefused) {
  // Training and batch say their GPUs; a default of 1 would silently shrink the job.
  EXPECT_EQ(ErrorOf(kWorkloads, "    gpus_per_replica: 8\n", ""),
            "workloads.yaml:2: workloads[0].gpus_per_replica: required for kind training (1 to 64)");
  EXPECT_EQ(ErrorOf(kWorkloads, "gpus_per_replica: 8", "gpus_per_replica: null"),
            "workloads.yaml:5: workloads[0].gpus_per_replica: expected an integer from 1 to 64, got nothing");
  EXPECT_EQ(ErrorOf(kWorkloads, "replicas: 2\n", "replicas: 9223372036854775808\n"),
            "workloads.yaml:6: workloads[0].replicas: expected an integer from 1 to 4096, got 9223372036854775808");
  EXPECT_EQ(ErrorOf(kWorkloads, "deadline_s: 7200", "deadline_s: 100"),
            "workloads.yaml:9: workloads[0].deadline_s: expected at least 600 s after submission, got 100");
  EXPECT_EQ(ErrorOf(kWorkloads, "name: pretrain", "name: \"pre\\ntrain\""),
            "workloads.yaml:2: workloads[0].name: expected a name of 1 to 63 lowercase letters, digits and "
            "'-', starting and ending with a letter or digit (DNS-1123 label); got the byte 0x0a");
  EXPECT_EQ(ErrorOf(kWorkloads, "name: pretrain", "name: Pre_Train"),
            "workloads.yaml:2: workloads[0].name: expected a name of 1 to 63 lowercase letters, digits and "
            "'-', starting and ending with a letter or digit (DNS-1123 label); got the character 'P'");
  EXPECT_EQ(ErrorOf(kWorkloads, "node_selector: {zone: a}", "node_selector: {zone: \"a\\u202eb\"}"),
            "workloads.yaml:12: workloads[0].node_selector.zone: expected printable ASCII, got the byte 0xe2");
  std::string many = "tolerations: [";
  for (int i = 0; i < 65; ++i) many += (i ? ", " : "") + std::string("t") + std::to_string(i);
  EXPECT_EQ(ErrorOf(kWorkloads, "tolerations: [\"dedicated=nlp\"]", many + "]"),
            "workloads.yaml:13: workloads[0].tolerations: expected at most 64 entries, got 65");
}

class JsonWorkloadFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const std::string path = ::testing::TempDir() + "/tidal-workloads-" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
    std::ofstream(path) << text;
    return path;
  }
};

// A .json file is JSON: a bad line is reported on its own line (YAML read it
// as a flow scalar and complained a line later), and field errors name the
// line of their key.
TEST_F(JsonWorkloadFileTest, IsParsedAsJsonWithExactLines) {
  const std::string good = R"({"workloads": [
  {"name": "d", "kind": "debug", "project": "llm",
   "max_runtime_s": 60}
]}
)";
  auto specs = LoadWorkloadFile(Write(good), SmallCluster());
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  EXPECT_EQ((*specs)[0].workload.debug.max_runtime, minutes(1));

  const std::string path = Write("{\"workloads\": [\n  {\"name\": \"d\", \"kind\": \"debug\"},\n  oops\n]}\n");
  auto bad = LoadWorkloadFile(path, SmallCluster());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind(path + ":3: invalid JSON: ", 0), 0u) << bad.status().message();

  const std::string field = Write(R"({"workloads": [
  {"name": "d", "kind": "debug", "project": "llm"},
  {"name": "e", "kind": "debug",
   "project": "llm",
   "max_runtime_s": -1}
]}
)");
  auto located = LoadWorkloadFile(field, SmallCluster());
  ASSERT_FALSE(located.ok());
  EXPECT_EQ(located.status().message(),
            field + ":5: workloads[1].max_runtime_s: expected a number from 0 to 1000000000, got -1");
  auto missing = LoadWorkloadFile(Write("[\n {\"name\": \"d\",\n  \"kind\": \"debug\"}]"), SmallCluster());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(":2: [0].project: required field is missing"), std::string::npos)
      << missing.status().message();
}

TEST_F(JsonWorkloadFileTest, DeepNestingAndHugeNumbersAreRefusedBeforeUse) {
  const std::string bomb = "[{\"name\": \"d\", \"kind\": \"debug\", \"project\": \"llm\", \"node_selector\": " +
                           std::string(150000, '[') + std::string(150000, ']') + "}]";
  auto deep = LoadWorkloadFile(Write(bomb), SmallCluster());
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than the limit of 64"), std::string::npos)
      << deep.status().message();
  auto huge = LoadWorkloadFile(Write(R"([{"name": "d", "kind": "debug", "project": "llm", "max_runtime_s": 1e309}])"),
                               SmallCluster());
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("1e309"), std::string::npos) << huge.status().message();
}

}  // namespace
}  // namespace tidal::config
