// Store faults: a failed write makes the control plane read-only (503 with the
// cause) instead of aborting or losing a change silently; what was
// acknowledged before the fault survives a restart; a damaged file is a clear
// error at load; a slow disk delays replies but loses nothing. In-process on
// a manual clock, with tests/support/faulty_store.h or a real SQLite fault.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "server/control_plane.h"
#include "server/http_api.h"
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
// What a node's credential authenticates as.
Principal NodeP(const std::string& node) { return {"agent:" + node, Role::kNode, "", node}; }

class StoreFaultTest : public testing::StoreFixture {
 protected:
  json SubmitBody(const std::string& name) {
    return {{"name", name}, {"project", "vision"}, {"gpus_per_replica", 1}, {"node_selector", {{"host", "x"}}}};
  }
  uint64_t Submit(const std::string& name) {
    auto r = cp_->Submit(kAlice, SubmitRequest{{SubmitBody(name)}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->ids[0] : 0;
  }
  void Register(const std::string& name, int gpus) {
    json list = json::array();
    for (int g = 0; g < gpus; ++g) list.push_back({{"index", g}});
    auto r = cp_->RegisterNode(kAdmin, {{"name", name}, {"pool", "training"}, {"gpus", list},
                                        {"labels", {{"host", name}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  json Get(uint64_t id) {
    auto r = cp_->Get(kAdmin, id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }
};

// 503 and the cause, for the change whose write failed and for every later one.
void ExpectReadOnly(const Status& s, const std::string& cause) {
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(HttpStatusFor(s.code()), 503);
  EXPECT_NE(s.message().find(cause), std::string::npos) << s.message();
}

TEST_F(StoreFaultTest, AFailedWriteMakesTheServerReadOnly) {
  ASSERT_TRUE(Open(/*faulty=*/true).ok());
  Register("x", 2);
  const uint64_t first = Submit("first");
  ASSERT_NE(first, 0u);
  EXPECT_NE(cp_->MetricsText().find("tidal_store_healthy 1"), std::string::npos);

  faulty_->FailWrite(1, "injected: disk full");
  auto failed = cp_->Submit(kAlice, SubmitRequest{{SubmitBody("second")}});
  ASSERT_FALSE(failed.ok());
  ExpectReadOnly(failed.status(), "injected: disk full");

  // Every later mutation is refused before it changes anything.
  const uint64_t writes = faulty_->writes();
  ExpectReadOnly(cp_->Submit(kAlice, SubmitRequest{{SubmitBody("third")}}).status(), "injected: disk full");
  ExpectReadOnly(cp_->Cancel(kAlice, first).status(), "injected: disk full");
  ExpectReadOnly(cp_->Resize(kAlice, first, {{"replicas", 1}}).status(), "injected: disk full");
  ExpectReadOnly(cp_->Approve(kAdmin, first).status(), "injected: disk full");
  ExpectReadOnly(cp_->RegisterNode(kAdmin, {{"name", "y"}, {"pool", "training"},
                                            {"gpus", json::array({json{{"index", 0}}})}}).status(),
                 "injected: disk full");
  ExpectReadOnly(cp_->PodStatus(NodeP("x"), "x", {{"events", json::array()}}).status(), "injected: disk full");
  ExpectReadOnly(cp_->Heartbeat(NodeP("x"), "x", json::object()).status(), "injected: disk full");
  EXPECT_EQ(faulty_->writes(), writes) << "a refused mutation queued a write";

  // The loop applies nothing: the first workload fits on x but stays pending.
  cp_->RunPass();
  EXPECT_EQ(faulty_->writes(), writes) << "a pass queued a write on a failed store";
  EXPECT_EQ(Get(first)["state"], "pending");  // not cancelled, not placed

  // Reads keep working.
  EXPECT_TRUE(cp_->List(kAdmin, {}).ok());
  EXPECT_TRUE(cp_->Explain(kAdmin, first).ok());
  EXPECT_TRUE(cp_->Nodes(kAdmin).ok());
  EXPECT_TRUE(cp_->Queues(kAdmin).ok());
  EXPECT_NE(cp_->MetricsText().find("tidal_store_healthy 0"), std::string::npos);
}

TEST_F(StoreFaultTest, ASqliteWriteErrorIsStickyAndLosesNothingAcknowledged) {
  ASSERT_TRUE(Open(/*faulty=*/false).ok());
  Register("x", 1);
  const uint64_t placed = Submit("placed");
  cp_->RunPass();
  ASSERT_EQ(Get(placed)["state"], "running");
  const uint64_t waiting = Submit("waiting");  // x is full
  ASSERT_EQ(Get(waiting)["state"], "pending");

  // The file starts refusing workload rows: a real SQLite error in the
  // writer thread (the old store aborted the process here).
  ExecOnStoreFile(db_path(),
             "CREATE TRIGGER inject BEFORE INSERT ON workloads "
             "BEGIN SELECT RAISE(ABORT, 'injected write fault'); END;");
  auto failed = cp_->Submit(kAlice, SubmitRequest{{SubmitBody("lost")}});
  ASSERT_FALSE(failed.ok());
  ExpectReadOnly(failed.status(), "injected write fault");

  // Sticky: the file would take writes again, the store does not.
  ExecOnStoreFile(db_path(), "DROP TRIGGER inject;");
  ExpectReadOnly(cp_->Submit(kAlice, SubmitRequest{{SubmitBody("after")}}).status(), "injected write fault");
  ExpectReadOnly(cp_->Cancel(kAlice, placed).status(), "injected write fault");
  EXPECT_EQ(Get(placed)["state"], "running");
  EXPECT_NE(cp_->MetricsText().find("tidal_store_healthy 0"), std::string::npos);

  // A restart on the same file has every acknowledged change, and only those.
  ASSERT_TRUE(Open(/*faulty=*/false).ok());
  EXPECT_EQ(Get(placed)["state"], "running");
  EXPECT_EQ(Get(waiting)["state"], "pending");
  auto all = cp_->List(kAdmin, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["workloads"].size(), 2u) << all->dump();
  EXPECT_NE(cp_->MetricsText().find("tidal_store_healthy 1"), std::string::npos);
  EXPECT_NE(Submit("again"), 0u);
}

TEST_F(StoreFaultTest, EverythingAcknowledgedBeforeTheFaultSurvivesARestart) {
  ASSERT_TRUE(Open(/*faulty=*/true).ok());
  Register("x", 2);
  std::vector<uint64_t> acked;
  for (int i = 0; i < 5; ++i) acked.push_back(Submit("w" + std::to_string(i)));
  cp_->RunPass();  // two of them run on x
  ASSERT_TRUE(cp_->Cancel(kAlice, acked[4]).ok());
  std::map<uint64_t, std::string> states;
  for (uint64_t id : acked) states[id] = Get(id)["state"];
  EXPECT_EQ(states[acked[0]], "running");
  EXPECT_EQ(states[acked[4]], "cancelled");

  faulty_->FailWrite(1, "injected: I/O error");
  EXPECT_FALSE(cp_->Submit(kAlice, SubmitRequest{{SubmitBody("unacked")}}).ok());
  EXPECT_FALSE(cp_->Cancel(kAlice, acked[0]).ok());

  ASSERT_TRUE(Open(/*faulty=*/false).ok());
  for (uint64_t id : acked) EXPECT_EQ(Get(id)["state"], states[id]) << "workload " << id;
  auto all = cp_->List(kAdmin, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["workloads"].size(), acked.size());
}

TEST_F(StoreFaultTest, ACorruptPageAtLoadIsAClearError) {
  ASSERT_TRUE(Open(/*faulty=*/false).ok());
  Register("x", 1);  // a submit for host=x needs a node that has the label
  for (int i = 0; i < 3; ++i) Submit("w" + std::to_string(i));
  cp_.reset();  // the last connection checkpoints the WAL into the file
  // Damage the workloads table's root page: its page-type byte becomes one
  // SQLite does not know, as a torn write of that page would leave it.
  int64_t root = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = 'workloads'", -1, &s, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    root = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    page_size = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  ASSERT_GT(root, 1);
  {
    std::fstream f(db_path(), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp((root - 1) * page_size);
    const char bad[] = {'\x7f'};
    f.write(bad, 1);
  }
  // The old store read this as an empty table and came up without the
  // three workloads.
  Status s = Open(/*faulty=*/false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("workloads"), std::string::npos) << s.message();
}

TEST_F(StoreFaultTest, ATornRowAtLoadIsAClearError) {
  ASSERT_TRUE(Open(/*faulty=*/false).ok());
  Register("x", 1);  // a submit for host=x needs a node that has the label
  Submit("w0");
  cp_.reset();
  // A record that is not text (a blob, half a JSON object), and a node row
  // that is not a node record.
  ExecOnStoreFile(db_path(), "INSERT INTO workloads(id, record) VALUES (7, X'7b226964223a');");
  Status s = Open(/*faulty=*/false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("workloads row 7"), std::string::npos) << s.message();

  cp_.reset();
  ExecOnStoreFile(db_path(), "DELETE FROM workloads WHERE id = 7;"
                        "INSERT INTO nodes(name, record) VALUES ('torn', '{\"regis');");
  s = Open(/*faulty=*/false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node torn"), std::string::npos) << s.message();
}

TEST_F(StoreFaultTest, ASlowStoreDelaysTheReplyButLosesNothing) {
  ASSERT_TRUE(Open(/*faulty=*/true).ok());
  Register("x", 1);  // a submit for host=x needs a node that has the label
  faulty_->Hold();
  std::atomic<bool> replied{false};
  StatusOr<SubmitResult> result = Internal("not run");
  std::thread client([&] {
    result = cp_->Submit(kAlice, SubmitRequest{{SubmitBody("slow")}});
    replied = true;
  });
  faulty_->AwaitHeldWaiters(1);
  // The change is queued but not durable: no reply yet.
  EXPECT_FALSE(replied.load());
  faulty_->Release();
  client.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const uint64_t id = result->ids[0];
  ASSERT_TRUE(Open(/*faulty=*/false).ok());
  EXPECT_EQ(Get(id)["name"], "slow");
}

}  // namespace
}  // namespace tidal::server
