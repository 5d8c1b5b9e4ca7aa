// Long-polls on a node's pod assignments: `GET /v1/agent/nodes/{node}/pods
// ?version=V&wait_ms=N` answers as soon as the node's assignments differ
// from version V, or after N ms with them unchanged. An agent keeps one such
// request open, so a placement or a stop notice reaches it within
// milliseconds instead of at its next heartbeat (issue #12), and the
// heartbeat is only a lease.
//
// How it works:
// - Each node has a version: this server's boot id and a counter, bumped
//   (`Changed`) whenever the control plane commits a change to a workload
//   with pods on the node, or adds or removes such pods. A bump may be
//   spurious (the pods the agent sees are the same); it is never missed,
//   because the bump and the change happen under the control plane's lock.
// - `Park` compares the caller's version with the node's, under the same
//   lock: different, and the caller answers at once; the same, and the
//   waiter is parked until a bump or its deadline.
// - A thread of its own runs woken waiters' continuations, which compute
//   the reply (waiting until the state it shows is durable) and send it.
//   Parked waiters hold no HTTP thread: the HTTP layer's asynchronous
//   routes hand over a responder instead.
// - Waiters are bounded per node (`kMaxWaitersPerNode`; the oldest is
//   answered when a new one comes, e.g. a reconnecting agent), so a hostile
//   node credential cannot park unbounded memory.
#ifndef TIDAL_SERVER_NODE_PODS_WATCH_H_
#define TIDAL_SERVER_NODE_PODS_WATCH_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidal::server {

class NodePodsWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // Computes and sends one reply; run on the watch's thread.
  using Continuation = std::function<void()>;
  static constexpr size_t kMaxWaitersPerNode = 4;

  // `boot_id` makes versions from an earlier server process never match.
  explicit NodePodsWatch(int64_t boot_id);
  // Runs every parked continuation (the replies go out unchanged) and stops
  // the thread.
  ~NodePodsWatch();
  NodePodsWatch(const NodePodsWatch&) = delete;
  NodePodsWatch& operator=(const NodePodsWatch&) = delete;

  std::string Version(uint32_t node) const;
  // The node's assignments may have changed: bumps its version and wakes
  // its waiters.
  void Changed(uint32_t node);
  // False (and nothing parked) when `known_version` is not the node's
  // version: the caller answers at once.
  bool Park(uint32_t node, const std::string& known_version, Clock::time_point deadline, Continuation then);
  size_t parked() const;
  // Answers every parked waiter now and returns once their continuations
  // have run.
  void AnswerAll();

 private:
  struct Waiter {
    Clock::time_point deadline;
    Continuation then;
  };
  std::string VersionLocked(uint32_t node) const;
  void Run();

  const int64_t boot_id_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;  // nothing ready and nothing running
  bool running_ = false;
  std::vector<uint64_t> versions_;                    // by node
  std::map<uint32_t, std::vector<Waiter>> parked_;    // by node
  std::vector<Continuation> ready_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_NODE_PODS_WATCH_H_
