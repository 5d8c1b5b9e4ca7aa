// What a `tidal server` replica that does not lead serves (issue #13): reads
// of its warm copy of the store, for clients that accept them, and the way
// to the leader for everything else.
//
// A follower keeps a local copy of the store, caught up with etcd every
// 100 ms (EtcdStore::CatchUp). From that copy this class builds a **view**:
// a ControlPlane recovered exactly as a new leader would recover it, over a
// store that takes no writes, with no scheduling loop. The API's reads of
// committed state (workloads, queues, nodes, the loan calendar, the audit,
// reports, the dashboard) are answered from the current view, by the same
// code that answers them on the leader. A refresher thread builds a new view
// when the copy has advanced, at most once per `refresh` (recovery costs
// time in proportion to the state), and swaps it in; a request holds the
// view it started with until it is answered.
//
// Reads from a follower may be stale, by up to the copy's poll, the refresh
// period and one recovery. So a follower answers a read only when the
// client says it accepts that (the header `Tidal-Consistency: stale`, as
// etcd's serializable reads and Consul's `?stale` do); the answer then says
// how old it is (`Tidal-Replica: follower`, `Tidal-Stale-Ms`). Every other
// request, and every write, is answered 503 not_leader naming the leader
// (protocol/leader_redirect.h), so a client that must read its own writes
// goes there. What only the leader's memory holds is never answered here:
// explanations of the last pass, pod output, the agent protocol.
#ifndef TIDAL_SERVER_FOLLOWER_READS_H_
#define TIDAL_SERVER_FOLLOWER_READS_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/common/time.h"
#include "server/metrics.h"
#include "server/overload_guard.h"
#include "server/server_config.h"

namespace tidal::server {

class ControlPlane;
class EtcdStore;

// Who leads, as a follower sees it.
struct FollowerView {
  std::string leader_url;  // "" while no replica leads
  std::string problem;     // why the replica cannot follow ("" = it can)
};

class FollowerReads {
 public:
  // `leader` is asked per request. The refresher starts at once.
  FollowerReads(ServerConfig config, const Clock& clock, std::function<FollowerView()> leader,
                Duration refresh = std::chrono::seconds(1));
  ~FollowerReads();
  FollowerReads(const FollowerReads&) = delete;
  FollowerReads& operator=(const FollowerReads&) = delete;

  // Call after each catch-up of the copy (the follow loop's thread): the
  // refresher builds a new view when it is due. `copy` is the same store
  // every time, and must outlive this object.
  void CopyCaughtUp(EtcdStore& copy);
  // The current view; nullptr until the first is built.
  std::shared_ptr<ControlPlane> view() const;
  // How old the current view may be: the milliseconds since the copy it was
  // built from was last known current (it is while the copy stays at the
  // view's batch). -1 without a view.
  int64_t stale_ms() const;
  FollowerView leader() const { return leader_(); }
  // The follower's own API metrics and overload guard, which outlive its
  // views (a view's would start afresh at each refresh).
  Metrics& metrics() { return metrics_; }
  OverloadGuard& overload() { return overload_; }
  // The follower's own Prometheus text: its API and process metrics and the
  // tidal_replica_* gauges. The scheduling counters are the leader's.
  std::string MetricsText() const;
  // Waits until a view exists (tests); false after `timeout`.
  bool WaitForView(Duration timeout) const;

 private:
  void RefreshLoop();

  const ServerConfig config_;
  const Clock& clock_;
  const std::function<FollowerView()> leader_;
  const Duration refresh_;
  Metrics metrics_;
  OverloadGuard overload_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  EtcdStore* copy_ = nullptr;
  std::shared_ptr<ControlPlane> view_;
  int64_t view_batch_ = -1;          // the copy's batch the view was built from
  int64_t tried_batch_ = -1;         // the copy's batch the last build tried
  int64_t view_current_at_ms_ = 0;   // when that copy was last caught up
  int64_t caught_up_batch_ = -1;     // the copy's batch at its last catch-up
  int64_t caught_up_at_ms_ = 0;
  int64_t refreshes_ = 0;
  std::string last_error_;
  bool stopping_ = false;
  std::thread refresher_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_FOLLOWER_READS_H_
