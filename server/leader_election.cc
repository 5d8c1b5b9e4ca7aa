#include "server/leader_election.h"

namespace tidal::server {

LeaderElection::LeaderElection(std::unique_ptr<EtcdClient> client, std::string key, std::string my_url,
                               std::chrono::seconds ttl)
    : client_(std::move(client)), key_(std::move(key)), my_url_(std::move(my_url)), ttl_(ttl) {}

StatusOr<bool> LeaderElection::TryAcquire() {
  TIDAL_ASSIGN_OR_RETURN(EtcdRange current, client_->Range(key_, ""));
  if (!current.kvs.empty()) {
    const EtcdKeyValue& held = current.kvs[0];
    int64_t mine = 0;
    {
      std::lock_guard lock(mu_);
      leader_url_ = held.value;
      mine = lease_;
    }
    if (mine == 0 || held.lease != mine || held.value != my_url_) return false;
    // The key is still ours: this replica stepped down without knowing
    // whether its lease lived (etcd was electing a leader of its own, and
    // renews every lease when it has one). While the lease lives nobody
    // else can hold the key, so the leadership resumes under the same fence.
    TIDAL_ASSIGN_OR_RETURN(const int64_t ttl, client_->LeaseKeepAlive(mine));
    std::lock_guard lock(mu_);
    if (ttl <= 0) {
      lease_ = 0;  // gone: etcd deletes the key with it
      return false;
    }
    fence_revision_ = held.create_revision;
    return true;
  }
  TIDAL_ASSIGN_OR_RETURN(int64_t lease, client_->LeaseGrant(ttl_));
  TIDAL_ASSIGN_OR_RETURN(EtcdTxnResult r, client_->Txn({{key_, 0}}, {EtcdOp::Put(key_, my_url_, lease)},
                                                       {EtcdOp::Get(key_)}));
  std::lock_guard lock(mu_);
  if (!r.succeeded) {
    // Another replica was quicker; its lease is its own, ours goes unused.
    if (!r.ranges.empty() && !r.ranges[0].empty()) leader_url_ = r.ranges[0][0].value;
    (void)client_->LeaseRevoke(lease);
    return false;
  }
  lease_ = lease;
  fence_revision_ = r.revision;
  leader_url_ = my_url_;
  return true;
}

StatusOr<int64_t> LeaderElection::Renew() {
  int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    lease = lease_;
  }
  if (lease == 0) return int64_t{0};
  return client_->LeaseKeepAlive(lease);
}

Status LeaderElection::Resign() {
  int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    std::swap(lease, lease_);
  }
  return lease == 0 ? Status::Ok() : client_->LeaseRevoke(lease);
}

int64_t LeaderElection::fence_revision() const {
  std::lock_guard lock(mu_);
  return fence_revision_;
}

std::string LeaderElection::leader_url() const {
  std::lock_guard lock(mu_);
  return leader_url_;
}

}  // namespace tidal::server
