#include "server/node_pods_watch.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace tidal::server {

NodePodsWatch::NodePodsWatch(int64_t boot_id) : boot_id_(boot_id), thread_([this] { Run(); }) {}

NodePodsWatch::~NodePodsWatch() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string NodePodsWatch::VersionLocked(uint32_t node) const {
  return fmt::format("{}-{}", boot_id_, node < versions_.size() ? versions_[node] : 0);
}

std::string NodePodsWatch::Version(uint32_t node) const {
  std::lock_guard lock(mu_);
  return VersionLocked(node);
}

void NodePodsWatch::Changed(uint32_t node) {
  std::lock_guard lock(mu_);
  if (node >= versions_.size()) versions_.resize(node + 1, 0);
  ++versions_[node];
  auto it = parked_.find(node);
  if (it == parked_.end()) return;
  for (Waiter& w : it->second) ready_.push_back(std::move(w.then));
  parked_.erase(it);
  wake_.notify_one();
}

bool NodePodsWatch::Park(uint32_t node, const std::string& known_version, Clock::time_point deadline,
                         Continuation then) {
  std::lock_guard lock(mu_);
  if (known_version != VersionLocked(node)) return false;
  std::vector<Waiter>& waiters = parked_[node];
  if (waiters.size() >= kMaxWaitersPerNode) {
    ready_.push_back(std::move(waiters.front().then));
    waiters.erase(waiters.begin());
  }
  waiters.push_back({deadline, std::move(then)});
  wake_.notify_one();  // the thread's next deadline may now be earlier
  return true;
}

size_t NodePodsWatch::parked() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [node, waiters] : parked_) n += waiters.size();
  return n;
}

void NodePodsWatch::AnswerAll() {
  std::unique_lock lock(mu_);
  for (auto& [node, waiters] : parked_) {
    for (Waiter& w : waiters) ready_.push_back(std::move(w.then));
  }
  parked_.clear();
  wake_.notify_one();
  idle_.wait(lock, [this] { return ready_.empty() && !running_; });
}

void NodePodsWatch::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    // Due waiters join the ready ones; the next deadline bounds the wait.
    const auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (auto it = parked_.begin(); it != parked_.end();) {
      auto& waiters = it->second;
      for (auto w = waiters.begin(); w != waiters.end();) {
        if (w->deadline <= now || stopping_) {
          ready_.push_back(std::move(w->then));
          w = waiters.erase(w);
        } else {
          next = std::min(next, w->deadline);
          ++w;
        }
      }
      it = waiters.empty() ? parked_.erase(it) : std::next(it);
    }
    if (!ready_.empty()) {
      std::vector<Continuation> run = std::move(ready_);
      ready_.clear();
      running_ = true;
      lock.unlock();
      for (Continuation& c : run) c();
      lock.lock();
      running_ = false;
      continue;
    }
    idle_.notify_all();
    if (stopping_) return;
    if (next == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
  }
}

}  // namespace tidal::server
