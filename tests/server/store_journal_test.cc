// The store keeps the edit journal and the meta table: journal rows survive
// a reopen in the order they were enqueued, meta keys are upserts, and a
// batch that fails writes none of its journal rows (the journal stays a
// prefix of the history, like every other table). On a real SQLite file; the
// fault is a trigger installed through a second connection.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "server/store.h"
#include "tests/support/faulty_store.h"

namespace tidal::server {
namespace {

class StoreJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tidal-store-journal-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path() const { return dir_ + "/tidal.db"; }

  std::unique_ptr<Store> Open(SqliteSteps steps = {}) {
    auto store = OpenSqliteStore(path(), SqliteDurability::kFsync, steps);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // The one integer `sql` selects, read through a connection of its own.
  int64_t QueryInt(const std::string& sql) const {
    sqlite3* db = nullptr;
    int64_t out = -1;
    if (sqlite3_open_v2(path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
        out = sqlite3_column_int64(s, 0);
      }
      sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return out;
  }

  // The store's latest snapshot is `text` at row `seq`.
  static void ExpectSnapshot(Store& store, int64_t seq, const std::string& text) {
    auto snapshot = store.ReadSnapshot();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    ASSERT_TRUE(snapshot->has_value());
    EXPECT_EQ((*snapshot)->seq, seq);
    EXPECT_EQ((*snapshot)->snapshot, text);
  }

  static std::vector<std::string> Entries(Store& store) {
    std::vector<std::string> out;
    int64_t after = 0;
    while (true) {
      auto rows = store.ReadJournal(after, 2);  // small pages: paging is exercised
      EXPECT_TRUE(rows.ok()) << rows.status().ToString();
      if (!rows.ok() || rows->empty()) break;
      for (const JournalRow& r : *rows) {
        EXPECT_GT(r.seq, after);
        after = r.seq;
        out.push_back(r.entry);
      }
    }
    return out;
  }

  std::string dir_;
};

TEST_F(StoreJournalTest, JournalSurvivesReopenInOrder) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Mutation a;
    a.journal = {"r1", "r2", "r3"};
    a.meta = {{kMetaCluster, "{\"nodes\":[]}"}, {kMetaPolicy, "{\"v\":1}"}};
    Mutation b;
    b.journal = {"r4"};
    b.meta = {{kMetaPolicy, "{\"v\":2}"}};  // an upsert: the later value wins
    Mutation c;
    c.workloads = {{7, "{}"}};
    c.journal = {"r5", "r6"};
    EXPECT_FALSE(a.empty());
    Mutation only_meta;
    only_meta.meta = {{"x", "y"}};
    EXPECT_FALSE(only_meta.empty());  // a meta-only mutation is not dropped
    store->Enqueue(std::move(a));
    store->Enqueue(std::move(b));
    const uint64_t last = store->Enqueue(std::move(c));
    ASSERT_TRUE(store->WaitDurable(last).ok());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Entries(*store), (std::vector<std::string>{"r1", "r2", "r3", "r4", "r5", "r6"}));
  auto tail = store->ReadJournal(4, 100);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].seq, 5);
  EXPECT_EQ((*tail)[0].entry, "r5");
  auto policy = store->ReadMeta(kMetaPolicy);
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->value_or("<none>"), "{\"v\":2}");
  auto cluster = store->ReadMeta(kMetaCluster);
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->value_or("<none>"), "{\"nodes\":[]}");
  auto absent = store->ReadMeta("nope");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  EXPECT_FALSE(store->ReadJournal(0, 0).ok());
}

TEST_F(StoreJournalTest, AFailedBatchWritesNoJournalRows) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Mutation first;
    first.workloads = {{1, "{\"w\":1}"}};
    first.journal = {"ok-1", "ok-2"};
    ASSERT_TRUE(store->WaitDurable(store->Enqueue(std::move(first))).ok());

    // The second batch's second journal row fails, after its workload row
    // and first journal row were written inside the transaction.
    testing::ExecOnStoreFile(path(),
               "CREATE TRIGGER inject BEFORE INSERT ON journal WHEN NEW.entry = 'poison' "
               "BEGIN SELECT RAISE(ABORT, 'injected journal fault'); END;");
    Mutation bad;
    bad.workloads = {{2, "{\"w\":2}"}};
    bad.journal = {"half", "poison"};
    bad.meta = {{kMetaPolicy, "bad"}};
    const Status failed = store->WaitDurable(store->Enqueue(std::move(bad)));
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.message().find("journal"), std::string::npos) << failed.message();

    // Sticky: nothing after the failure is written either.
    Mutation after;
    after.journal = {"after"};
    EXPECT_FALSE(store->WaitDurable(store->Enqueue(std::move(after))).ok());
  }
  testing::ExecOnStoreFile(path(), "DROP TRIGGER inject;");
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Entries(*store), (std::vector<std::string>{"ok-1", "ok-2"}));
  auto recovered = store->Load();
  ASSERT_TRUE(recovered.ok());
  ASSERT_EQ(recovered->workloads.size(), 1u);
  EXPECT_EQ(recovered->workloads[0].first, 1u);
  auto policy = store->ReadMeta(kMetaPolicy);
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE(policy->has_value());
}

