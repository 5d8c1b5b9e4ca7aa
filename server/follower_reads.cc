#include "server/follower_reads.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "server/control_plane.h"
#include "server/etcd_store.h"
#include "server/metrics.h"

namespace tidal::server {
namespace {

// The store under a view: the replica's copy, read as it is, and no
// writes. What recovery enqueues (its server_start record, the fresh
// leases) is dropped: only the leader writes. Any write that reached it
// anyway would be refused, since health() says this replica does not lead.
class CopyReader final : public Store {
 public:
  explicit CopyReader(EtcdStore& copy) : copy_(copy) {}
  StatusOr<Recovered> Load() override { return copy_.Load(); }
  uint64_t Enqueue(Mutation) override { return ++dropped_; }
  Status WaitDurable(uint64_t) override { return Status::Ok(); }
  Status health() const override { return Unavailable("this replica does not lead; only the leader writes"); }
  // Not a failure that a restart would mend.
  bool in_outage() const override { return true; }
  StatusOr<std::vector<AuditRow>> QueryAudit(const AuditQuery& query) override { return copy_.QueryAudit(query); }
  StatusOr<std::vector<JournalRow>> ReadJournal(int64_t after_seq, int limit) override {
    return copy_.ReadJournal(after_seq, limit);
  }
  StatusOr<std::optional<SnapshotRow>> ReadSnapshot() override { return copy_.ReadSnapshot(); }
  StatusOr<std::optional<std::string>> ReadMeta(const std::string& key) override { return copy_.ReadMeta(key); }
  uint64_t commits() const override { return 0; }
  uint64_t committed_mutations() const override { return 0; }

 private:
  EtcdStore& copy_;
  uint64_t dropped_ = 0;
};

}  // namespace

FollowerReads::FollowerReads(ServerConfig config, const Clock& clock, std::function<FollowerView()> leader,
                             Duration refresh)
    : config_(std::move(config)),
      clock_(clock),
      leader_(std::move(leader)),
      refresh_(refresh),
      overload_(OverloadLimitsFor(config_)) {
  DefineApiMetrics(metrics_);
  refresher_ = std::thread([this] { RefreshLoop(); });
}

FollowerReads::~FollowerReads() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  refresher_.join();
}

void FollowerReads::CopyCaughtUp(EtcdStore& copy) {
  const int64_t batch = copy.applied_batch();
  {
    std::lock_guard lock(mu_);
    copy_ = &copy;
    caught_up_batch_ = batch;
    caught_up_at_ms_ = ToMillis(clock_.Now());
  }
  cv_.notify_all();
}

std::shared_ptr<ControlPlane> FollowerReads::view() const {
  std::lock_guard lock(mu_);
  return view_;
}

int64_t FollowerReads::stale_ms() const {
  std::lock_guard lock(mu_);
  if (!view_) return -1;
  const int64_t current_at_ms = caught_up_batch_ == view_batch_ ? caught_up_at_ms_ : view_current_at_ms_;
  return std::max<int64_t>(0, ToMillis(clock_.Now()) - current_at_ms);
}

bool FollowerReads::WaitForView(Duration timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return view_ != nullptr; });
}

void FollowerReads::RefreshLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    // A new view when the copy moved past the current one's batch; the
    // first as soon as the copy has been caught up once.
    cv_.wait(lock, [this] { return stopping_ || (caught_up_batch_ >= 0 && caught_up_batch_ != tried_batch_); });
    if (stopping_) return;
    const int64_t batch = caught_up_batch_;
    const int64_t current_at_ms = caught_up_at_ms_;
    EtcdStore& copy = *copy_;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    auto view = std::make_shared<ControlPlane>(config_, std::make_unique<CopyReader>(copy), clock_);
    Status built = view->Recover(RecoverAs::kReadOnlyView);
    const auto took = std::chrono::steady_clock::now() - start;
    lock.lock();
    // Tried: the same copy fails the same way, so the next try waits until
    // the copy moves.
    tried_batch_ = batch;
    if (built.ok()) {
      // The old view goes with the last request that holds it, or below,
      // outside the lock.
      view_.swap(view);
      view_batch_ = batch;
      view_current_at_ms_ = current_at_ms;
      ++refreshes_;
      last_error_.clear();
      cv_.notify_all();
    } else if (built.message() != last_error_) {
      std::fprintf(stderr, "tidal server: following: cannot build a read view of the copy: %s\n",
                   built.message().c_str());
      last_error_ = built.message();
    }
    lock.unlock();
    view.reset();
    lock.lock();
    // At most one recovery per refresh period, however fast the log moves.
    cv_.wait_for(lock, refresh_ > took ? refresh_ - took : Duration(0), [this] { return stopping_; });
    if (stopping_) return;
  }
}

std::string FollowerReads::MetricsText() const {
  GaugeWriter g;
  g.Family("tidal_replica_leader", "1 on the replica that leads, 0 on a follower.");
  g.Sample("tidal_replica_leader", {}, 0);
  const int64_t stale = stale_ms();
  {
    std::lock_guard lock(mu_);
    g.Family("tidal_replica_applied_batch", "The last store batch in this replica's copy.");
    g.Sample("tidal_replica_applied_batch", {}, static_cast<double>(caught_up_batch_));
    g.Family("tidal_replica_view_refreshes_total", "Read views this follower built from its copy.",
             prometheus::MetricType::Counter);
    g.Sample("tidal_replica_view_refreshes_total", {}, static_cast<double>(refreshes_));
  }
  g.Family("tidal_replica_staleness_seconds",
           "How old this follower's reads may be: seconds since the copy its read view was built from was current.");
  if (stale >= 0) g.Sample("tidal_replica_staleness_seconds", {}, stale / 1000.0);
  return metrics_.Render() + g.Render();
}

}  // namespace tidal::server
