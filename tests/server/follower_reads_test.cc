// A follower's API (server/follower_reads.h) against a real 3-member etcd
// (tests/support/etcd_cluster.h): a leader's control plane writes through its
// etcd store; a follower's copy of the same store serves the reads of
// committed state to a client that accepts stale reads, scoped to the
// caller's tenant as on the leader, and sends everything else to the leader.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <httplib.h>

#include "protocol/leader_redirect.h"
#include "server/control_plane.h"
#include "server/etcd_store.h"
#include "server/follower_reads.h"
#include "server/http_api.h"
#include "server/leader_election.h"
#include "server/server_config.h"
#include "server/system_clock.h"
#include "tests/support/etcd_store_fixture.h"
#include "tests/support/server_fixture.h"

namespace tidal::server {
namespace {

using nlohmann::json;

constexpr const char* kLeaderUrl = "http://127.0.0.1:1";
const Principal kAlice{"alice", Role::kUser, "research"};

json Training(const std::string& name) {
  return {{"name", name}, {"kind", "training"}, {"project", "llm-pretrain"}, {"gpus_per_replica", 1},
          {"replicas", 1}};
}

class FollowerReadsTest : public testing::EtcdStoreFixture {
 protected:
  void SetUp() override {
    EtcdStoreFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto config = ParseServerConfig(testing::DefaultServerConfig(), "server.yaml", "/");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;

    // The leader: elected, writing under its fence, recovered.
    auto client = EtcdClient::Create(url_.endpoints, std::chrono::milliseconds(1000));
    ASSERT_TRUE(client.ok());
    election_ = std::make_unique<LeaderElection>(std::move(client).value(), url_.prefix + "/leader", kLeaderUrl,
                                                 std::chrono::seconds(60));
    auto won = election_->TryAcquire();
    ASSERT_TRUE(won.ok() && *won);
    auto store = EtcdStore::Open(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->StartWriting(election_->fence_revision()).ok());
    leader_ = std::make_unique<ControlPlane>(config_, std::move(store).value(), clock_);
    ASSERT_TRUE(leader_->Recover().ok());

    // The follower: its own copy, its reads, its API on a free port.
    auto copy = EtcdStore::Open(url_);
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    copy_ = std::move(copy).value();
    reads_ = std::make_unique<FollowerReads>(config_, clock_, [] { return FollowerView{kLeaderUrl, ""}; },
                                             std::chrono::milliseconds(0));
    api_ = std::make_unique<HttpApi>(*reads_, config_.auth, config_);
    auto port = api_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    port_ = *port;
    serving_ = std::thread([this] { api_->Serve(); });
  }
  void TearDown() override {
    if (api_) api_->Stop();
    if (serving_.joinable()) serving_.join();
    api_.reset();
    reads_.reset();
    copy_.reset();
    leader_.reset();
  }