// The control plane encodes a snapshot off the state lock and enqueues it
// after the records it covers, so later records may come first or share its
// transaction: they stay. A snapshot past the last record, or not after the
// latest snapshot, fails the write (the caller miscounted).
TEST_F(StoreJournalTest, ASnapshotCoversTheRowsBeforeItAndNoMore) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Mutation a;
    a.journal = {"{\"record\":\"r1\"}", "{\"record\":\"r2\"}", "{\"record\":\"r3\"}"};
    store->Enqueue(std::move(a));
    Mutation b;  // enqueued after the copy at row 3 was taken
    b.journal = {"{\"record\":\"r4\"}", "{\"record\":\"r5\"}"};
    store->Enqueue(std::move(b));
    Mutation snapshot;
    snapshot.snapshot = "state after r3";
    snapshot.snapshot_seq = 3;
    ASSERT_TRUE(store->WaitDurable(store->Enqueue(std::move(snapshot))).ok());

    Mutation stale;  // not after the latest snapshot
    stale.snapshot = "state after r2";
    stale.snapshot_seq = 2;
    const Status refused = store->WaitDurable(store->Enqueue(std::move(stale)));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("it covers journal row 2, but the journal's last row is 5 and the latest "
                                     "snapshot covers row 3"),
              std::string::npos)
        << refused.message();
  }
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ExpectSnapshot(*store, 3, "state after r3");
    EXPECT_EQ(Entries(*store), (std::vector<std::string>{"{\"record\":\"r4\"}", "{\"record\":\"r5\"}"}));
    auto recovered = store->Load();
    ASSERT_TRUE(recovered.ok());
    EXPECT_EQ(recovered->last_journal_seq, 5);
    EXPECT_EQ(recovered->journal_since_snapshot, 2);

    Mutation ahead;  // claims a record never written
    ahead.snapshot = "state after r6";
    ahead.snapshot_seq = 6;
    const Status refused = store->WaitDurable(store->Enqueue(std::move(ahead)));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("it covers journal row 6, but the journal's last row is 5"), std::string::npos)
        << refused.message();
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto snapshot = store->ReadSnapshot();
  ASSERT_TRUE(snapshot.ok() && snapshot->has_value());
  EXPECT_EQ((*snapshot)->seq, 3) << "a refused snapshot is not written";
}

// A snapshot is written a part per transaction, and becomes the latest only
// with its last part; then the rows it covers go, compaction_rows at a
// time, but for the load samples of the window. Here 100 bytes in parts of
// 16: 7 parts. (Its steps finish before the store closes.)
TEST_F(StoreJournalTest, ASnapshotIsWrittenInPartsAndCompactsInSteps) {
  const std::string text(100, 's');
  {
    auto store = Open(SqliteSteps{.snapshot_part_bytes = 16, .compaction_rows = 2});
    ASSERT_NE(store, nullptr);
    Mutation a;
    a.journal = {"{\"record\":\"r1\"}", "{\"record\":\"load\",\"at_ms\":500}",
                 "{\"record\":\"load\",\"at_ms\":2000}", "{\"record\":\"r4\"}", "{\"record\":\"r5\"}",
                 "{\"record\":\"r6\"}", "{\"record\":\"r7\"}"};
    store->Enqueue(std::move(a));
    Mutation snapshot;
    snapshot.snapshot = text;
    snapshot.snapshot_seq = 6;
    snapshot.keep_load_since_ms = 1000;
    ASSERT_TRUE(store->WaitDurable(store->Enqueue(std::move(snapshot))).ok());
  }
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM snapshot_parts WHERE seq = 6"), 7);
  EXPECT_EQ(QueryInt("SELECT MAX(length(text)) FROM snapshot_parts"), 16);
  EXPECT_EQ(QueryInt("SELECT length(snapshot) FROM snapshots WHERE seq = 6"), 0) << "the row holds no text";
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ExpectSnapshot(*store, 6, text);
  // The load sample in the window stays; the one before it goes.
  EXPECT_EQ(Entries(*store), (std::vector<std::string>{"{\"record\":\"load\",\"at_ms\":2000}",
                                                       "{\"record\":\"r7\"}"}));
}

