// Journal snapshots and compaction (docs/formats.md "Snapshots"): a server
// that writes a snapshot every few records keeps only the journal after the
// latest one, restarts on its store with the same state, loses nothing
// acknowledged when a snapshot's write fails, and refuses a damaged
// snapshot with a message that says so. In-process on a manual clock, on a
// real SQLite store (through tests/support/faulty_store.h for the fault).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "protocol/journal_snapshot.h"
#include "protocol/node_registration.h"
#include "server/control_plane.h"
#include "server/server_config.h"
#include "server/store.h"
#include "tests/support/faulty_store.h"
#include "tests/support/store_fixture.h"

namespace tidal::server {
namespace {

using nlohmann::json;
using testing::ExecOnStoreFile;
using testing::FaultyStore;

const Principal kAdmin{"admin", Role::kAdmin, ""};
const Principal kAlice{"alice", Role::kUser, "research"};
const Principal kAgent{"node-agent", Role::kAgent, ""};

class StoreSnapshotTest : public testing::StoreFixture {
 protected:
  StoreSnapshotTest() : StoreFixture("snapshot_every_records: 25\n") {}
  void SetUp() override {
    StoreFixture::SetUp();
    ASSERT_EQ(config_.snapshot_every_records, 25);
  }
  void RegisterAll() {
    for (const Node& node : config_.catalog.cluster.nodes) {
      protocol::NodeRegistration reg;
      reg.name = node.name;
      auto r = cp_->RegisterNode(kAgent, protocol::NodeRegistrationToJson(reg));
      ASSERT_TRUE(r.ok()) << node.name << ": " << r.status().ToString();
    }
  }
  StatusOr<SubmitResult> Submit(const std::string& name, int gpus) {
    return cp_->Submit(kAlice, SubmitRequest{{json{{"name", name}, {"project", "vision"}, {"gpus_per_replica", gpus}}}});
  }
  // Submits, cancels and passes: a history of a few hundred records.
  void Work(int rounds, std::vector<uint64_t>* ids) {
    for (int i = 0; i < rounds; ++i) {
      auto r = Submit("w" + std::to_string(ids->size()), 1 + i % 4);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ids->push_back(r->ids[0]);
      if (i % 5 == 4) {
        ASSERT_TRUE(cp_->Cancel(kAdmin, ids->at(ids->size() - 3)).ok());
      }
      clock_.Advance(seconds(7));
      for (const Node& node : config_.catalog.cluster.nodes) {  // the leases stay fresh
        ASSERT_TRUE(cp_->Heartbeat({"agent:" + node.name, Role::kNode, "", node.name}, node.name, json::object()).ok());
      }
      cp_->RunPass();
      // Snapshots are encoded on a thread of their own: the next round's
      // count starts from a written one.
      ASSERT_TRUE(cp_->FlushJournalSnapshot().ok());
    }
  }
  // What the API shows of every workload: its state and where it runs.
  std::map<uint64_t, std::string> Shown(const std::vector<uint64_t>& ids) {
    std::map<uint64_t, std::string> out;
    for (uint64_t id : ids) {
      auto r = cp_->Get(kAdmin, id);
      EXPECT_TRUE(r.ok()) << id << ": " << r.status().ToString();
      if (r.ok()) out[id] = (*r)["state"].dump() + " " + r->value("allocation", json()).dump();
    }
    return out;
  }
  // The store as a reader sees it: its latest snapshot and its journal rows.
  struct Stored {
    std::optional<SnapshotRow> snapshot;
    std::vector<JournalRow> journal;
  };
  Stored ReadStore() {
    cp_.reset();  // flushes the store and releases its lock
    auto store = OpenStore(config_.store);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    Stored out;
    if (!store.ok()) return out;
    auto snap = (*store)->ReadSnapshot();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    if (snap.ok()) out.snapshot = *snap;
    int64_t after = 0;
    while (true) {
      auto rows = (*store)->ReadJournal(after, 1000);
      EXPECT_TRUE(rows.ok()) << rows.status().ToString();
      if (!rows.ok() || rows->empty()) break;
      for (JournalRow& row : *rows) out.journal.push_back(std::move(row));
      after = out.journal.back().seq;
    }
    return out;
  }
};

TEST_F(StoreSnapshotTest, SnapshotsCompactTheJournalAndARestartKeepsTheState) {
  ASSERT_TRUE(Open().ok());
  RegisterAll();
  std::vector<uint64_t> ids;
  Work(40, &ids);
  const std::map<uint64_t, std::string> before = Shown(ids);
  const std::string metrics = cp_->MetricsText();
  const std::string counter = "\ntidal_journal_snapshots_total ";
  const size_t at = metrics.find(counter);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stod(metrics.substr(at + counter.size())), 5) << metrics;
  // Each one's copy (under the lock) and encode (off it) are timed.
  for (const char* timed : {"tidal_journal_snapshot_copy_seconds", "tidal_journal_snapshot_encode_seconds"}) {
    const std::string count = "\n" + std::string(timed) + "_count ";
    const size_t count_at = metrics.find(count);
    ASSERT_NE(count_at, std::string::npos) << metrics;
    EXPECT_EQ(std::stod(metrics.substr(count_at + count.size())), std::stod(metrics.substr(at + counter.size())))
        << timed << "\n" << metrics;
  }

