// A Store for server tests that wraps the real one and injects the faults a
// disk can have: a write that fails (and, like the real store, stays failed),
// and durability that is slow. Header-only so tidal_testing needs no server
// dependency. The control plane owns the store; the test keeps a raw pointer,
// valid while the control plane lives.
#ifndef TIDAL_TESTS_SUPPORT_FAULTY_STORE_H_
#define TIDAL_TESTS_SUPPORT_FAULTY_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "server/store.h"

namespace tidal::testing {

// Runs `sql` on a store's file through a connection of its own (another
// process's view of the file: a fault comes from SQLite, not from a mock).
inline void ExecOnStoreFile(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

class FaultyStore final : public server::Store {
 public:
  explicit FaultyStore(std::unique_ptr<server::Store> inner) : inner_(std::move(inner)) {}

  // The `nth` write from now (1 = the next one) fails with Unavailable(cause),
  // and so does every write after it: the wrapped store never sees them, so
  // the file keeps exactly the writes before the fault.
  void FailWrite(int nth, std::string cause) {
    std::lock_guard lock(mu_);
    fail_at_ = seq_ + static_cast<uint64_t>(nth);
    cause_ = std::move(cause);
  }
  // The next write that carries a journal snapshot fails, like FailWrite
  // (it and every write after it): a disk that fills up as the snapshot is
  // written.
  void FailSnapshotWrite(std::string cause) {
    std::lock_guard lock(mu_);
    fail_snapshot_ = true;
    cause_ = std::move(cause);
  }
  // WaitDurable blocks until Release(): a slow disk.
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  // Blocks until `n` callers are held in WaitDurable (so a test knows a reply
  // is being delayed without sleeping).
  void AwaitHeldWaiters(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return held_waiters_ >= n; });
  }
  uint64_t writes() const {
    std::lock_guard lock(mu_);
    return seq_;
  }

  StatusOr<server::Recovered> Load() override { return inner_->Load(); }

  uint64_t Enqueue(server::Mutation m) override {
    std::lock_guard lock(mu_);
    const uint64_t seq = ++seq_;
    if (fail_snapshot_ && !m.snapshot.empty() && fail_at_ == 0) fail_at_ = seq;
    if (fail_at_ != 0 && seq >= fail_at_) {
      if (error_.ok()) error_ = Unavailable(cause_);
      return seq;
    }
    // Nothing was skipped before the fault, so the wrapped store's sequence
    // numbers are these.
    inner_->Enqueue(std::move(m));
    return seq;
  }

  Status WaitDurable(uint64_t seq) override {
    {
      std::unique_lock lock(mu_);
      if (held_) {
        ++held_waiters_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !held_; });
        --held_waiters_;
      }
      if (!error_.ok() && seq >= fail_at_) return error_;
    }
    return inner_->WaitDurable(seq);
  }

  Status health() const override {
    {
      std::lock_guard lock(mu_);
      if (!error_.ok()) return error_;
    }
    return inner_->health();
  }

  StatusOr<std::vector<server::AuditRow>> QueryAudit(const server::AuditQuery& query) override {
    return inner_->QueryAudit(query);
  }
  StatusOr<std::vector<server::JournalRow>> ReadJournal(int64_t after_seq, int limit) override {
    return inner_->ReadJournal(after_seq, limit);
  }
  StatusOr<std::optional<std::string>> ReadMeta(const std::string& key) override {
    return inner_->ReadMeta(key);
  }
  StatusOr<std::optional<server::SnapshotRow>> ReadSnapshot() override { return inner_->ReadSnapshot(); }
  uint64_t commits() const override { return inner_->commits(); }
  uint64_t committed_mutations() const override { return inner_->committed_mutations(); }

 private:
  std::unique_ptr<server::Store> inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t seq_ = 0;
  uint64_t fail_at_ = 0;  // 0 = no fault
  bool fail_snapshot_ = false;
  std::string cause_;
  Status error_;
  bool held_ = false;
  int held_waiters_ = 0;
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_FAULTY_STORE_H_
