#include "server/journal_snapshot_writer.h"

#include <chrono>
#include <string>
#include <utility>

namespace tidal::server {

JournalSnapshotWriter::JournalSnapshotWriter(Store& store, Metrics& metrics)
    : store_(store), metrics_(metrics), thread_([this] { Run(); }) {}

JournalSnapshotWriter::~JournalSnapshotWriter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool JournalSnapshotWriter::idle() {
  std::lock_guard lock(mu_);
  return !pending_;
}

bool JournalSnapshotWriter::Offer(protocol::JournalSnapshot snapshot, int64_t keep_load_since_ms) {
  {
    std::lock_guard lock(mu_);
    if (pending_ || stopping_) return false;
    pending_.emplace(Pending{std::move(snapshot), keep_load_since_ms});
  }
  cv_.notify_all();
  return true;
}

uint64_t JournalSnapshotWriter::Flush() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !pending_; });
  return last_store_seq_;
}

void JournalSnapshotWriter::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return pending_ || stopping_; });
    // A snapshot offered before the stop is still written: the destructor
    // finishes it.
    if (!pending_) return;
    // Its encode and its free (tens of thousands of workloads) both happen
    // here, off every other lock; pending_ stays set until the snapshot is
    // enqueued, which is what keeps one in flight.
    Pending& p = *pending_;
    lock.unlock();
    const auto encode_start = std::chrono::steady_clock::now();
    Mutation m;
    m.snapshot = protocol::JournalSnapshotToText(p.snapshot);
    metrics_.Observe("tidal_journal_snapshot_encode_seconds", {},
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - encode_start).count());
    m.snapshot_seq = p.snapshot.seq;
    m.keep_load_since_ms = p.keep_load_since_ms;
    const uint64_t store_seq = store_.Enqueue(std::move(m));
    metrics_.Inc("tidal_journal_snapshots_total", {});
    p.snapshot = {};
    lock.lock();
    pending_.reset();
    last_store_seq_ = store_seq;
    cv_.notify_all();
  }
}

}  // namespace tidal::server
