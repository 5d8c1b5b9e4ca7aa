#include "server/overload_guard.h"

#include <algorithm>
#include <cmath>

namespace tidal::server {

std::string_view RejectionName(Rejection r) {
  switch (r) {
    case Rejection::kFairShare: return "fair_share";
    case Rejection::kSubmitRate: return "submit_rate";
    case Rejection::kUnfinishedCap: return "unfinished_cap";
    case Rejection::kAuthFailures: return "auth_failures";
    case Rejection::kBodyTooLarge: return "body_too_large";
    case Rejection::kHeaderTooLarge: return "header_too_large";
    case Rejection::kMalformed: return "malformed";
    case Rejection::kReadTimeout: return "read_timeout";
    case Rejection::kConnectionLimit: return "connections";
    case Rejection::kInFlightLimit: return "in_flight";
  }
  return "unknown";
}

OverloadGuard::OverloadGuard(OverloadLimits limits) : limits_(limits) {}

bool OverloadGuard::TryEnter(const std::string& tenant) {
  std::lock_guard lock(mu_);
  // Contended from three quarters of the seats on: below that, fairness
  // would only turn work away that the server has room for.
  const bool contended = taken_ * 4 >= limits_.seats * 3;
  auto it = held_.find(tenant);
  const int mine = it == held_.end() ? 0 : it->second;
  if (contended) {
    const int holders = static_cast<int>(held_.size()) + (mine == 0 ? 1 : 0);
    const int share = std::max(1, limits_.seats / holders);
    if (mine >= share) return false;
  }
  ++taken_;
  ++held_[tenant];
  return true;
}

void OverloadGuard::Leave(const std::string& tenant) {
  std::lock_guard lock(mu_);
  auto it = held_.find(tenant);
  if (it == held_.end()) return;  // unmatched: nothing to give back
  --taken_;
  if (--it->second == 0) held_.erase(it);
}

bool OverloadGuard::Take(Bucket& b, double rate_per_s, double burst, Clock::time_point now, int count) {
  if (now > b.last) {
    const double elapsed_s = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst, b.tokens + elapsed_s * rate_per_s);
    b.last = now;
  }
  if (b.tokens < count) return false;
  b.tokens -= count;
  return true;
}

void OverloadGuard::ForgetFullBuckets(std::map<std::string, Bucket>& table, double rate_per_s, double burst,
                                      Clock::time_point now) {
  for (auto it = table.begin(); it != table.end();) {
    const double elapsed_s = std::chrono::duration<double>(now - it->second.last).count();
    if (it->second.tokens + elapsed_s * rate_per_s >= burst) {
      it = table.erase(it);
    } else {
      ++it;
    }
  }
}

double OverloadGuard::submit_burst() const {
  if (limits_.tenant_submit_rate_per_s <= 0) return 0;
  return limits_.tenant_submit_burst > 0 ? limits_.tenant_submit_burst
                                         : std::max(1.0, 2 * limits_.tenant_submit_rate_per_s);
}

bool OverloadGuard::TakeSubmit(const std::string& tenant, Clock::time_point now, int count) {
  const double burst = submit_burst();
  if (burst <= 0) return true;
  std::lock_guard lock(mu_);
  // Tenants come from the config's tokens, so this table is small.
  auto [it, fresh] = submit_tokens_.try_emplace(tenant, Bucket{burst, now});
  return Take(it->second, limits_.tenant_submit_rate_per_s, burst, now, count);
}

bool OverloadGuard::NoteAuthFailure(const std::string& client, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (auth_failures_.size() >= kMaxTrackedClients && !auth_failures_.count(client)) {
    ForgetFullBuckets(auth_failures_, limits_.auth_failure_rate_per_s, limits_.auth_failure_burst, now);
    // Still full: every tracked client is over budget. A new address then
    // starts over budget too, so a flood from many addresses stays bounded.
    if (auth_failures_.size() >= kMaxTrackedClients) return false;
  }
  auto [it, fresh] = auth_failures_.try_emplace(client, Bucket{limits_.auth_failure_burst, now});
  return Take(it->second, limits_.auth_failure_rate_per_s, limits_.auth_failure_burst, now);
}

int OverloadGuard::RetryAfterS(Rejection r) const {
  double rate_per_s = 1;  // seats free up as requests finish
  if (r == Rejection::kSubmitRate) rate_per_s = limits_.tenant_submit_rate_per_s;
  if (r == Rejection::kAuthFailures) rate_per_s = limits_.auth_failure_rate_per_s;
  return std::max(1, static_cast<int>(std::ceil(1.0 / std::max(rate_per_s, 1e-3))));
}

int OverloadGuard::seats_taken() const {
  std::lock_guard lock(mu_);
  return taken_;
}

}  // namespace tidal::server
