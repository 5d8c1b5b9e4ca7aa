// Issue #9: a replay of a server's journal stays exact across the server's
// restarts. A real ControlPlane on a manual clock runs passes, loses a
// node's lease, restarts on its store twice (the second time with a job
// borrowing a shared node), and runs on; `JournalReplay` over the store then
// makes every lifecycle, co-location and engine edit the server made. Before
// the server_start record, the replay kept its loans and its not-ready node
// across the restart, while the server lent the shared node anew and brought
// the node back ready: the replay differed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>

#include "protocol/journal_record.h"
#include "protocol/journal_snapshot.h"
#include "protocol/node_registration.h"
#include "protocol/pod_event.h"
#include "server/control_plane.h"
#include "server/server_config.h"
#include "server/store.h"
#include "sim/journal_replay.h"
#include "tests/support/faulty_store.h"
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
    auto r = cp_->Submit(kAlice, server::SubmitRequest{{json{{"name", name}, {"project", "vision"}, {"gpus_per_replica", gpus}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Every node but `silent` renews its lease.
  void Heartbeats(const std::string& silent) {
    for (const Node& node : config_.catalog.cluster.nodes) {
      if (node.name == silent) continue;
      ASSERT_TRUE(cp_->Heartbeat(NodeP(node.name), node.name, json::object()).ok());
    }
  }
  // What `tidal sim replay` does, in process.
  ReplayReport Replay() {
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
    Status s = ReplayStore(**store, *cluster, replay);
    EXPECT_TRUE(s.ok()) << s.ToString();
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

  const ReplayReport report = Replay();
  EXPECT_EQ(report.restarts, 3);  // the first start and two restarts
  EXPECT_GT(report.compared, 0);
  EXPECT_GE(report.journal.loans, 2) << "the shared node was lent before and after restart 2";
  EXPECT_TRUE(report.refused.empty()) << report.refused.front();
  for (const ReplayDifference& d : report.differences) ADD_FAILURE() << d.ToString();
}

// Issue #9: a compacted journal replays exactly from its latest snapshot.
// The same history, with a snapshot every 10 records: the store keeps only
// the latest snapshot and the records after it, and the replay from there
// makes every edit the server made after it.
TEST_F(ServerRestartReplayTest, ACompactedJournalReplaysExactlyFromItsSnapshot) {
  cp_.reset();
  config_.snapshot_every_records = 10;
  Open();
  for (int i = 0; i < 4; ++i) Submit("t" + std::to_string(i), 8);
  cp_->RunPass();
  clock_.Advance(seconds(20));
  Heartbeats("");
  clock_.Advance(seconds(11));
  Heartbeats("trn-rack-a-1");
  cp_->RunPass();
  Restart();
  clock_.Advance(seconds(1));
  cp_->RunPass();
  Submit("t4", 8);
  cp_->RunPass();
  // Passes with work placed, terminating and waiting at the latest snapshot.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(seconds(2));
    Heartbeats("");
    if (i % 3 == 0) Submit("late" + std::to_string(i), 4);
    cp_->RunPass();
  }
  // A tail after the snapshot with decisions in it: the server restarts
  // without snapshotting, cancels a running job and places two.
  cp_.reset();
  config_.snapshot_every_records = 100'000'000;
  Open();
  clock_.Advance(seconds(1));
  Heartbeats("");
  ASSERT_TRUE(cp_->Cancel(kAdmin, 1).ok());
  cp_->RunPass();
  Submit("tail0", 2);
  Submit("tail1", 2);
  clock_.Advance(seconds(40));
  Heartbeats("");
  cp_->RunPass();
  const ReplayReport report = Replay();
  EXPECT_GT(report.snapshot_seq, 0) << "the store was never compacted";
  // `tidal sim replay` says where it started, and finds the same.
  const char* bin = std::getenv("TIDAL_BINARY_DIR");
  const std::string tidal = std::string(bin != nullptr ? bin : ".") + "/tidal";
  if (std::filesystem::exists(tidal)) {
    FILE* pipe = ::popen((tidal + " sim replay --store sqlite:" + dir_ + "/tidal.db 2>&1").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    EXPECT_EQ(::pclose(pipe), 0) << out;
    EXPECT_NE(out.find("started from the snapshot at seq " + std::to_string(report.snapshot_seq) + "\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("identical"), std::string::npos) << out;
  }
  EXPECT_GT(report.compared, 0);
  EXPECT_TRUE(report.refused.empty()) << report.refused.front();
  for (const ReplayDifference& d : report.differences) ADD_FAILURE() << d.ToString();

  // A crash before the snapshot's compaction finished leaves rows it
  // covers: the replay skips them (here a copy of the last pass's rows at
  // seqs below the snapshot's, which nothing else reads).
  testing::ExecOnStoreFile(dir_ + "/tidal.db",
                           "INSERT INTO journal(seq, entry) SELECT seq - " + std::to_string(report.snapshot_seq) +
                               " + 1, entry FROM journal WHERE seq > " + std::to_string(report.snapshot_seq) +
                               " AND seq <= " + std::to_string(report.snapshot_seq) + " + 20 AND seq - " +
                               std::to_string(report.snapshot_seq) + " + 1 NOT IN (SELECT seq FROM journal)");
  const ReplayReport again = Replay();
  EXPECT_EQ(again.snapshot_seq, report.snapshot_seq);
  EXPECT_EQ(again.compared, report.compared);
  EXPECT_TRUE(again.refused.empty()) << again.refused.front();
  for (const ReplayDifference& d : again.differences) ADD_FAILURE() << d.ToString();
}

// A service whose load rises to 200 req/s (20 replicas of 10: the reserved
// and the shared nodes) and falls back, reported a minute at a time from
// its first replica, with snapshots every 40 records, while training waits
// to borrow the shared nodes. It ends during the fall: the autoscaler holds
// replicas for its scale-down delay (10 min), the forecaster remembers the
// last hour, and nodes inference just needed are not lent anew.
class ServiceLoadReplayTest : public ServerRestartReplayTest {
 protected:
  void RunRiseAndFall(int64_t snapshot_every_records) {
    cp_.reset();
    config_.snapshot_every_records = snapshot_every_records;
    Open();
    auto svc = cp_->Submit(kAdmin, server::SubmitRequest{{json{{"name", "chat"}, {"project", "chat-serving"}, {"kind", "inference"}, {"replicas", 1},
                            {"min_replicas", 1}, {"max_replicas", 24}, {"replica_capacity_rps", 10},
                            {"target_p99_ms", 200}, {"cold_start_s", 60}}}});
    ASSERT_TRUE(svc.ok()) << svc.status().ToString();
    chat_ = svc->ids[0];
    for (int i = 0; i < 4; ++i) Submit("t" + std::to_string(i), 8);
    for (int i = 0; i < 10; ++i) Minute(20);
    for (int i = 0; i < 10; ++i) Minute(20 + 18 * i);
    for (int i = 0; i < 5; ++i) Minute(200);
    for (int i = 0; i < 4; ++i) Submit("b" + std::to_string(i), 8);  // they wait for the shared nodes
    for (int i = 0; i < 10; ++i) Minute(200 - 18 * i);
  }
  void Minute(double rps) {
    clock_.Advance(seconds(60));
    Heartbeats("");
    const json w = cp_->Get(kAdmin, chat_).value();
    if (w.contains("allocation") && w["allocation"].is_object()) {
      const std::string node = w["allocation"]["pods"][0]["node"];
      protocol::PodEvent ev;
      ev.key.workload = chat_;
      ev.key.rank = 0;
      ev.load = protocol::LoadReport{rps, 20, 50};
      protocol::PodEventBatch batch;
      batch.events.push_back(ev);
      auto r = cp_->PodStatus(NodeP(node), node, protocol::PodEventBatchToJson(batch));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    cp_->RunPass();
  }
  void ExpectIdentical(const ReplayReport& report) {
    EXPECT_GT(report.snapshot_seq, 0) << "the store was never compacted";
    EXPECT_GT(report.compared, 0);
    EXPECT_GE(report.journal.loans, 1) << "training never borrowed the shared nodes";
    EXPECT_TRUE(report.refused.empty()) << report.refused.front();
    for (const ReplayDifference& d : report.differences) ADD_FAILURE() << d.ToString();
  }

  uint64_t chat_ = 0;
};

// Issue #9: the co-location controller's memory is in the snapshot. The
// whole journal, uncompacted, is replayed from a snapshot taken at every
// boundary between passes in turn (what the server would have written
// there): each replay makes every edit the server made after it. Without
// the memory, a replay started during the fall scaled the service down and
// lent its nodes at once, where the server held them.
TEST_F(ServiceLoadReplayTest, AReplayStartedAtAnyPassBoundaryIsExact) {
  RunRiseAndFall(100'000'000);
  for (int i = 0; i < 12; ++i) Minute(20);  // the delays run out
  cp_.reset();
  auto store = server::OpenStore(config_.store);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->ReadJournal(0, 1'000'000);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  auto cluster = ParseClusterText(*(*store)->ReadMeta(server::kMetaCluster).value(), "meta cluster");
  auto policy = ParsePolicyText(*(*store)->ReadMeta(server::kMetaPolicy).value(), "meta policy");
  ASSERT_TRUE(cluster.ok() && policy.ok());
  int boundaries = 0;
  for (size_t cut = 1; cut < rows->size(); ++cut) {
    auto next = protocol::JournalRecordFromText((*rows)[cut].entry);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    const auto* marker = std::get_if<protocol::PassMarker>(&*next);
    if (marker == nullptr || marker->phase != protocol::PassPhase::kTick) continue;
    ++boundaries;
    JournalReplay before(*cluster, *policy);
    for (size_t i = 0; i < cut; ++i) ASSERT_TRUE(before.FeedText((*rows)[i].seq, (*rows)[i].entry).ok());
    const int64_t seq = (*rows)[cut - 1].seq;
    auto snapshot = protocol::JournalSnapshotFromText(protocol::JournalSnapshotToText(before.SnapshotAt(seq)));
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    JournalReplay after(*cluster, *policy);
    ASSERT_TRUE(after.StartFromSnapshot(*cluster, *snapshot).ok());
    for (size_t i = cut; i < rows->size(); ++i) ASSERT_TRUE(after.FeedText((*rows)[i].seq, (*rows)[i].entry).ok());
    const ReplayReport report = after.Finish();
    EXPECT_TRUE(report.refused.empty()) << "from seq " << seq << ": " << report.refused.front();
    for (const ReplayDifference& d : report.differences) ADD_FAILURE() << "from seq " << seq << ": " << d.ToString();
    if (!report.differences.empty()) break;  // one start's differences say enough
  }
  EXPECT_GE(boundaries, 45);
}

// The compaction keeps the load samples of the warm-start window, and the
// replay keeps them too: a server that restarts after the latest snapshot
// warms its forecaster with samples from before it, and so does the replay.
TEST_F(ServiceLoadReplayTest, ARestartAfterTheSnapshotWarmsFromTheKeptSamples) {
  RunRiseAndFall(40);
  cp_.reset();
  config_.snapshot_every_records = 100'000'000;
  Open();
  for (int i = 0; i < 15; ++i) Minute(20);
  ExpectIdentical(Replay());
}

}  // namespace
}  // namespace tidal::sim