  uint64_t SubmitToLeader(const std::string& name) {
    auto r = leader_->Submit(kAlice, SubmitRequest{{Training(name)}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->ids[0] : 0;
  }
  // The follow loop's step: catch the copy up, tell the reads.
  void CatchUp() {
    ASSERT_TRUE(copy_->CatchUp().ok());
    reads_->CopyCaughtUp(*copy_);
  }
  httplib::Result Get(const std::string& path, const std::string& token, bool stale = true) {
    httplib::Client c("127.0.0.1", port_);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    if (stale) h.emplace(protocol::kConsistencyHeader, protocol::kConsistencyStale);
    return c.Get(path, h);
  }
  // Asks until the follower's answer to `path` satisfies `done`: a view is
  // built on its own thread. Polls a condition; no fixed sleep.
  bool ReadUntil(const std::string& path, const std::function<bool(const json&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = Get(path, testing::kResearchToken);
      if (r && r->status == 200 && done(json::parse(r->body))) return true;
      std::this_thread::yield();
    }
    return false;
  }

  ServerConfig config_;
  SystemClock clock_;
  std::unique_ptr<LeaderElection> election_;
  std::unique_ptr<ControlPlane> leader_;
  std::unique_ptr<EtcdStore> copy_;
  std::unique_ptr<FollowerReads> reads_;
  std::unique_ptr<HttpApi> api_;
  std::thread serving_;
  int port_ = 0;
};

TEST_F(FollowerReadsTest, ServesStaleReadsOfTheCopyAndFollowsItForward) {
  const uint64_t first = SubmitToLeader("first");
  CatchUp();
  ASSERT_TRUE(reads_->WaitForView(std::chrono::seconds(20)));
  auto r = Get("/v1/workloads/" + std::to_string(first), testing::kResearchToken);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["name"], "first");
  EXPECT_EQ(r->get_header_value(protocol::kReplicaHeader), "follower");
  EXPECT_FALSE(r->get_header_value(protocol::kStaleMsHeader).empty());
  EXPECT_EQ(r->get_header_value(protocol::kLeaderHeader), kLeaderUrl);

  // The leader goes on; the follower's next view has it.
  const uint64_t second = SubmitToLeader("second");
  CatchUp();
  EXPECT_TRUE(ReadUntil("/v1/workloads", [&](const json& list) {
    for (const json& w : list["workloads"]) {
      if (w["id"] == second) return true;
    }
    return false;
  }));
  // Queues and the audit come from the copy too.
  auto queues = Get("/v1/queues", testing::kResearchToken);
  ASSERT_TRUE(queues);
  EXPECT_EQ(queues->status, 200) << queues->body;
  auto audit = Get("/v1/audit?workload=" + std::to_string(first), testing::kResearchToken);
  ASSERT_TRUE(audit);
  ASSERT_EQ(audit->status, 200) << audit->body;
  EXPECT_FALSE(json::parse(audit->body)["audit"].empty());
}

TEST_F(FollowerReadsTest, EverythingElseGoesToTheLeader) {
  const uint64_t id = SubmitToLeader("job");
  CatchUp();
  ASSERT_TRUE(reads_->WaitForView(std::chrono::seconds(20)));
  auto expect_not_leader = [&](const httplib::Result& r, const std::string& what) {
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, 503) << what << ": " << r->body;
    auto reply = protocol::NotLeaderReplyFromJson(json::parse(r->body, nullptr, false));
    ASSERT_TRUE(reply.has_value()) << what << ": " << r->body;
    EXPECT_EQ(reply->leader_url, kLeaderUrl) << what;
    EXPECT_EQ(r->get_header_value(protocol::kLeaderHeader), kLeaderUrl) << what;
  };
  const std::string path = "/v1/workloads/" + std::to_string(id);
  // A client that must read its own writes does not say "stale".
  expect_not_leader(Get(path, testing::kResearchToken, /*stale=*/false), "a read without the header");
  // What only the leader's memory holds.
  expect_not_leader(Get(path + "/explain", testing::kResearchToken), "explain");
  expect_not_leader(Get(path + "/logs", testing::kResearchToken), "logs");
  expect_not_leader(Get("/readyz", ""), "readyz");
  // Writes, even with the header.
  httplib::Client c("127.0.0.1", port_);
  httplib::Headers h = {{"Authorization", std::string("Bearer ") + testing::kResearchToken},
                        {protocol::kConsistencyHeader, protocol::kConsistencyStale}};
  expect_not_leader(c.Post("/v1/workloads", h, Training("write").dump(), "application/json"), "a submit");
  expect_not_leader(c.Post(path + "/cancel", h, "", "application/json"), "a cancel");
  h = {{"Authorization", std::string("Bearer ") + testing::kAgentToken}};
  expect_not_leader(c.Post("/v1/agent/register", h, R"({"name":"n"})", "application/json"), "an agent");

  auto health = Get("/healthz", "");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->body, std::string("following ") + kLeaderUrl + "\n");
  auto metrics = Get("/metrics", "");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tidal_replica_leader 0"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("tidal_replica_staleness_seconds"), std::string::npos);
  // The leader's scheduling counters are not a follower's to show.
  EXPECT_EQ(metrics->body.find("tidal_preemptions_total"), std::string::npos);
}

// Hostile tenants: a follower checks tokens and scopes every read to the
// caller's tenant exactly as the leader does.
TEST_F(FollowerReadsTest, ReadsAreScopedToTheCallersTenant) {
  const uint64_t id = SubmitToLeader("research-only");
  CatchUp();
  ASSERT_TRUE(reads_->WaitForView(std::chrono::seconds(20)));
  const std::string path = "/v1/workloads/" + std::to_string(id);
  auto other = Get(path, testing::kAdsToken);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403) << other->body;  // as the leader answers
  auto list = Get("/v1/workloads", testing::kAdsToken);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_TRUE(json::parse(list->body)["workloads"].empty()) << list->body;
  auto nobody = Get(path, "");
  ASSERT_TRUE(nobody);
  EXPECT_EQ(nobody->status, 401);
  auto forged = Get(path, "not-a-token");
  ASSERT_TRUE(forged);
  EXPECT_EQ(forged->status, 401);
}

}  // namespace
}  // namespace tidal::server
