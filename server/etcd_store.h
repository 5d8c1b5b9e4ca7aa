// The control plane's store in etcd, for several replicas of `tidal server`
// (issue #13; docs/ARCHITECTURE.md "Replicated store").
//
// Layout under the prefix P (default /tidal):
//   P/log/<n>          batch n of mutations (server/mutation_codec.h), one
//                      etcd transaction per group commit: 'B' + the batch,
//                      or 'P' + a part count when it is larger than one
//                      etcd request may carry (then P/part/<n>/<i> hold it)
//   P/base             "<n> <parts> <bytes>": the latest base image, a
//                      SQLite file of the state after batch n, in
//                      P/basepart/<n>/<i>
//   P/leader           the leader's URL, on its lease (leader_election.h)
//
// Every replica keeps a local SQLite copy of the store (a cache: a temp
// file, no fsync): it loads the base image, then applies each batch in
// order, the leader as it writes them and the others as they read them
// (CatchUp). Reads (Load, the audit, the journal) come from that copy.
//
// Writes, only from the leader (StartWriting): a writer thread takes what is
// queued (group commit, at most kBatchBytes), writes it as the next batch in
// one transaction that holds only if P/leader still has the create revision
// this replica won it at (fencing: a deposed leader can never write), then
// applies it to its copy and answers the waiters. So one etcd write per
// batch, not per pod. Every `base_every` batches the leader copies its copy
// into a base image (a SQLite file, on the writer thread, so it is the
// state after exactly that batch); an imager thread uploads it on a
// connection of its own, fenced likewise, while the writer goes on with the
// next batches, then moves P/base to it, deletes the batches it covers and
// compacts etcd's history. So etcd holds a bounded amount, and writes pause
// only for the local copy, not for the upload.
//
// Errors:
// - A transaction whose fence fails: this replica was deposed. Sticky, as
//   a failed SQLite write is; the server then steps down and follows (a
//   new leader leads).
// - etcd unreachable or without quorum: the writer retries the same batch
//   (a retry rewrites the same key with the same bytes, so a write that did
//   land is not doubled). Meanwhile health() and every WaitDurable answer
//   Unavailable, so the API answers 503 and scheduling pauses; both resume
//   by themselves when etcd answers again.
#ifndef TIDAL_SERVER_ETCD_STORE_H_
#define TIDAL_SERVER_ETCD_STORE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/etcd_client.h"
#include "server/store.h"

namespace tidal::server {

struct EtcdStoreUrl {
  std::vector<std::string> endpoints;  // http://HOST:PORT
  std::string prefix = "/tidal";
  // Batches between base images (not in the URL: tests set it small).
  int64_t base_every = 2000;
};

// "etcd://h1:2379,h2:2379[?prefix=/tidal]".
StatusOr<EtcdStoreUrl> ParseEtcdStoreUrl(std::string_view url);

class EtcdStore final : public Store {
 public:
  // An etcd request carries at most 1.5 MiB by default, base64 in JSON:
  // 768 KiB of bytes leaves room.
  static constexpr size_t kBatchBytes = 768 << 10;

  // Connects and loads the latest base image and every batch after it.
  static StatusOr<std::unique_ptr<EtcdStore>> Open(const EtcdStoreUrl& url);
  ~EtcdStore() override;

  // Applies the batches written since the last call (a replica that does
  // not lead keeps a warm copy so). Reloads the base image when the
  // batches it needs were compacted away.
  Status CatchUp();
  // Leads from now on: catches up with everything written before, then
  // writes each queued mutation fenced on P/leader's `fence_revision`.
  Status StartWriting(int64_t fence_revision);
  // Called once, on the writer thread, when a write finds this replica
  // deposed, before any waiter is told.
  void OnDeposed(std::function<void()> callback);

  const std::string& leader_key() const { return leader_key_; }
  // P/leader: the election's key, which every write is fenced on.
  static std::string LeaderKey(const EtcdStoreUrl& url) { return url.prefix + "/leader"; }
  const EtcdStoreUrl& url() const { return url_; }
  int64_t applied_batch() const;
  // The batch the latest base image this leader wrote follows (or the one
  // it loaded), and a wait until no image is being uploaded (tests).
  int64_t base_batch() const;
  void WaitForImage();

  StatusOr<Recovered> Load() override;
  uint64_t Enqueue(Mutation m) override;
  Status WaitDurable(uint64_t seq) override;
  void WhenDurable(uint64_t seq, std::function<void(Status)> then) override;
  Status health() const override;
  bool in_outage() const override;
  StatusOr<std::vector<AuditRow>> QueryAudit(const AuditQuery& query) override;
  StatusOr<std::vector<JournalRow>> ReadJournal(int64_t after_seq, int limit) override;
  StatusOr<std::optional<SnapshotRow>> ReadSnapshot() override;
  StatusOr<std::optional<std::string>> ReadMeta(const std::string& key) override;
  uint64_t commits() const override { return commits_.load(); }
  uint64_t committed_mutations() const override { return committed_mutations_.load(); }

 private:
  EtcdStore(EtcdStoreUrl url, std::unique_ptr<EtcdClient> client, std::string cache_dir);

  std::string LogKey(int64_t n) const;
  std::string PartKey(const char* kind, int64_t n, int64_t i) const;
  // Reads a 'B'/'P' value (a part count means reading `kind` parts of n).
  StatusOr<std::string> ReadBlob(const std::string& value, const char* kind, int64_t n);
  Status ApplyToCache(std::vector<Mutation> batch);
  Status LoadBase(int64_t n, int64_t parts, int64_t bytes);
  Status WriteBatch(int64_t n, const std::string& blob);
  // The copy as one SQLite file's bytes (writer thread).
  StatusOr<std::string> CopyImage();
  // Hands the imager the image after batch n, unless one is in flight.
  void OfferImage(int64_t n);
  Status UploadImage(int64_t n, const std::string& image);
  void WriterLoop();
  void ImagerLoop();
  void Fail(const Status& cause);
  void SetTransient(const Status& cause);

  const EtcdStoreUrl url_;
  const std::string leader_key_;
  std::unique_ptr<EtcdClient> client_;
  std::unique_ptr<EtcdClient> image_client_;  // the imager's (StartWriting)
  const std::string cache_dir_;
  const std::string cache_path_;

  // The local copy; replaced whole when a base image is loaded.
  mutable std::shared_mutex cache_mu_;
  std::unique_ptr<Store> cache_;

  mutable std::mutex mu_;
  std::condition_variable queued_cv_;
  std::condition_variable durable_cv_;
  std::condition_variable image_cv_;
  // The image handed to the imager, and whether one is being uploaded.
  std::string image_;
  int64_t image_batch_ = 0;
  bool image_in_flight_ = false;
  std::deque<Mutation> queue_;
  std::multimap<uint64_t, std::function<void(Status)>> durable_waiters_;
  uint64_t enqueued_seq_ = 0;
  uint64_t durable_seq_ = 0;
  int64_t applied_batch_ = 0;  // the last batch in the local copy
  int64_t base_batch_ = 0;     // the batch the latest base image follows
  int64_t fence_revision_ = 0;
  bool writing_ = false;
  bool stopping_ = false;
  Status error_;      // sticky: deposed, or the local copy failed
  bool failing_ = false;  // Fail() began; error_ is set once on_deposed_ ran
  Status transient_;  // etcd does not answer; cleared by the next write
  std::function<void()> on_deposed_;
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> committed_mutations_{0};
  std::thread writer_;
  std::thread imager_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_ETCD_STORE_H_
