// Writes the server's journal snapshots (docs/formats.md "Snapshots") off
// the state lock.
//
// Encoding a snapshot of the whole live state takes most of a second at
// tens of thousands of workloads; under the state lock every request and
// the pass would wait for it. So the control plane takes only a copy under
// the lock (protocol::SnapshotOf), right after it enqueued the mutation
// holding the snapshot's last record, and hands the copy here. This
// writer's thread encodes it and enqueues a mutation of its own that holds
// only the snapshot. The store writes mutations in queue order, so the
// records the snapshot covers are written before it, in its transaction or
// an earlier one; records enqueued after the copy may share its
// transaction and stay in the journal (their seq is above the snapshot's).
//
// One snapshot is in flight at a time: while one is, the caller takes no
// copy (idle()) and offers again at a later mutation. A crash before the snapshot is durable loses nothing: the
// journal still holds every record, after the previous snapshot.
#ifndef TIDAL_SERVER_JOURNAL_SNAPSHOT_WRITER_H_
#define TIDAL_SERVER_JOURNAL_SNAPSHOT_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "protocol/journal_snapshot.h"
#include "server/metrics.h"
#include "server/store.h"

namespace tidal::server {

class JournalSnapshotWriter {
 public:
  // Writes into `store` and times each encode in `metrics`
  // (tidal_journal_snapshot_encode_seconds); both outlive the writer.
  JournalSnapshotWriter(Store& store, Metrics& metrics);
  // Finishes the snapshot in flight (encoded and enqueued), then stops.
  ~JournalSnapshotWriter();
  JournalSnapshotWriter(const JournalSnapshotWriter&) = delete;
  JournalSnapshotWriter& operator=(const JournalSnapshotWriter&) = delete;

  // Whether no snapshot is in flight: only then is a copy worth taking.
  bool idle();
  // Takes `snapshot` (whose records the store already has queued) to
  // encode and enqueue with `keep_load_since_ms` (Mutation), or returns
  // false, taking nothing, while the previous one is in flight.
  bool Offer(protocol::JournalSnapshot snapshot, int64_t keep_load_since_ms);
  // Blocks until no snapshot is in flight, then returns the store seq of
  // the last snapshot mutation enqueued (0 = none), for WaitDurable.
  uint64_t Flush();

 private:
  struct Pending {
    protocol::JournalSnapshot snapshot;
    int64_t keep_load_since_ms = 0;
  };
  void Run();

  Store& store_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Pending> pending_;  // offered, not yet enqueued
  bool stopping_ = false;
  uint64_t last_store_seq_ = 0;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_JOURNAL_SNAPSHOT_WRITER_H_
