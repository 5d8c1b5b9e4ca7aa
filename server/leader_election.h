// Leader election among `tidal server` replicas on one etcd store (issue
// #13; docs/ARCHITECTURE.md "Replicated store").
//
// The leader is whoever holds the leader key, on an etcd lease of `ttl`:
// - TryAcquire reads the key; when it is gone, it grants a lease and puts
//   the key in a transaction that holds only while the key does not exist,
//   so at most one replica wins. The winner's fence is the revision that
//   created the key: the store makes every write conditional on it
//   (EtcdStore::StartWriting), so a deposed leader can never write, however
//   late its requests arrive.
// - The leader renews its lease every ttl/4. A leader that dies stops
//   renewing; etcd deletes the key when the lease runs out, and the next
//   replica to look wins. A leader that cannot renew within `ttl` (cut off
//   from etcd) must assume it was deposed and stop.
// - A replica that stopped so but still holds the key on its lease when
//   etcd answers again leads again at once, under the same fence: etcd
//   renews every lease when it elects a leader of its own, so losing etcd's
//   Raft leader (1 to 2 s without one at etcd's defaults, longer than a
//   2 s lease can always ride out) pauses the leader but does not move it.
// - A leader that stops cleanly revokes its lease (Resign), so the key goes
//   at once and failover does not wait for the TTL.
#ifndef TIDAL_SERVER_LEADER_ELECTION_H_
#define TIDAL_SERVER_LEADER_ELECTION_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "server/etcd_client.h"

namespace tidal::server {

class LeaderElection {
 public:
  // The default TTL bounds failover after a crash: the lease runs out at
  // most `ttl` after the last renewal (etcd checks every 500 ms).
  static constexpr std::chrono::seconds kDefaultTtl{2};

  LeaderElection(std::unique_ptr<EtcdClient> client, std::string key, std::string my_url,
                 std::chrono::seconds ttl = kDefaultTtl);

  // True when this replica now leads (fence_revision() is set); false when
  // another does (leader_url() names it).
  StatusOr<bool> TryAcquire();
  // The lease's remaining seconds; 0 when it is gone (deposed).
  StatusOr<int64_t> Renew();
  Status Resign();

  int64_t fence_revision() const;
  // The leader's URL as last seen ("" = none seen yet).
  std::string leader_url() const;
  std::chrono::seconds ttl() const { return ttl_; }

 private:
  std::unique_ptr<EtcdClient> client_;
  const std::string key_;
  const std::string my_url_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  int64_t lease_ = 0;
  int64_t fence_revision_ = 0;
  std::string leader_url_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_LEADER_ELECTION_H_
