// The durable store behind the control plane. The in-memory state is the
// working copy; the store is its journal. Every change is a Mutation queued in
// the order the state changed (callers enqueue while holding the state lock),
// so the store always holds a prefix of the in-memory history. A reply goes
// out only after WaitDurable() for its mutation, which makes every earlier
// mutation durable too. Kept small so that an etcd store (HA) can replace the
// SQLite one.
//
// Errors are sticky (LevelDB's bg_error_): the first write that fails puts the
// store into a failed state for the rest of its life. The failed batch is
// rolled back and nothing queued after it is written, so the file keeps a
// prefix of the history and every WaitDurable() for a change not yet durable
// returns the cause. The control plane then serves reads only; a restart
// recovers the last commit.
#ifndef TIDAL_SERVER_STORE_H_
#define TIDAL_SERVER_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace tidal::server {

struct AuditRow {
  int64_t seq = 0;  // assigned by the caller, strictly increasing
  int64_t time_ms = 0;
  std::string actor;   // token name, "scheduler", "agent:<node>"
  std::string action;  // admit, priority, approve, place, preempt, ...
  uint64_t workload = 0;
  std::string tenant;
  std::string project;
  std::string detail_json;  // the action's fields, a JSON object
};

struct IdempotencyRow {
  std::string key;  // "<principal>\n<Idempotency-Key>"
  uint64_t workload = 0;
};

struct Mutation {
  std::vector<std::pair<uint64_t, std::string>> workloads;    // upsert: id, record JSON
  std::vector<std::pair<std::string, std::string>> nodes;     // upsert: name, node JSON
  std::vector<AuditRow> audit;                                // append
  std::vector<IdempotencyRow> idempotency;                    // insert
  // Append, in order: encoded journal records (protocol/journal_record.h),
  // written in the same transaction as the rest, so the journal holds
  // exactly the edits whose effects the other tables hold.
  std::vector<std::string> journal;
  // Upsert: key, value. The server keeps "cluster" and "policy" (JSON text)
  // here so that a replay finds the configuration the history ran under.
  std::vector<std::pair<std::string, std::string>> meta;
  // A snapshot of the state after journal record `snapshot_seq`
  // (protocol/journal_snapshot.h text; "" = none). The control plane encodes
  // it off the state lock and enqueues it in a mutation of its own after the
  // records it covers, so `snapshot_seq` is at most the seq of the last
  // record written before it (records enqueued after the copy may come
  // first). The store writes it in steps after this mutation is durable (a
  // SQLite store: in parts, then it compacts: SqliteSteps): it becomes the
  // latest snapshot only once it is whole, and then the journal rows it
  // covers (seq <= snapshot_seq) and every older snapshot are deleted. So
  // a crash or a failed write leaves the latest whole snapshot and the
  // whole journal after it (rows before it that a compaction had not
  // reached yet are covered by it: readers start after its seq). A
  // `snapshot_seq` past the last record written, or not after the latest
  // snapshot's (or the one being written), fails the write (the caller
  // miscounted): a snapshot never claims records it does not cover.
  std::string snapshot;
  int64_t snapshot_seq = 0;
  // Compaction keeps the load samples (`"record":"load"`) taken at or after
  // this time: they are the co-location forecaster's memory, which a
  // restarting server feeds from the journal (kLoadHistoryWindow).
  int64_t keep_load_since_ms = 0;
  bool empty() const {
    return workloads.empty() && nodes.empty() && audit.empty() && idempotency.empty() &&
           journal.empty() && meta.empty() && snapshot.empty();
  }
};

// One journal record and its position (1, 2, ...: gapless while the store
// lives, strictly increasing always; after a compaction the rows left are
// the latest snapshot's tail and, before it, the load samples of the
// forecaster's window: Mutation::keep_load_since_ms).
struct JournalRow {
  int64_t seq = 0;
  std::string entry;
};

// The meta keys the server writes and `tidal sim replay` reads.
inline constexpr const char* kMetaCluster = "cluster";
inline constexpr const char* kMetaPolicy = "policy";

