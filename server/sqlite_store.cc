// SQLite implementation of Store with group commit.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "server/store.h"

namespace tidal::server {
namespace {

constexpr size_t kMaxBatch = 4096;
// How much of older snapshots' parts one step deletes.
constexpr size_t kDropBytesPerStep = 1 << 20;

// A prepared statement. A failed prepare is kept as status() (a damaged
// schema, a full disk), never an abort: the caller turns it into a Status.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      status_ = Unavailable(fmt::format("sqlite: cannot prepare \"{}\": {}", sql, sqlite3_errmsg(db)));
      sqlite3_finalize(stmt_);
      stmt_ = nullptr;
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  const Status& status() const { return status_; }
  sqlite3_stmt* get() { return stmt_; }
  void BindText(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  // `s` must outlive the statement's next Run.
  void BindTextView(int i, std::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
  }
  void BindInt(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  // Runs to completion; returns the sqlite result code.
  int Run() {
    int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return rc;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

// Steps a query: true with a row, false at the end; an error (a corrupt page,
// an I/O error) is a Status naming the table, so a damaged store is reported
// instead of being read as a shorter one.
StatusOr<bool> NextRow(sqlite3* db, Statement& s, const char* table) {
  const int rc = sqlite3_step(s.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Internal(fmt::format("store: reading {}: {} (sqlite code {})", table, sqlite3_errmsg(db), rc));
}

// A column that must hold text (a record): NULL, a number or a blob is a torn
// or foreign row.
StatusOr<std::string> TextColumn(sqlite3_stmt* s, int i, const char* table, const std::string& row) {
  if (sqlite3_column_type(s, i) != SQLITE_TEXT) {
    return Internal(fmt::format("store: {} row {}: column {} is not text (a torn or foreign row)",
                                table, row, sqlite3_column_name(s, i)));
  }
  const unsigned char* t = sqlite3_column_text(s, i);
  return std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, i));
}

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, i)) : "";
}

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    Status s = Internal(fmt::format("sqlite: {}: {}", sql, err ? err : "error"));
    sqlite3_free(err);
    return s;
  }
  return Status::Ok();
}

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS workloads (id INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE NOT NULL,
                                  record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL,
                                  actor TEXT NOT NULL, action TEXT NOT NULL, workload INTEGER,
                                  tenant TEXT, project TEXT, detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_time ON audit(time_ms);
CREATE INDEX IF NOT EXISTS audit_workload ON audit(workload);
-- Append-only: the audit log is evidence, so the database itself refuses edits.
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
  BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, workload INTEGER NOT NULL);
-- The edit journal (docs/formats.md "Journal"): one record per row, in the
-- order the state changed; AUTOINCREMENT so that a seq is never reused.
CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
-- Journal snapshots (docs/formats.md "Snapshots"): the state after journal
-- row seq. A row marks a snapshot complete; its text is in snapshot_parts,
-- written a part per transaction before the row (a row of a store written
-- before parts holds the whole text in `snapshot`; a new one holds '').
-- Only the latest is kept, and the journal rows it covers are deleted in
-- steps after it.
CREATE TABLE IF NOT EXISTS snapshots (seq INTEGER PRIMARY KEY, snapshot TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot_parts (seq INTEGER NOT NULL, part INTEGER NOT NULL, text TEXT NOT NULL,
                                           PRIMARY KEY (seq, part));
)sql";

// The writer's prepared statements, in one place so WriteBatch takes one.
struct Statements {
  Statement& begin;
  Statement& commit;
  Statement& put_workload;
  Statement& put_node;
  Statement& put_audit;
  Statement& put_key;
  Statement& put_journal;
  Statement& put_meta;
  Statement& clear_parts;  // of a seq, before its first part
  Statement& put_part;
  Statement& mark_snapshot;  // the row that makes a written snapshot the latest
  Statement& drop_snapshots;  // older rows
  Statement& compaction_end;  // the seq of the compaction step's last row
  Statement& drop_journal;
  Statement& drop_parts;  // of snapshots other than the latest
  Statement& snapshot_bounds;  // the last journal seq given, the latest snapshot's seq
};

