// Issue #9: a replay of a server's journal stays exact across the server's
// restarts. A real ControlPlane on a manual clock runs passes, loses a
// node's lease, restarts on its store twice (the second time with a job
// borrowing a shared node), and runs on; `JournalReplay` over the store then
// makes every lifecycle, co-location and engine edit the server made. Before
// the server_start record, the replay kept its loans and its not-ready node
// across the restart, while the server lent the shared node anew and brought
// the node back ready: the replay differed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "protocol/node_registration.h"
#include "server/control_plane.h"
#include "server/server_config.h"
#include "server/store.h"
#include "sim/journal_replay.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

using nlohmann::json;

const server::Principal kAdmin{"admin", server::Role::kAdmin, ""};
const server::Principal kAlice{"alice", server::Role::kUser, "research"};
const server::Principal kAgent{"node-agent", server::Role::kAgent, ""};
server::Principal NodeP(const std::string& node) { return {"agent:" + node, server::Role::kNode, "", node}; }

class ServerRestartReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeScratchDir("restart-replay");
    auto config = server::ParseServerConfig("cluster_file: cluster.yaml\npolicy_file: policy.yaml\nstore: sqlite:" +
                                                dir_ + "/tidal.db\n",
                                            "test.yaml", testing::SourceDir() + "/tests/server/testdata");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    clock_.Set(TimeFromMillis(1'764'000'000'000));
    Open();
    for (const Node& node : config_.catalog.cluster.nodes) {
      protocol::NodeRegistration reg;
      reg.name = node.name;
      auto r = cp_->RegisterNode(kAgent, protocol::NodeRegistrationToJson(reg));
      ASSERT_TRUE(r.ok()) << node.name << ": " << r.status().ToString();
    }
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    auto store = server::OpenStore(config_.store);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    cp_ = std::make_unique<server::ControlPlane>(config_, std::move(store).value(), clock_);
    ASSERT_TRUE(cp_->Recover().ok());
  }
  void Restart() {
    cp_.reset();
    Open();
  }
  void Submit(const std::string& name, int gpus) {
    auto r = cp_->Submit(kAlice, {{"name", name}, {"project", "vision"}, {"gpus_per_replica", gpus}}, "");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Every node but `silent` renews its lease.
  void Heartbeats(const std::string& silent) {
    for (const Node& node : config_.catalog.cluster.nodes) {
      if (node.name == silent) continue;
      ASSERT_TRUE(cp_->Heartbeat(NodeP(node.name), node.name, json::object()).ok());
    }
  }
  ReplayReport ReplayStore() {
    cp_.reset();  // flushes the store
    auto store = server::OpenStore(config_.store);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    auto cluster_text = (*store)->ReadMeta(server::kMetaCluster);
    auto policy_text = (*store)->ReadMeta(server::kMetaPolicy);
    EXPECT_TRUE(cluster_text.ok() && cluster_text->has_value());
    EXPECT_TRUE(policy_text.ok() && policy_text->has_value());
    auto cluster = ParseClusterText(**cluster_text, "meta cluster");
    auto policy = ParsePolicyText(**policy_text, "meta policy");
    EXPECT_TRUE(cluster.ok() && policy.ok());
    JournalReplay replay(*cluster, *policy);
    int64_t after = 0;
    while (true) {
      auto rows = (*store)->ReadJournal(after, 1000);
      EXPECT_TRUE(rows.ok()) << rows.status().ToString();
      if (!rows.ok() || rows->empty()) break;
      for (const server::JournalRow& row : *rows) {
        Status s = replay.FeedText(row.seq, row.entry);
        EXPECT_TRUE(s.ok()) << s.ToString();
        after = row.seq;
      }
    }
    return replay.Finish();
  }

  std::string dir_;
  server::ServerConfig config_;
  ManualClock clock_;
  std::unique_ptr<server::ControlPlane> cp_;
};

TEST_F(ServerRestartReplayTest, AJournalSpanningRestartsReplaysExactly) {
  // 4 training nodes of 8 GPUs: four 8-GPU jobs fill them.
  for (int i = 0; i < 4; ++i) Submit("t" + std::to_string(i), 8);
  cp_->RunPass();
  // trn-rack-a-1 misses its lease (30 s): its job is requeued and waits.
  clock_.Advance(seconds(20));
  Heartbeats("");
  clock_.Advance(seconds(11));
  Heartbeats("trn-rack-a-1");
  cp_->RunPass();
  // Restart 1: the node comes back ready under a fresh lease, and the
  // requeued job runs on it again.
  Restart();
  clock_.Advance(seconds(1));
  cp_->RunPass();
  // A fifth job borrows a shared node (research may borrow 8 GPUs there).
  Submit("t4", 8);
  cp_->RunPass();
  // Restart 2: the server forgets its loans and finds them again from the
  // borrowed work, lending the shared node anew.
  Restart();
  clock_.Advance(seconds(1));
  Heartbeats("");
  cp_->RunPass();
  Submit("t5", 4);
  clock_.Advance(seconds(5));
  cp_->RunPass();

  const ReplayReport report = ReplayStore();
  EXPECT_EQ(report.restarts, 3);  // the first start and two restarts
  EXPECT_GT(report.compared, 0);
  EXPECT_GE(report.journal.loans, 2) << "the shared node was lent before and after restart 2";
  EXPECT_TRUE(report.refused.empty()) << report.refused.front();
  for (const ReplayDifference& d : report.differences) ADD_FAILURE() << d.ToString();
}

}  // namespace
}  // namespace tidal::sim
