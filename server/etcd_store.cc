#include "server/etcd_store.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "server/mutation_codec.h"

namespace tidal::server {

namespace fs = std::filesystem;

namespace {

constexpr std::chrono::milliseconds kRequestTimeout{3000};
constexpr int64_t kLogPage = 16;

Status Deposed(const std::string& key, int64_t revision) {
  return FailedPrecondition(fmt::format(
      "deposed: {} is no longer the key this server created at revision {} (another replica leads); "
      "this server writes nothing more",
      key, revision));
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable(fmt::format("etcd store: cannot read {}", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

StatusOr<EtcdStoreUrl> ParseEtcdStoreUrl(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (!url.starts_with(kScheme)) {
    return InvalidArgument(fmt::format("--store: expected etcd://HOST:PORT[,HOST:PORT...][?prefix=/P], got \"{}\"",
                                       url));
  }
  std::string_view rest = url.substr(kScheme.size());
  EtcdStoreUrl out;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (!query.starts_with("prefix=")) {
      return InvalidArgument(fmt::format("--store: unknown option \"{}\" (the only one is prefix=)", query));
    }
    out.prefix = std::string(query.substr(7));
    if (!out.prefix.starts_with('/') || out.prefix.size() < 2 || out.prefix.size() > 128 || out.prefix.ends_with('/') ||
        out.prefix.find_first_of(" ?&,") != std::string::npos) {
      return InvalidArgument(fmt::format("--store: prefix \"{}\": expected /NAME (at most 128 characters)", out.prefix));
    }
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find(',', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view host = rest.substr(start, end - start);
    const size_t colon = host.rfind(':');
    if (host.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == host.size() ||
        host.find('/') != std::string_view::npos) {
      return InvalidArgument(fmt::format("--store: etcd member \"{}\": expected HOST:PORT", host));
    }
    out.endpoints.push_back("http://" + std::string(host));
    if (out.endpoints.size() > 16) return InvalidArgument("--store: more than 16 etcd members");
    start = end + 1;
  }
  return out;
}

EtcdStore::EtcdStore(EtcdStoreUrl url, std::unique_ptr<EtcdClient> client, std::string cache_dir)
    : url_(std::move(url)),
      leader_key_(LeaderKey(url_)),
      client_(std::move(client)),
      cache_dir_(std::move(cache_dir)),
      cache_path_(cache_dir_ + "/cache.db") {}

EtcdStore::~EtcdStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  queued_cv_.notify_all();
  image_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (imager_.joinable()) imager_.join();
  {
    std::unique_lock lock(cache_mu_);
    cache_.reset();
  }
  std::error_code ec;
  fs::remove_all(cache_dir_, ec);
}

StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Open(const EtcdStoreUrl& url) {
  TIDAL_ASSIGN_OR_RETURN(auto client, EtcdClient::Create(url.endpoints, kRequestTimeout));
  std::string dir = (fs::temp_directory_path() / "tidal-etcd-cache.XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    return Unavailable(fmt::format("etcd store: cannot make a cache directory {}", dir));
  }
  std::unique_ptr<EtcdStore> store(new EtcdStore(url, std::move(client), dir));
  TIDAL_ASSIGN_OR_RETURN(store->cache_, OpenSqliteStore(store->cache_path_, SqliteDurability::kCache));
  TIDAL_RETURN_IF_ERROR(store->CatchUp());
  return store;
}

std::string EtcdStore::LogKey(int64_t n) const { return fmt::format("{}/log/{:020d}", url_.prefix, n); }

std::string EtcdStore::PartKey(const char* kind, int64_t n, int64_t i) const {
  return fmt::format("{}/{}/{:020d}/{:06d}", url_.prefix, kind, n, i);
}

int64_t EtcdStore::applied_batch() const {
  std::lock_guard lock(mu_);
  return applied_batch_;
}

StatusOr<std::string> EtcdStore::ReadBlob(const std::string& value, const char* kind, int64_t n) {
  if (value.starts_with('B')) return value.substr(1);
  if (!value.starts_with('P')) return Internal(fmt::format("etcd store: batch {} is not a batch (a foreign key?)", n));
  const int64_t parts = std::strtoll(value.c_str() + 1, nullptr, 10);
  const std::string first = PartKey(kind, n, 0);
  TIDAL_ASSIGN_OR_RETURN(EtcdRange range, client_->Range(first, PartKey(kind, n, parts)));
  if (static_cast<int64_t>(range.kvs.size()) != parts) {
    return Internal(fmt::format("etcd store: batch {} has {} of its {} parts", n, range.kvs.size(), parts));
  }
  std::string blob;
  for (EtcdKeyValue& kv : range.kvs) blob += kv.value;
  return blob;
}

Status EtcdStore::ApplyToCache(std::vector<Mutation> batch) {
  std::shared_lock lock(cache_mu_);
  uint64_t last = 0;
  for (Mutation& m : batch) last = cache_->Enqueue(std::move(m));
  return last == 0 ? Status::Ok() : cache_->WaitDurable(last);
}

Status EtcdStore::LoadBase(int64_t n, int64_t parts, int64_t bytes) {
  std::string image;
  image.reserve(bytes);
  TIDAL_ASSIGN_OR_RETURN(EtcdRange range, client_->Range(PartKey("basepart", n, 0), PartKey("basepart", n, parts)));
  for (EtcdKeyValue& kv : range.kvs) image += kv.value;
  if (static_cast<int64_t>(range.kvs.size()) != parts || static_cast<int64_t>(image.size()) != bytes) {
    return Unavailable(fmt::format("etcd store: base image {} has {} of {} parts, {} of {} bytes (replaced "
                                   "meanwhile? the next catch-up reads the newer one)",
                                   n, range.kvs.size(), parts, image.size(), bytes));
  }
  const std::string tmp = cache_dir_ + "/base.db";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    if (!out) return Unavailable(fmt::format("etcd store: cannot write {}", tmp));
  }
  std::unique_lock lock(cache_mu_);
  cache_.reset();
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(cache_path_ + suffix, ec);
  fs::rename(tmp, cache_path_, ec);
  if (ec) return Unavailable(fmt::format("etcd store: cannot move the base image into place: {}", ec.message()));
  TIDAL_ASSIGN_OR_RETURN(cache_, OpenSqliteStore(cache_path_, SqliteDurability::kCache));
  std::lock_guard state(mu_);
  applied_batch_ = n;
  base_batch_ = n;
  return Status::Ok();
}

Status EtcdStore::CatchUp() {
  TIDAL_ASSIGN_OR_RETURN(EtcdRange base, client_->Range(url_.prefix + "/base", ""));
  if (!base.kvs.empty()) {
    int64_t n = 0, parts = 0, bytes = 0;
    if (std::sscanf(base.kvs[0].value.c_str(), "%ld %ld %ld", &n, &parts, &bytes) != 3 || n < 1 || parts < 1 ||
        bytes < 1) {
      return Internal(fmt::format("etcd store: {}/base is damaged: \"{}\"", url_.prefix, base.kvs[0].value));
    }
    // The batches a base image covers are deleted with its writing: a copy
    // behind it starts again from it.
    if (n > applied_batch()) TIDAL_RETURN_IF_ERROR(LoadBase(n, parts, bytes));
  }
  while (true) {
    const int64_t next = applied_batch() + 1;
    TIDAL_ASSIGN_OR_RETURN(EtcdRange range, client_->Range(LogKey(next), PrefixEnd(url_.prefix + "/log/"), kLogPage));
    int64_t n = next;
    for (const EtcdKeyValue& kv : range.kvs) {
      if (kv.key != LogKey(n)) {
        return Unavailable(fmt::format("etcd store: batch {} is missing before {} (compacted meanwhile? the next "
                                       "catch-up starts from the newer base image)",
                                       n, kv.key));
      }
      TIDAL_ASSIGN_OR_RETURN(std::string blob, ReadBlob(kv.value, "part", n));
      TIDAL_ASSIGN_OR_RETURN(std::vector<Mutation> batch, DecodeMutations(blob));
      TIDAL_RETURN_IF_ERROR(ApplyToCache(std::move(batch)));
      std::lock_guard lock(mu_);
      applied_batch_ = n++;
    }
    if (!range.more) return Status::Ok();
  }
}

Status EtcdStore::StartWriting(int64_t fence_revision) {
  // Every batch the last leader wrote is in etcd before this replica's
  // election (its writes after it fail their fence), so this catch-up
  // sees the whole history.
  TIDAL_RETURN_IF_ERROR(CatchUp());
  // Base images go up on a connection of their own, beside the batches.
  TIDAL_ASSIGN_OR_RETURN(image_client_, EtcdClient::Create(url_.endpoints, kRequestTimeout));
  std::lock_guard lock(mu_);
  if (writing_) return FailedPrecondition("etcd store: already writing");
  fence_revision_ = fence_revision;
  writing_ = true;
  writer_ = std::thread([this] { WriterLoop(); });
  imager_ = std::thread([this] { ImagerLoop(); });
  return Status::Ok();
}

void EtcdStore::OnDeposed(std::function<void()> callback) {
  std::lock_guard lock(mu_);
  on_deposed_ = std::move(callback);
}

Status EtcdStore::WriteBatch(int64_t n, const std::string& blob) {
  const std::vector<EtcdCompare> fence = {{leader_key_, fence_revision_}};
  std::string value;
  if (blob.size() <= kBatchBytes) {
    value = "B" + blob;
  } else {
    const int64_t parts = static_cast<int64_t>((blob.size() + kBatchBytes - 1) / kBatchBytes);
    for (int64_t i = 0; i < parts; ++i) {
      TIDAL_ASSIGN_OR_RETURN(EtcdTxnResult r,
                             client_->Txn(fence, {EtcdOp::Put(PartKey("part", n, i), blob.substr(i * kBatchBytes, kBatchBytes))}, {}));
      if (!r.succeeded) return Deposed(leader_key_, fence_revision_);
    }
    value = "P" + std::to_string(parts);
  }
  TIDAL_ASSIGN_OR_RETURN(EtcdTxnResult r, client_->Txn(fence, {EtcdOp::Put(LogKey(n), std::move(value))}, {}));
  if (!r.succeeded) return Deposed(leader_key_, fence_revision_);
  return Status::Ok();
}

StatusOr<std::string> EtcdStore::CopyImage() {
  const std::string tmp = cache_dir_ + "/image.db";
  std::error_code ec;
  fs::remove(tmp, ec);
  {
    // The writer thread is the copy's only writer, so the copy holds
    // exactly batch n's state while this runs.
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(cache_path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return Unavailable(fmt::format("etcd store: cannot open the local copy {}", cache_path_));
    }
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, "VACUUM INTO ?1", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, tmp.c_str(), -1, SQLITE_TRANSIENT);
      rc = sqlite3_step(stmt);
    }
    const std::string message = sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    if (rc != SQLITE_DONE) return Unavailable(fmt::format("etcd store: cannot copy the local copy: {}", message));
  }
  StatusOr<std::string> image = ReadFile(tmp);
  fs::remove(tmp, ec);
  return image;
}

Status EtcdStore::UploadImage(int64_t n, const std::string& image) {
  const std::vector<EtcdCompare> fence = {{leader_key_, fence_revision_}};
  const int64_t parts = static_cast<int64_t>((image.size() + kBatchBytes - 1) / kBatchBytes);
  for (int64_t i = 0; i < parts; ++i) {
    TIDAL_ASSIGN_OR_RETURN(EtcdTxnResult r, image_client_->Txn(fence, {EtcdOp::Put(PartKey("basepart", n, i), image.substr(i * kBatchBytes, kBatchBytes))}, {}));
    if (!r.succeeded) return Deposed(leader_key_, fence_revision_);
  }
  // One transaction: the manifest moves to the new image and the batches
  // it covers go, so a reader sees either the old image and every batch
  // after it, or the new one and its tail.
  const std::string p = url_.prefix;
  TIDAL_ASSIGN_OR_RETURN(
      EtcdTxnResult r,
      image_client_->Txn(fence,
                   {EtcdOp::Put(p + "/base", fmt::format("{} {} {}", n, parts, image.size())),
                    EtcdOp::DeleteRange(p + "/log/", LogKey(n + 1)),
                    EtcdOp::DeleteRange(p + "/part/", PartKey("part", n + 1, 0)),
                    EtcdOp::DeleteRange(p + "/basepart/", PartKey("basepart", n, 0))},
                   {}));
  if (!r.succeeded) return Deposed(leader_key_, fence_revision_);
  // The deleted batches stay in etcd's history until it is compacted.
  if (Status compacted = image_client_->Compact(r.revision); !compacted.ok()) {
    std::fprintf(stderr, "tidal: etcd store: compaction to revision %ld failed (retried with the next image): %s\n",
                 static_cast<long>(r.revision), compacted.message().c_str());
  }
  return Status::Ok();
}

void EtcdStore::WriterLoop() {
  auto backoff = std::chrono::milliseconds(50);
  while (true) {
    std::vector<Mutation> taken;
    {
      std::unique_lock lock(mu_);
      queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      while (!queue_.empty() && taken.size() < 4096) {
        taken.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<std::string> encoded;
    encoded.reserve(taken.size());
    for (const Mutation& m : taken) encoded.push_back(EncodeMutation(m));
    size_t begin = 0;
    while (begin < taken.size()) {
      // One batch: as many mutations as fit one request (at least one).
      size_t end = begin + 1, bytes = encoded[begin].size();
      while (end < taken.size() && bytes + encoded[end].size() + 1 <= kBatchBytes) bytes += encoded[end++].size() + 1;
      const std::string blob = JoinMutations({encoded.begin() + begin, encoded.begin() + end});
      int64_t n = 0;
      {
        std::lock_guard lock(mu_);
        if (!error_.ok()) break;  // failed: what was taken is dropped, as a failed SQLite batch is
        n = applied_batch_ + 1;
      }
      Status written = WriteBatch(n, blob);
      while (written.code() == StatusCode::kUnavailable) {
        SetTransient(written);
        {
          std::unique_lock lock(mu_);
          if (queued_cv_.wait_for(lock, backoff, [&] { return stopping_; })) break;
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
        written = WriteBatch(n, blob);
      }
      backoff = std::chrono::milliseconds(50);
      if (!written.ok()) {
        Fail(written);
        break;
      }
      std::vector<Mutation> batch(std::make_move_iterator(taken.begin() + begin),
                                  std::make_move_iterator(taken.begin() + end));
      if (Status applied = ApplyToCache(std::move(batch)); !applied.ok()) {
        Fail(Internal("etcd store: the local copy failed: " + applied.message()));
        break;
      }
      commits_.fetch_add(1);
      committed_mutations_.fetch_add(end - begin);
      std::vector<std::function<void(Status)>> due;
      int64_t base_batch = 0;
      {
        std::lock_guard lock(mu_);
        applied_batch_ = n;
        durable_seq_ += end - begin;
        transient_ = Status::Ok();
        auto last = durable_waiters_.upper_bound(durable_seq_);
        for (auto it = durable_waiters_.begin(); it != last; ++it) due.push_back(std::move(it->second));
        durable_waiters_.erase(durable_waiters_.begin(), last);
        base_batch = base_batch_;
      }
      durable_cv_.notify_all();
      for (auto& then : due) then(Status::Ok());
      begin = end;
      if (n - base_batch >= url_.base_every) OfferImage(n);
    }
  }
}

namespace {

// A failed base image costs only space: the next batch offers another.
void ImageNotWritten(int64_t n, const Status& why) {
  std::fprintf(stderr, "tidal: etcd store: base image after batch %ld not written (tried again later): %s\n",
               static_cast<long>(n), why.message().c_str());
}

}  // namespace

void EtcdStore::OfferImage(int64_t n) {
  {
    std::lock_guard lock(mu_);
    if (image_in_flight_) return;  // the next batch offers again
  }
  // On the writer thread, the copy's only writer: it holds exactly batch
  // n's state while it is copied.
  StatusOr<std::string> image = CopyImage();
  if (!image.ok()) return ImageNotWritten(n, image.status());
  {
    std::lock_guard lock(mu_);
    image_in_flight_ = true;
    image_batch_ = n;
    image_ = std::move(image).value();
  }
  image_cv_.notify_all();
}

void EtcdStore::ImagerLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    image_cv_.wait(lock, [this] { return stopping_ || !image_.empty(); });
    if (stopping_) return;
    const int64_t n = image_batch_;
    const std::string image = std::move(image_);
    image_.clear();
    lock.unlock();
    // A fence that fails here fails the writer's next batch too, which
    // steps the server down; a base image only saves space.
    Status uploaded = UploadImage(n, image);
    if (!uploaded.ok()) ImageNotWritten(n, uploaded);
    lock.lock();
    if (uploaded.ok()) base_batch_ = n;
    image_in_flight_ = false;
    image_cv_.notify_all();
  }
}

void EtcdStore::WaitForImage() {
  std::unique_lock lock(mu_);
  image_cv_.wait(lock, [this] { return !image_in_flight_ || stopping_; });
}

int64_t EtcdStore::base_batch() const {
  std::lock_guard lock(mu_);
  return base_batch_;
}

void EtcdStore::SetTransient(const Status& cause) {
  std::multimap<uint64_t, std::function<void(Status)>> waiters;
  {
    std::lock_guard lock(mu_);
    if (transient_.ok()) std::fprintf(stderr, "tidal: etcd store: %s; writes wait for etcd\n", cause.message().c_str());
    transient_ = Unavailable(fmt::format("etcd does not answer; writes resume when it does ({})", cause.message()));
    waiters.swap(durable_waiters_);
  }
  durable_cv_.notify_all();
  for (auto& [seq, then] : waiters) then(transient_);
}

void EtcdStore::Fail(const Status& cause) {
  std::multimap<uint64_t, std::function<void(Status)>> waiters;
  std::function<void()> on_deposed;
  {
    std::lock_guard lock(mu_);
    if (!error_.ok() || failing_) return;
    failing_ = true;
    if (cause.code() == StatusCode::kFailedPrecondition) on_deposed = on_deposed_;
  }
  std::fprintf(stderr, "tidal: etcd store: %s\n", cause.message().c_str());
  // Before any waiter learns of the failure, so that whoever sees a write
  // refused as deposed also sees the server stepping down.
  if (on_deposed) on_deposed();
  {
    std::lock_guard lock(mu_);
    error_ = cause;
    queue_.clear();
    waiters.swap(durable_waiters_);
  }
  durable_cv_.notify_all();
  for (auto& [seq, then] : waiters) then(cause);
}

StatusOr<Recovered> EtcdStore::Load() {
  std::shared_lock lock(cache_mu_);
  return cache_->Load();
}

uint64_t EtcdStore::Enqueue(Mutation m) {
  std::lock_guard lock(mu_);
  const uint64_t seq = ++enqueued_seq_;
  if (!error_.ok() || !writing_) return seq;
  queue_.push_back(std::move(m));
  queued_cv_.notify_one();
  return seq;
}

Status EtcdStore::WaitDurable(uint64_t seq) {
  std::unique_lock lock(mu_);
  durable_cv_.wait(lock, [&] { return durable_seq_ >= seq || !error_.ok() || !transient_.ok() || !writing_; });
  if (durable_seq_ >= seq) return Status::Ok();
  if (!error_.ok()) return error_;
  if (!transient_.ok()) return transient_;
  return FailedPrecondition("etcd store: this replica does not lead; it writes nothing");
}

void EtcdStore::WhenDurable(uint64_t seq, std::function<void(Status)> then) {
  std::unique_lock lock(mu_);
  if (durable_seq_ >= seq || !error_.ok() || !transient_.ok() || !writing_) {
    lock.unlock();
    return then(WaitDurable(seq));
  }
  durable_waiters_.emplace(seq, std::move(then));
}

bool EtcdStore::in_outage() const {
  std::lock_guard lock(mu_);
  return error_.ok() && !transient_.ok();
}

Status EtcdStore::health() const {
  std::lock_guard lock(mu_);
  if (!error_.ok()) return error_;
  if (!transient_.ok()) return transient_;
  if (!writing_) return FailedPrecondition("etcd store: this replica does not lead; it writes nothing");
  return Status::Ok();
}

StatusOr<std::vector<AuditRow>> EtcdStore::QueryAudit(const AuditQuery& query) {
  std::shared_lock lock(cache_mu_);
  return cache_->QueryAudit(query);
}

StatusOr<std::vector<JournalRow>> EtcdStore::ReadJournal(int64_t after_seq, int limit) {
  std::shared_lock lock(cache_mu_);
  return cache_->ReadJournal(after_seq, limit);
}

StatusOr<std::optional<SnapshotRow>> EtcdStore::ReadSnapshot() {
  std::shared_lock lock(cache_mu_);
  return cache_->ReadSnapshot();
}

StatusOr<std::optional<std::string>> EtcdStore::ReadMeta(const std::string& key) {
  std::shared_lock lock(cache_mu_);
  return cache_->ReadMeta(key);
}

}  // namespace tidal::server