// The latest journal snapshot and the seq of the last record it covers.
struct SnapshotRow {
  int64_t seq = 0;
  std::string snapshot;
};

struct Recovered {
  std::vector<std::pair<uint64_t, std::string>> workloads;  // by id
  std::vector<std::pair<std::string, std::string>> nodes;   // in first-insert order
  std::vector<IdempotencyRow> idempotency;
  int64_t last_audit_seq = 0;
  // The seq of the last journal record ever written (0 = none), and how
  // many records follow the latest snapshot (all of them when there is
  // none): where the next snapshot's count starts.
  int64_t last_journal_seq = 0;
  int64_t journal_since_snapshot = 0;
};

struct AuditQuery {
  int64_t from_ms = 0;
  int64_t to_ms = INT64_MAX;
  uint64_t workload = 0;       // 0 = any
  std::string tenant;          // "" = any
  std::string action;          // "" = any
  int limit = 1000;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual StatusOr<Recovered> Load() = 0;
  // Queues `m` and returns its sequence number; never blocks on disk.
  virtual uint64_t Enqueue(Mutation m) = 0;
  // Blocks until mutation `seq` (and every earlier one) is durable, or the
  // store has failed: then returns the failure for every `seq` that did not
  // become durable before it.
  virtual Status WaitDurable(uint64_t seq) = 0;
  // WaitDurable's answer, given to `then` instead of waited for: at once
  // when it is known, else on the store's writer thread after the commit
  // (so `then` must be quick and must not wait on the store). A request
  // waiting for its fsync then holds no thread. This default blocks.
  virtual void WhenDurable(uint64_t seq, std::function<void(Status)> then) { then(WaitDurable(seq)); }
  // Ok, or the failure (a Status naming the cause): sticky until a
  // restart, unless in_outage().
  virtual Status health() const = 0;
  // Whether health()'s failure is an outage the store recovers from by
  // itself (etcd without quorum), so the server says "retry", not "restart".
  virtual bool in_outage() const { return false; }
  virtual StatusOr<std::vector<AuditRow>> QueryAudit(const AuditQuery& query) = 0;
  // Up to `limit` journal rows with seq > `after_seq`, in order; page with
  // the last row's seq. Reads what is durable (committed), never a batch in
  // flight.
  virtual StatusOr<std::vector<JournalRow>> ReadJournal(int64_t after_seq, int limit) = 0;
  // The latest snapshot (Mutation::snapshot); nullopt when none was written.
  // The journal then holds the records after it (and the window's load
  // samples before it: a replay starts after the snapshot's seq).
  virtual StatusOr<std::optional<SnapshotRow>> ReadSnapshot() = 0;
  // The value of a meta key; nullopt when it was never written.
  virtual StatusOr<std::optional<std::string>> ReadMeta(const std::string& key) = 0;
  // Transactions committed and mutations in them, for metrics.
  virtual uint64_t commits() const = 0;
  virtual uint64_t committed_mutations() const = 0;
};

// "sqlite:PATH": OpenSqliteStore(PATH, kFsync). "etcd://HOST:PORT,...
// [?prefix=/tidal]": an etcd store (server/etcd_store.h) that reads what the
// replicas' leader wrote and writes nothing itself (`tidal sim replay`); a
// server that campaigns for leadership opens EtcdStore itself.
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url);

enum class SqliteDurability {
  kFsync,  // synchronous=FULL: a commit survives a power loss
  kCache,  // synchronous=OFF: a copy of a store kept elsewhere (etcd's cache)
};
// How the SQLite store spreads the work a journal snapshot leaves over its
// transactions: one step in each (and in transactions of their own while no
// mutation waits), so that no commit waits for more than one. A snapshot is
// written in parts, then the journal rows it covers are deleted in runs.
// The defaults are the fast settings; tests shrink them to see the steps.
struct SqliteSteps {
  size_t snapshot_part_bytes = 256 * 1024;
  int compaction_rows = 500;
};
// WAL mode and group commit: one writer thread commits every queued
// mutation in one transaction.
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteDurability durability,
                                                 SqliteSteps steps = {});

}  // namespace tidal::server

#endif  // TIDAL_SERVER_STORE_H_
