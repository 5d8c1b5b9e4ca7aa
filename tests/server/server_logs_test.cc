// GET /v1/workloads/{id}/logs serves what the node running a pod uploaded
// (POST /v1/agent/nodes/{node}/pods/logs): only that node may write a
// rank's log, only the workload's tenant (or an admin) may read it, and
// each rank keeps its last 1 MiB.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "protocol/pod_log.h"
#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

// Registers `name` (2 GPUs, labelled host=name) as an admin; its credential.
std::string RegisterNode(const ServerProcess& s, const std::string& name) {
  json reg = {{"name", name}, {"pool", "training"}, {"gpu_model", "A100-80GB"}, {"gpu_memory_gib", 80},
              {"gpus", json::array({json{{"index", 0}}, json{{"index", 1}}})}, {"labels", {{"host", name}}}};
  HttpReply r = s.PostJson("/v1/agent/register", kAdminToken, reg);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json().value("credential", "");
}

protocol::PodLogPage Page(const ServerProcess& s, uint64_t id, int rank, int64_t offset,
                          const std::string& token = kResearchToken) {
  HttpReply r = s.Get("/v1/workloads/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank) +
                          "&offset=" + std::to_string(offset), token);
  EXPECT_EQ(r.status, 200) << r.body;
  auto page = protocol::PodLogPageFromJson(r.json());
  EXPECT_TRUE(page.ok()) << page.status().ToString() << " " << r.body;
  return page.ok() ? *page : protocol::PodLogPage{};
}

int Upload(const ServerProcess& s, const std::string& node, const std::string& token,
           const protocol::PodLogBatch& batch, int* accepted = nullptr) {
  HttpReply r = s.PostJson("/v1/agent/nodes/" + node + "/pods/logs", token, protocol::PodLogBatchToJson(batch));
  if (accepted && r.status == 200) *accepted = r.json()["accepted"];
  return r.status;
}

TEST(ServerLogs, TheRunningNodeUploadsAndTheTenantReadsWithACursor) {
  ServerProcess s;
  const std::string x = RegisterNode(s, "gpu-x"), y = RegisterNode(s, "gpu-y");
  HttpReply sub = s.PostJson("/v1/workloads", kResearchToken,
                             json{{"name", "logged"}, {"project", "vision"}, {"gpus_per_replica", 2},
                                  {"node_selector", {{"host", "gpu-x"}}}, {"command", {"/bin/true"}}});
  ASSERT_EQ(sub.status, 201) << sub.body;
  const uint64_t id = sub.json()["id"];
  for (int i = 0; i < 300 && s.Get("/v1/workloads/" + std::to_string(id), kAdminToken).json()["state"] != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Nothing yet: an empty page at offset 0.
  protocol::PodLogPage empty = Page(s, id, 0, 0);
  EXPECT_EQ(empty.data, "");
  EXPECT_EQ(empty.next_offset, 0);

  int accepted = -1;
  ASSERT_EQ(Upload(s, "gpu-x", x, {{{{id, 0, 0}, "step 1\n"}, {{id, 0, 0}, "step 2\n"}}}, &accepted), 200);
  EXPECT_EQ(accepted, 2);
  // gpu-y does not run the pod: its upload is dropped (and it may not
  // write under gpu-x's name at all).
  ASSERT_EQ(Upload(s, "gpu-y", y, {{{{id, 0, 0}, "forged\n"}}}, &accepted), 200);
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(Upload(s, "gpu-x", y, {{{{id, 0, 0}, "forged\n"}}}), 403);

  protocol::PodLogPage all = Page(s, id, 0, 0);
  EXPECT_EQ(all.data, "step 1\nstep 2\n");
  EXPECT_EQ(all.offset, 0);
  EXPECT_EQ(all.next_offset, 14);  // 7 + 7 bytes
  EXPECT_FALSE(all.truncated);
  // Following: from next_offset only what came after.
  ASSERT_EQ(Upload(s, "gpu-x", x, {{{{id, 0, 0}, "step 3\n"}}}), 200);
  protocol::PodLogPage more = Page(s, id, 0, all.next_offset);
  EXPECT_EQ(more.data, "step 3\n");
  EXPECT_EQ(more.offset, 14);
  EXPECT_EQ(more.next_offset, 21);
  // An admin reads it too; another tenant is refused like GET /v1/workloads/{id}.
  EXPECT_EQ(Page(s, id, 0, 0, kAdminToken).data, "step 1\nstep 2\nstep 3\n");
  EXPECT_EQ(s.Get("/v1/workloads/" + std::to_string(id) + "/logs", kAdsToken).status, 403);
  EXPECT_EQ(s.Get("/v1/workloads/999/logs", kResearchToken).status, 404);
  EXPECT_EQ(s.Get("/v1/workloads/" + std::to_string(id) + "/logs?rank=x", kResearchToken).status, 400);
  EXPECT_EQ(s.Get("/v1/workloads/" + std::to_string(id) + "/logs?tail=1", kResearchToken).status, 400);

  // The pod exits; its last output still comes from the node that wrote it.
  HttpReply st = s.PostJson("/v1/agent/nodes/gpu-x/pods/status", x,
                            json{{"events", json::array({json{{"workload", id}, {"rank", 0}, {"phase", "exited"}, {"exit_code", 0}}})}});
  ASSERT_EQ(st.status, 200) << st.body;
  for (int i = 0; i < 300 && s.Get("/v1/workloads/" + std::to_string(id), kAdminToken).json()["state"] != "succeeded"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Upload(s, "gpu-x", x, {{{{id, 0, 0}, "done\n"}}}, &accepted), 200);
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(Page(s, id, 0, 21).data, "done\n");
}

TEST(ServerLogs, EachRankKeepsItsLastMebibyte) {
  ServerProcess s;
  const std::string x = RegisterNode(s, "gpu-x");
  HttpReply sub = s.PostJson("/v1/workloads", kResearchToken,
                             json{{"name", "chatty"}, {"project", "vision"}, {"gpus_per_replica", 1},
                                  {"node_selector", {{"host", "gpu-x"}}}, {"command", {"/bin/true"}}});
  ASSERT_EQ(sub.status, 201) << sub.body;
  const uint64_t id = sub.json()["id"];
  for (int i = 0; i < 300 && s.Get("/v1/workloads/" + std::to_string(id), kAdminToken).json()["state"] != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // 5 uploads of 256 KiB = 1.25 MiB: the first 256 KiB go.
  for (char c : std::string("abcde")) {
    ASSERT_EQ(Upload(s, "gpu-x", x, {{{{id, 0, 0}, std::string(protocol::kMaxPodLogChunkBytes, c)}}}), 200);
  }
  protocol::PodLogPage page = Page(s, id, 0, 0);
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.offset, protocol::kMaxPodLogChunkBytes);
  EXPECT_EQ(page.next_offset, 5 * protocol::kMaxPodLogChunkBytes);
  ASSERT_EQ(page.data.size(), size_t{1} << 20);
  EXPECT_EQ(page.data.front(), 'b');
  EXPECT_EQ(page.data.back(), 'e');
}

}  // namespace
}  // namespace tidal::testing