  // Only the latest snapshot is kept, and exactly the journal after it
  // (none when the last pass ended on a snapshot).
  Stored stored = ReadStore();
  ASSERT_TRUE(stored.snapshot.has_value());
  if (!stored.journal.empty()) {
    EXPECT_EQ(stored.journal.front().seq, stored.snapshot->seq + 1);
  }
  for (size_t i = 1; i < stored.journal.size(); ++i) ASSERT_EQ(stored.journal[i].seq, stored.journal[i - 1].seq + 1);
  // The interval: 25 records, or the state's workloads and nodes if more
  // (here up to 40 + 8).
  const size_t interval = std::max<size_t>(25, ids.size() + config_.catalog.cluster.nodes.size());
  EXPECT_LT(stored.journal.size(), interval + 40u) << "at most a snapshot interval plus one pass's records";
  auto decoded = protocol::JournalSnapshotFromText(stored.snapshot->snapshot);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->seq, stored.snapshot->seq);
  auto restored = protocol::RestoreState(*decoded, config_.catalog.cluster, config_.catalog.queues,
                                         config_.catalog.projects);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_FALSE(restored->snapshot().allocations.empty());

  // The same state after a restart on the compacted store, and it goes on
  // snapshotting past the last seq.
  ASSERT_TRUE(Open().ok());
  EXPECT_EQ(Shown(ids), before);
  Work(10, &ids);
  const int64_t first_snapshot = stored.snapshot->seq;
  stored = ReadStore();
  ASSERT_TRUE(stored.snapshot.has_value());
  EXPECT_GT(stored.snapshot->seq, first_snapshot);
  EXPECT_EQ(stored.journal.empty() ? stored.snapshot->seq + 1 : stored.journal.front().seq, stored.snapshot->seq + 1);
}

TEST_F(StoreSnapshotTest, AFailedSnapshotWriteLeavesTheJournalAndLosesNothingAcknowledged) {
  ASSERT_TRUE(Open(/*faulty=*/true).ok());
  RegisterAll();
  std::vector<uint64_t> ids;
  Work(10, &ids);
  Stored good = ReadStore();  // the last snapshot that made it
  ASSERT_TRUE(good.snapshot.has_value());

  // The fault is in place before the restart: the restart's own records
  // (server_start, the nodes' fresh leases) may be the write that carries
  // the next snapshot.
  const Status reopened = Open(/*faulty=*/true, "injected: disk full while writing a snapshot");
  std::vector<uint64_t> acknowledged = ids;
  bool refused = !reopened.ok();
  if (refused) {
    EXPECT_NE(reopened.message().find("injected: disk full"), std::string::npos) << reopened.ToString();
  }
  for (int i = 0; i < 40 && !refused; ++i) {
    auto r = Submit("late" + std::to_string(i), 1);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
      EXPECT_NE(r.status().message().find("injected: disk full"), std::string::npos) << r.status().message();
      refused = true;
      break;
    }
    acknowledged.push_back(r->ids[0]);
    // A pass's write may be the one that brings the count to a snapshot,
    // which its own write carries once encoded: the next submit is then
    // refused.
    clock_.Advance(seconds(3));
    cp_->RunPass();
    (void)cp_->FlushJournalSnapshot();
  }
  ASSERT_TRUE(refused) << "no write carried a snapshot";

  // The old snapshot and the whole journal after it are there, gapless.
  Stored after = ReadStore();
  ASSERT_TRUE(after.snapshot.has_value());
  EXPECT_EQ(after.snapshot->seq, good.snapshot->seq);
  EXPECT_EQ(after.snapshot->snapshot, good.snapshot->snapshot);
  ASSERT_FALSE(after.journal.empty());
  EXPECT_EQ(after.journal.front().seq, good.snapshot->seq + 1);
  for (size_t i = 1; i < after.journal.size(); ++i) ASSERT_EQ(after.journal[i].seq, after.journal[i - 1].seq + 1);

  // Every acknowledged submit survives a restart.
  ASSERT_TRUE(Open().ok());
  for (uint64_t id : acknowledged) {
    EXPECT_TRUE(cp_->Get(kAdmin, id).ok()) << "acknowledged workload " << id << " lost";
  }
}

TEST_F(StoreSnapshotTest, ADamagedSnapshotIsRefusedWithAClearMessage) {
  ASSERT_TRUE(Open().ok());
  RegisterAll();
  std::vector<uint64_t> ids;
  Work(10, &ids);
  Stored stored = ReadStore();
  ASSERT_TRUE(stored.snapshot.has_value());

  // Torn: its last part holds the first half of its text.
  ExecOnStoreFile(db_path(),
                  "UPDATE snapshot_parts SET text = substr(text, 1, length(text) / 2) "
                  "WHERE part = (SELECT MAX(part) FROM snapshot_parts)");
  Status torn = Open();
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.message().find("journal snapshot (row " + std::to_string(stored.snapshot->seq) + ") is damaged"),
            std::string::npos)
      << torn.message();
  EXPECT_NE(torn.message().find("not valid JSON"), std::string::npos) << torn.message();

  // Garbled: valid JSON, but not a snapshot (in the row, as a store
  // written before parts keeps it).
  ExecOnStoreFile(db_path(), "UPDATE snapshots SET snapshot = '{\"record\":\"snapshot\",\"seq\":\"x\"}'");
  Status garbled = Open();
  ASSERT_FALSE(garbled.ok());
  EXPECT_NE(garbled.message().find("is damaged: journal snapshot: "), std::string::npos) << garbled.message();
}

TEST_F(StoreSnapshotTest, TheIntervalIsBounded) {
  for (const char* value : {"9", "100000001", "\"often\""}) {
    auto config = ParseServerConfig(std::string("snapshot_every_records: ") + value + "\n", "server.yaml", dir_);
    ASSERT_FALSE(config.ok()) << value;
    EXPECT_NE(config.status().message().find("snapshot_every_records"), std::string::npos)
        << config.status().message();
  }
  auto fallback = ParseServerConfig("", "", "");
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ(fallback->snapshot_every_records, 10000);
}

}  // namespace
}  // namespace tidal::server