// A crash leaves the latest whole snapshot readable: parts of one it was
// writing are not read and are deleted at the next start, and rows the
// latest covers that its compaction had not reached go then (load samples
// stay: the window they were kept for is not stored). A store written
// before parts, with the whole text in the row, is still read, and a newer
// snapshot replaces it. Made by hand, as the file would be.
TEST_F(StoreJournalTest, ACrashMidSnapshotLeavesTheLatestWholeOneAndTheNextStartCleansUp) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Mutation a;
    a.journal = {"{\"record\":\"r1\"}", "{\"record\":\"r2\"}", "{\"record\":\"r3\"}",
                 "{\"record\":\"r4\"}"};
    ASSERT_TRUE(store->WaitDurable(store->Enqueue(std::move(a))).ok());
  }
  // The latest whole snapshot, at row 2, as a store before parts wrote it;
  // its compaction had not deleted row 1 (a load sample) nor row 2; a
  // snapshot at row 3 had two of its parts written.
  testing::ExecOnStoreFile(path(),
                           "UPDATE journal SET entry = '{\"record\":\"load\",\"at_ms\":1}' WHERE seq = 1;"
                           "INSERT INTO snapshots(seq, snapshot) VALUES (2, 'state after r2');"
                           "INSERT INTO snapshot_parts(seq, part, text) VALUES (3, 0, 'state '), (3, 1, 'after');");
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ExpectSnapshot(*store, 2, "state after r2");
    auto recovered = store->Load();
    ASSERT_TRUE(recovered.ok());
    EXPECT_EQ(recovered->journal_since_snapshot, 2);
    // A snapshot at row 3 is after the latest whole one: accepted.
    Mutation snapshot3;
    snapshot3.snapshot = "state after r3";
    snapshot3.snapshot_seq = 3;
    snapshot3.keep_load_since_ms = 10;
    ASSERT_TRUE(store->WaitDurable(store->Enqueue(std::move(snapshot3))).ok());
  }
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM snapshot_parts"), 1) << "the torn parts were replaced by the new one";
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM snapshots"), 1);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ExpectSnapshot(*store, 3, "state after r3");
  EXPECT_EQ(Entries(*store), (std::vector<std::string>{"{\"record\":\"r4\"}"}))
      << "row 1 is a load sample before the new snapshot's window";
}

// A snapshot row whose parts have a gap is a torn store, said so.
TEST_F(StoreJournalTest, ASnapshotWithAPartMissingIsRefused) {
  {
    auto store = Open(SqliteSteps{.snapshot_part_bytes = 4, .compaction_rows = 500});
    ASSERT_NE(store, nullptr);
    Mutation a;
    a.journal = {"{\"record\":\"r1\"}"};
    store->Enqueue(std::move(a));
    Mutation snapshot;
    snapshot.snapshot = "state after r1";
    snapshot.snapshot_seq = 1;
    ASSERT_TRUE(store->WaitDurable(store->Enqueue(std::move(snapshot))).ok());
  }
  testing::ExecOnStoreFile(path(), "DELETE FROM snapshot_parts WHERE part = 1");
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto snapshot = store->ReadSnapshot();
  ASSERT_FALSE(snapshot.ok());
  EXPECT_NE(snapshot.status().message().find("snapshots row 1: part 1 is missing"), std::string::npos)
      << snapshot.status().ToString();
}

// WhenDurable answers what WaitDurable would, without a thread waiting: Ok
// once the mutation committed (at once when it already has), and the sticky
// failure when it failed (also for callbacks parked before the failure).
TEST_F(StoreJournalTest, WhenDurableAnswersAfterTheCommitOrWithTheFailure) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto answer = [&](uint64_t seq) {
    auto promise = std::make_shared<std::promise<Status>>();
    auto future = promise->get_future();
    store->WhenDurable(seq, [promise](Status s) { promise->set_value(std::move(s)); });
    return future.get();
  };
  Mutation first;
  first.journal = {"ok-1"};
  const uint64_t seq = store->Enqueue(std::move(first));
  EXPECT_TRUE(answer(seq).ok());
  ASSERT_TRUE(store->WaitDurable(seq).ok());
  EXPECT_TRUE(answer(seq).ok());  // durable already: answered on this thread

  testing::ExecOnStoreFile(path(),
                           "CREATE TRIGGER inject BEFORE INSERT ON journal WHEN NEW.entry = 'poison' "
                           "BEGIN SELECT RAISE(ABORT, 'injected journal fault'); END;");
  Mutation bad;
  bad.journal = {"poison"};
  const Status failed = answer(store->Enqueue(std::move(bad)));
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("injected journal fault"), std::string::npos) << failed.message();
  Mutation after;
  after.journal = {"after"};
  EXPECT_EQ(answer(store->Enqueue(std::move(after))).message(), failed.message());  // sticky
}

}  // namespace
}  // namespace tidal::server