class SqliteStore final : public Store {
 public:
  ~SqliteStore() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    queued_cv_.notify_all();
    if (writer_.joinable()) writer_.join();
    if (reader_) sqlite3_close(reader_);
    if (db_) sqlite3_close(db_);
    if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
  }

  Status Open(const std::string& path, SqliteDurability durability, SqliteSteps steps) {
    steps_ = steps;
    steps_.snapshot_part_bytes = std::max<size_t>(1, steps_.snapshot_part_bytes);
    steps_.compaction_rows = std::max(1, steps_.compaction_rows);
    TIDAL_RETURN_IF_ERROR(LockExclusive(path));
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      return Unavailable(fmt::format("store sqlite:{}: {}", path, sqlite3_errmsg(db_)));
    }
    sqlite3_busy_timeout(db_, 5000);
    TIDAL_RETURN_IF_ERROR(Exec(db_, "PRAGMA journal_mode=WAL;"));
    TIDAL_RETURN_IF_ERROR(Exec(db_, durability == SqliteDurability::kFsync ? "PRAGMA synchronous=FULL;"
                                                                           : "PRAGMA synchronous=OFF;"));
    TIDAL_RETURN_IF_ERROR(Exec(db_, kSchema));
    if (sqlite3_open_v2(path.c_str(), &reader_, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
      return Unavailable(fmt::format("store sqlite:{}: {}", path, sqlite3_errmsg(reader_)));
    }
    sqlite3_busy_timeout(reader_, 5000);
    TIDAL_RETURN_IF_ERROR(ResumeSteps());
    writer_ = std::thread([this] { WriterLoop(); });
    return Status::Ok();
  }

  StatusOr<Recovered> Load() override {
    std::lock_guard lock(reader_mu_);
    Recovered r;
    {
      Statement s(reader_, "SELECT id, record FROM workloads ORDER BY id");
      TIDAL_RETURN_IF_ERROR(s.status());
      while (true) {
        TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "workloads"));
        if (!row) break;
        const int64_t id = sqlite3_column_int64(s.get(), 0);
        TIDAL_ASSIGN_OR_RETURN(std::string record, TextColumn(s.get(), 1, "workloads", std::to_string(id)));
        r.workloads.emplace_back(static_cast<uint64_t>(id), std::move(record));
      }
    }
    {
      Statement s(reader_, "SELECT name, record FROM nodes ORDER BY seq");
      TIDAL_RETURN_IF_ERROR(s.status());
      while (true) {
        TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "nodes"));
        if (!row) break;
        TIDAL_ASSIGN_OR_RETURN(std::string name, TextColumn(s.get(), 0, "nodes", "?"));
        TIDAL_ASSIGN_OR_RETURN(std::string record, TextColumn(s.get(), 1, "nodes", name));
        r.nodes.emplace_back(std::move(name), std::move(record));
      }
    }
    {
      Statement s(reader_, "SELECT key, workload FROM idempotency");
      TIDAL_RETURN_IF_ERROR(s.status());
      while (true) {
        TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "idempotency"));
        if (!row) break;
        TIDAL_ASSIGN_OR_RETURN(std::string key, TextColumn(s.get(), 0, "idempotency", "?"));
        r.idempotency.push_back({std::move(key), static_cast<uint64_t>(sqlite3_column_int64(s.get(), 1))});
      }
    }
    {
      Statement s(reader_, "SELECT COALESCE(MAX(seq), 0) FROM audit");
      TIDAL_RETURN_IF_ERROR(s.status());
      TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "audit"));
      if (row) r.last_audit_seq = sqlite3_column_int64(s.get(), 0);
    }
    {
      // AUTOINCREMENT keeps the last seq ever given in sqlite_sequence, so
      // it survives a compaction that deleted every row.
      Statement s(reader_,
                  "SELECT COALESCE((SELECT MAX(seq) FROM snapshots), 0), "
                  "COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'journal'), 0), "
                  "(SELECT COUNT(*) FROM journal WHERE seq > COALESCE((SELECT MAX(seq) FROM snapshots), 0))");
      TIDAL_RETURN_IF_ERROR(s.status());
      TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "journal"));
      if (row) {
        r.last_journal_seq = std::max(sqlite3_column_int64(s.get(), 0), sqlite3_column_int64(s.get(), 1));
        r.journal_since_snapshot = sqlite3_column_int64(s.get(), 2);
      }
    }
    return r;
  }

  uint64_t Enqueue(Mutation m) override {
    std::lock_guard lock(mu_);
    const uint64_t seq = ++enqueued_seq_;
    // A failed store writes nothing more: the file must stay a prefix of the
    // history, and this change's WaitDurable reports the failure.
    if (!error_.ok()) return seq;
    queue_.push_back(std::move(m));
    queued_cv_.notify_one();
    return seq;
  }

  Status WaitDurable(uint64_t seq) override {
    std::unique_lock lock(mu_);
    durable_cv_.wait(lock, [&] { return durable_seq_ >= seq || !error_.ok(); });
    if (durable_seq_ >= seq) return Status::Ok();
    return error_;
  }

  void WhenDurable(uint64_t seq, std::function<void(Status)> then) override {
    std::unique_lock lock(mu_);
    if (durable_seq_ >= seq || !error_.ok()) {
      const Status answer = durable_seq_ >= seq ? Status::Ok() : error_;
      lock.unlock();
      return then(answer);
    }
    durable_waiters_.emplace(seq, std::move(then));
  }

  Status health() const override {
    std::lock_guard lock(mu_);
    return error_;
  }

  StatusOr<std::vector<AuditRow>> QueryAudit(const AuditQuery& q) override {
    std::lock_guard lock(reader_mu_);
    std::string sql =
        "SELECT seq, time_ms, actor, action, workload, tenant, project, detail FROM audit "
        "WHERE time_ms >= ?1 AND time_ms <= ?2";
    if (q.workload != 0) sql += " AND workload = ?3";
    if (!q.tenant.empty()) sql += " AND tenant = ?4";
    if (!q.action.empty()) sql += " AND action = ?5";
    sql += " ORDER BY seq LIMIT ?6";
    Statement s(reader_, sql.c_str());
    TIDAL_RETURN_IF_ERROR(s.status());
    s.BindInt(1, q.from_ms);
    s.BindInt(2, q.to_ms);
    if (q.workload != 0) s.BindInt(3, static_cast<int64_t>(q.workload));
    if (!q.tenant.empty()) s.BindText(4, q.tenant);
    if (!q.action.empty()) s.BindText(5, q.action);
    s.BindInt(6, q.limit);
    std::vector<AuditRow> rows;
    while (true) {
      TIDAL_ASSIGN_OR_RETURN(bool more, NextRow(reader_, s, "audit"));
      if (!more) break;
      AuditRow row;
      row.seq = sqlite3_column_int64(s.get(), 0);
      row.time_ms = sqlite3_column_int64(s.get(), 1);
      row.actor = ColumnText(s.get(), 2);
      row.action = ColumnText(s.get(), 3);
      row.workload = static_cast<uint64_t>(sqlite3_column_int64(s.get(), 4));
      row.tenant = ColumnText(s.get(), 5);
      row.project = ColumnText(s.get(), 6);
      row.detail_json = ColumnText(s.get(), 7);
      rows.push_back(std::move(row));
    }
    return rows;
  }

  StatusOr<std::vector<JournalRow>> ReadJournal(int64_t after_seq, int limit) override {
    if (limit < 1) return InvalidArgument(fmt::format("journal: limit must be at least 1, got {}", limit));
    std::lock_guard lock(reader_mu_);
    Statement s(reader_, "SELECT seq, entry FROM journal WHERE seq > ?1 ORDER BY seq LIMIT ?2");
    TIDAL_RETURN_IF_ERROR(s.status());
    s.BindInt(1, after_seq);
    s.BindInt(2, limit);
    std::vector<JournalRow> rows;
    while (true) {
      TIDAL_ASSIGN_OR_RETURN(bool more, NextRow(reader_, s, "journal"));
      if (!more) break;
      JournalRow row;
      row.seq = sqlite3_column_int64(s.get(), 0);
      TIDAL_ASSIGN_OR_RETURN(row.entry, TextColumn(s.get(), 1, "journal", std::to_string(row.seq)));
      rows.push_back(std::move(row));
    }
    return rows;
  }

  StatusOr<std::optional<SnapshotRow>> ReadSnapshot() override {
    std::lock_guard lock(reader_mu_);
    // One read transaction: the writer may make a newer snapshot the
    // latest and drop this one's parts between the two queries.
    TIDAL_RETURN_IF_ERROR(Exec(reader_, "BEGIN"));
    auto out = ReadLatestSnapshot();
    (void)Exec(reader_, "COMMIT");
    return out;
  }

  StatusOr<std::optional<std::string>> ReadMeta(const std::string& key) override {
    std::lock_guard lock(reader_mu_);
    Statement s(reader_, "SELECT value FROM meta WHERE key = ?1");
    TIDAL_RETURN_IF_ERROR(s.status());
    s.BindText(1, key);
    TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "meta"));
    if (!row) return std::optional<std::string>();
    TIDAL_ASSIGN_OR_RETURN(std::string value, TextColumn(s.get(), 0, "meta", key));
    return std::optional<std::string>(std::move(value));
  }

  uint64_t commits() const override { return commits_.load(); }
  uint64_t committed_mutations() const override { return committed_mutations_.load(); }

 private:
  // The latest snapshot's row and, unless the row holds the whole text (a
  // store written before parts), its parts in order (reader_mu_ held).
  StatusOr<std::optional<SnapshotRow>> ReadLatestSnapshot() {
    Statement s(reader_, "SELECT seq, snapshot FROM snapshots ORDER BY seq DESC LIMIT 1");
    TIDAL_RETURN_IF_ERROR(s.status());
    TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(reader_, s, "snapshots"));
    if (!row) return std::optional<SnapshotRow>();
    SnapshotRow out;
    out.seq = sqlite3_column_int64(s.get(), 0);
    const std::string row_name = std::to_string(out.seq);
    TIDAL_ASSIGN_OR_RETURN(out.snapshot, TextColumn(s.get(), 1, "snapshots", row_name));
    if (!out.snapshot.empty()) return std::optional<SnapshotRow>(std::move(out));
    Statement parts(reader_, "SELECT part, text FROM snapshot_parts WHERE seq = ?1 ORDER BY part");
    TIDAL_RETURN_IF_ERROR(parts.status());
    parts.BindInt(1, out.seq);
    int64_t expected = 0;  // parts are 0, 1, ...: a gap is a torn store
    bool gap = false;
    while (true) {
      TIDAL_ASSIGN_OR_RETURN(bool more, NextRow(reader_, parts, "snapshot_parts"));
      if (!more) break;
      if (sqlite3_column_int64(parts.get(), 0) != expected) {
        gap = true;
        break;
      }
      TIDAL_ASSIGN_OR_RETURN(std::string text, TextColumn(parts.get(), 1, "snapshot_parts", row_name));
      out.snapshot += text;
      ++expected;
    }
    if (gap || expected == 0) {
      return Internal(fmt::format("store: snapshots row {}: part {} is missing (a torn store)", row_name, expected));
    }
    return std::optional<SnapshotRow>(std::move(out));
  }

  // What a crash left undone, taken up once the store writes: parts of a
  // snapshot it was writing, and the latest snapshot's compaction. Its
  // window for load samples was not stored, so every load sample stays
  // until the next snapshot's compaction.
  Status ResumeSteps() {
    Statement s(db_, "SELECT MAX(seq) FROM snapshots");
    TIDAL_RETURN_IF_ERROR(s.status());
    TIDAL_ASSIGN_OR_RETURN(bool row, NextRow(db_, s, "snapshots"));
    if (row && sqlite3_column_type(s.get(), 0) != SQLITE_NULL) {
      compaction_ = Compaction{sqlite3_column_int64(s.get(), 0), INT64_MIN, 0};
    }
    parts_to_drop_ = true;
    return Status::Ok();
  }

  // One server per store: a second writer would hand out the same audit
  // sequence numbers and ids, and its first commit would kill the other
  // (UNIQUE constraint failed: audit.seq). flock on PATH.lock, held for the
  // store's life; the kernel drops it when the process dies, so a crash
  // never leaves a stale lock.
  Status LockExclusive(const std::string& path) {
    const std::string lock_path = path + ".lock";
    lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ < 0) {
      return Unavailable(fmt::format("store sqlite:{}: cannot open lock file {}: {}", path, lock_path,
                                     std::strerror(errno)));
    }
    if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(lock_fd_);
      lock_fd_ = -1;
      if (err == EWOULDBLOCK) {
        return FailedPrecondition(fmt::format(
            "store sqlite:{}: in use by another tidal server (lock {} is held); stop it or use "
            "another store", path, lock_path));
      }
      return Unavailable(fmt::format("store sqlite:{}: cannot lock {}: {}", path, lock_path,
                                     std::strerror(err)));
    }
    return Status::Ok();
  }

  void WriterLoop() {
    Statement begin(db_, "BEGIN IMMEDIATE");
    Statement commit(db_, "COMMIT");
    Statement rollback(db_, "ROLLBACK");
    Statement put_workload(db_, "INSERT OR REPLACE INTO workloads(id, record) VALUES (?1, ?2)");
    Statement put_node(db_,
                       "INSERT INTO nodes(name, record) VALUES (?1, ?2) "
                       "ON CONFLICT(name) DO UPDATE SET record = excluded.record");
    Statement put_audit(db_,
                        "INSERT INTO audit(seq, time_ms, actor, action, workload, tenant, project, "
                        "detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    Statement put_key(db_, "INSERT OR IGNORE INTO idempotency(key, workload) VALUES (?1, ?2)");
    Statement put_journal(db_, "INSERT INTO journal(entry) VALUES (?1)");
    Statement put_meta(db_,
                       "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    Statement clear_parts(db_, "DELETE FROM snapshot_parts WHERE seq = ?1");
    Statement put_part(db_, "INSERT INTO snapshot_parts(seq, part, text) VALUES (?1, ?2, ?3)");
    Statement mark_snapshot(db_, "INSERT INTO snapshots(seq, snapshot) VALUES (?1, '')");
    Statement drop_snapshots(db_, "DELETE FROM snapshots WHERE seq < ?1");
    Statement compaction_end(db_, "SELECT seq FROM journal WHERE seq > ?1 ORDER BY seq LIMIT 1 OFFSET ?2");
    Statement drop_journal(db_,
                           "DELETE FROM journal WHERE seq > ?1 AND seq <= ?2 AND NOT "
                           "(json_extract(entry, '$.record') = 'load' AND json_extract(entry, '$.at_ms') >= ?3)");
    Statement drop_parts(db_,
                         "DELETE FROM snapshot_parts WHERE rowid IN (SELECT rowid FROM snapshot_parts WHERE "
                         "seq != COALESCE((SELECT MAX(seq) FROM snapshots), 0) LIMIT ?1)");
    Statement snapshot_bounds(db_,
                              "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'journal'), 0), "
                              "COALESCE((SELECT MAX(seq) FROM snapshots), 0)");
    Statements statements{begin,         commit,         put_workload,   put_node,     put_audit,  put_key,
                          put_journal,   put_meta,       clear_parts,    put_part,     mark_snapshot,
                          drop_snapshots, compaction_end, drop_journal,  drop_parts,   snapshot_bounds};
    for (const Statement* st : {&begin, &commit, &rollback, &put_workload, &put_node, &put_audit, &put_key,
                                &put_journal, &put_meta, &clear_parts, &put_part, &mark_snapshot, &drop_snapshots,
                                &compaction_end, &drop_journal, &drop_parts, &snapshot_bounds}) {
      if (!st->status().ok()) {
        Fail(st->status());
        break;
      }
    }
    std::vector<Mutation> batch;
    while (true) {
      uint64_t last_seq = 0;
      {
        std::unique_lock lock(mu_);
        // Steps left (a snapshot's parts, its compaction) go on while no
        // mutation waits, and finish before the store closes; a store
        // opened only to be read (`tidal sim replay`) is not written.
        const auto steps_left = [&] { return error_.ok() && wrote_ && StepsLeft(); };
        queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || steps_left(); });
        if (queue_.empty() && !steps_left()) return;  // stopping, and everything is durable
        while (!queue_.empty() && batch.size() < kMaxBatch) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        last_seq = durable_seq_ + batch.size();
      }
      Status written = WriteBatch(batch, statements);
      batch.clear();
      if (!written.ok()) {
        // Nothing of the batch may stay half-written (an error inside a
        // transaction can leave it open); the next Load sees the last commit.
        if (rollback.get() && !sqlite3_get_autocommit(db_)) rollback.Run();
        Fail(written);
        continue;
      }
      std::vector<std::function<void(Status)>> due;
      {
        std::lock_guard lock(mu_);
        durable_seq_ = last_seq;
        auto end = durable_waiters_.upper_bound(last_seq);
        for (auto it = durable_waiters_.begin(); it != end; ++it) due.push_back(std::move(it->second));
        durable_waiters_.erase(durable_waiters_.begin(), end);
      }
      durable_cv_.notify_all();
      for (auto& then : due) then(Status::Ok());
    }
  }

  Status WriteBatch(std::vector<Mutation>& batch, Statements& st) {
    auto& [begin, commit, put_workload, put_node, put_audit, put_key, put_journal, put_meta, clear_parts, put_part,
           mark_snapshot, drop_snapshots, compaction_end, drop_journal, drop_parts, snapshot_bounds] = st;
    {
      std::lock_guard lock(mu_);
      if (!error_.ok()) return error_;
    }
    TIDAL_RETURN_IF_ERROR(Check(begin.Run(), "BEGIN"));
    wrote_ = true;
    for (Mutation& m : batch) {
      for (const auto& [id, record] : m.workloads) {
        put_workload.BindInt(1, static_cast<int64_t>(id));
        put_workload.BindText(2, record);
        TIDAL_RETURN_IF_ERROR(Check(put_workload.Run(), "workload"));
      }
      for (const auto& [name, record] : m.nodes) {
        put_node.BindText(1, name);
        put_node.BindText(2, record);
        TIDAL_RETURN_IF_ERROR(Check(put_node.Run(), "node"));
      }
      for (const AuditRow& a : m.audit) {
        put_audit.BindInt(1, a.seq);
        put_audit.BindInt(2, a.time_ms);
        put_audit.BindText(3, a.actor);
        put_audit.BindText(4, a.action);
        put_audit.BindInt(5, static_cast<int64_t>(a.workload));
        put_audit.BindText(6, a.tenant);
        put_audit.BindText(7, a.project);
        put_audit.BindText(8, a.detail_json);
        TIDAL_RETURN_IF_ERROR(Check(put_audit.Run(), "audit"));
      }
      for (const IdempotencyRow& k : m.idempotency) {
        put_key.BindText(1, k.key);
        put_key.BindInt(2, static_cast<int64_t>(k.workload));
        TIDAL_RETURN_IF_ERROR(Check(put_key.Run(), "idempotency"));
      }
      for (const std::string& entry : m.journal) {
        put_journal.BindText(1, entry);
        TIDAL_RETURN_IF_ERROR(Check(put_journal.Run(), "journal"));
      }
      for (const auto& [key, value] : m.meta) {
        put_meta.BindText(1, key);
        put_meta.BindText(2, value);
        TIDAL_RETURN_IF_ERROR(Check(put_meta.Run(), "meta"));
      }
      if (!m.snapshot.empty()) {
        TIDAL_RETURN_IF_ERROR(CheckSnapshotSeq(m.snapshot_seq, snapshot_bounds));
        // A newer snapshot replaces one still being written, whose parts
        // written so far are left to DropParts.
        if (writing_) parts_to_drop_ = true;
        writing_ = SnapshotWrite{m.snapshot_seq, std::move(m.snapshot), m.keep_load_since_ms};
      }
    }
    TIDAL_RETURN_IF_ERROR(Step(st));
    TIDAL_RETURN_IF_ERROR(Check(commit.Run(), "COMMIT"));
    commits_.fetch_add(1);
    committed_mutations_.fetch_add(batch.size());
    return Status::Ok();
  }

  // Whether a snapshot left steps to take (writer thread only).
  bool StepsLeft() const { return writing_.has_value() || compaction_.has_value() || parts_to_drop_; }

  // One step of what snapshots leave, in every transaction until none is
  // left, so that no commit waits on more than one step: the next part of
  // the snapshot being written (the last part's step also makes it the
  // latest and starts its compaction); else the next compaction_rows
  // journal rows the latest snapshot covers; else a few parts of snapshots
  // that are no longer the latest. Writing a snapshot in one transaction
  // held every commit queued behind it for as long as the state is large
  // (about a second at 85,000 workloads: docs/PERFORMANCE.md).
  Status Step(Statements& st) {
    if (writing_) return WritePart(st);
    if (compaction_) return Compact(st);
    if (parts_to_drop_) return DropParts(st);
    return Status::Ok();
  }

  Status WritePart(Statements& st) {
    SnapshotWrite& w = *writing_;
    if (w.parts == 0) {  // parts a crash left at this seq would join the text
      st.clear_parts.BindInt(1, w.seq);
      TIDAL_RETURN_IF_ERROR(Check(st.clear_parts.Run(), "snapshot part"));
    }
    const size_t n = std::min(steps_.snapshot_part_bytes, w.text.size() - w.written);
    st.put_part.BindInt(1, w.seq);
    st.put_part.BindInt(2, w.parts);
    st.put_part.BindTextView(3, std::string_view(w.text).substr(w.written, n));
    TIDAL_RETURN_IF_ERROR(Check(st.put_part.Run(), "snapshot part"));
    w.written += n;
    ++w.parts;
    if (w.written < w.text.size()) return Status::Ok();
    // Every part is in: this transaction makes it the latest snapshot.
    st.mark_snapshot.BindInt(1, w.seq);
    TIDAL_RETURN_IF_ERROR(Check(st.mark_snapshot.Run(), "snapshot"));
    st.drop_snapshots.BindInt(1, w.seq);
    TIDAL_RETURN_IF_ERROR(Check(st.drop_snapshots.Run(), "snapshot compaction"));
    // From the journal's start: a compaction still going is taken over,
    // and load samples an older one kept may have left the window.
    compaction_ = Compaction{w.seq, w.keep_load_since_ms, 0};
    parts_to_drop_ = true;  // the older snapshot's
    writing_.reset();
    return Status::Ok();
  }

  Status Compact(Statements& st) {
    Compaction& c = *compaction_;
    int64_t end = c.upto_seq;
    st.compaction_end.BindInt(1, c.after_seq);
    st.compaction_end.BindInt(2, steps_.compaction_rows - 1);
    const int rc = sqlite3_step(st.compaction_end.get());
    if (rc == SQLITE_ROW) end = std::min<int64_t>(end, sqlite3_column_int64(st.compaction_end.get(), 0));
    sqlite3_reset(st.compaction_end.get());
    if (rc != SQLITE_ROW) TIDAL_RETURN_IF_ERROR(Check(rc, "journal compaction"));
    st.drop_journal.BindInt(1, c.after_seq);
    st.drop_journal.BindInt(2, end);
    st.drop_journal.BindInt(3, c.keep_load_since_ms);
    TIDAL_RETURN_IF_ERROR(Check(st.drop_journal.Run(), "journal compaction"));
    c.after_seq = end;
    if (end == c.upto_seq) compaction_.reset();
    return Status::Ok();
  }

  // Runs only when no snapshot is being written (Step), so every part not
  // of the latest snapshot is an older or abandoned one's.
  Status DropParts(Statements& st) {
    st.drop_parts.BindInt(1, static_cast<int64_t>(std::max<size_t>(1, kDropBytesPerStep / steps_.snapshot_part_bytes)));
    TIDAL_RETURN_IF_ERROR(Check(st.drop_parts.Run(), "snapshot compaction"));
    if (sqlite3_changes(db_) == 0) parts_to_drop_ = false;
    return Status::Ok();
  }

  // A snapshot covers records the store was given before it (its own
  // transaction or an earlier one: the control plane encodes it off the
  // state lock) and comes after the latest one. Anything else means the
  // caller miscounted, and the snapshot would claim records it does not
  // cover (or hide a newer one): the write fails instead.
  Status CheckSnapshotSeq(int64_t seq, Statement& bounds) {
    const int rc = sqlite3_step(bounds.get());
    const int64_t last_record = rc == SQLITE_ROW ? sqlite3_column_int64(bounds.get(), 0) : -1;
    int64_t latest_snapshot = rc == SQLITE_ROW ? sqlite3_column_int64(bounds.get(), 1) : -1;
    sqlite3_reset(bounds.get());
    if (rc != SQLITE_ROW) return Check(rc, "snapshot bounds");
    if (writing_) latest_snapshot = std::max(latest_snapshot, writing_->seq);
    if (seq > last_record || seq <= latest_snapshot) {
      return Internal(fmt::format("store write failed (snapshot): it covers journal row {}, but the journal's "
                                  "last row is {} and the latest snapshot covers row {}",
                                  seq, last_record, latest_snapshot));
    }
    return Status::Ok();
  }

  Status Check(int rc, const char* what) {
    if (rc == SQLITE_DONE || rc == SQLITE_ROW || rc == SQLITE_OK) return Status::Ok();
    return Unavailable(fmt::format("store write failed ({}): {}", what, sqlite3_errmsg(db_)));
  }

  // The first failure sticks: every waiter not yet durable gets it, and the
  // queue is dropped (those changes' callers get the error, not a reply).
  void Fail(const Status& cause) {
    std::multimap<uint64_t, std::function<void(Status)>> waiters;
    {
      std::lock_guard lock(mu_);
      if (!error_.ok()) return;
      error_ = cause;
      queue_.clear();
      waiters.swap(durable_waiters_);
    }
    std::fprintf(stderr, "tidal: %s; the store is failed and the server is read-only until restarted\n",
                 cause.message().c_str());
    durable_cv_.notify_all();
    for (auto& [seq, then] : waiters) then(cause);
  }

  int lock_fd_ = -1;
  sqlite3* db_ = nullptr;
  sqlite3* reader_ = nullptr;
  std::mutex reader_mu_;

  mutable std::mutex mu_;
  std::condition_variable queued_cv_;
  std::condition_variable durable_cv_;
  std::deque<Mutation> queue_;
  // WhenDurable's callers by the seq they wait for.
  std::multimap<uint64_t, std::function<void(Status)>> durable_waiters_;
  uint64_t enqueued_seq_ = 0;
  uint64_t durable_seq_ = 0;
  bool stopping_ = false;
  Status error_;  // sticky: the first failed write
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> committed_mutations_{0};

  // What snapshots leave to do, a Step per transaction (writer thread only,
  // and Open before it starts).
  struct SnapshotWrite {
    int64_t seq = 0;
    std::string text;
    int64_t keep_load_since_ms = 0;
    size_t written = 0;  // bytes in parts so far
    int64_t parts = 0;
  };
  struct Compaction {
    int64_t upto_seq = 0;  // the latest snapshot's: rows up to it go
    int64_t keep_load_since_ms = 0;
    int64_t after_seq = 0;  // rows up to this one are done
  };
  SqliteSteps steps_;
  std::optional<SnapshotWrite> writing_;
  std::optional<Compaction> compaction_;
  bool parts_to_drop_ = false;
  bool wrote_ = false;  // a mutation came: steps may be taken
  std::thread writer_;
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteDurability durability,
                                                 SqliteSteps steps) {
  auto store = std::make_unique<SqliteStore>();
  TIDAL_RETURN_IF_ERROR(store->Open(path, durability, steps));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace tidal::server
