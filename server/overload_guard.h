// Overload protection in front of the handlers: one tenant's flood must not
// slow another tenant's requests, and failed authentications must stay cheap.
//
// The algorithm:
// - Fair seats. The server has `seats` in-flight request slots (its HTTP
//   threads). While fewer than three quarters of them are taken, every
//   request gets one: a lone tenant can use the whole server. Past that
//   point the server is contended, and a user request is admitted only while
//   its tenant holds fewer than its max-min fair share, seats divided by the
//   tenants holding a seat (itself included). A flooding tenant is answered
//   429 beyond its share, cheaply, before any parsing or store write, and the
//   others keep getting seats. Shares are bounded, the total is not (the
//   HTTP threads bound it): a tenant below its share gets a seat even when
//   all are taken, so a flood never locks another tenant out. Admins and node credentials are never gated:
//   the operator and the agents' leases must get through an overload.
// - Submit rate (opt-in). Each tenant's submits and dry-runs draw from a
//   token bucket of `tenant_submit_rate_per_s` (0 = off, the default: fair
//   seats already protect the other tenants, and a fixed rate would cap a
//   lone tenant below what the server can do).
// - Failed authentications. Each client address has a budget of failures
//   (a bucket of `auth_failure_burst`, refilled at `auth_failure_rate_per_s`).
//   Past it, a request whose token is unknown is answered 429 without
//   further work, and node-access refusals stop being audited (one row per
//   refusal would let a hostile pod grow the store without bound). A valid
//   credential is never refused: a hostile pod shares its node's address,
//   and must not be able to lock its agent out.
//
// Tables keyed by client address are bounded (kMaxTrackedClients); when
// full, the clients whose budget is back to full are forgotten first.
#ifndef TIDAL_SERVER_OVERLOAD_GUARD_H_
#define TIDAL_SERVER_OVERLOAD_GUARD_H_

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace tidal::server {

// Why a request was turned away (the `reason` label of
// tidal_http_rejected_total).
// The last five are the HTTP layer's own (server/http_server.h).
enum class Rejection {
  kFairShare,
  kSubmitRate,
  kUnfinishedCap,
  kAuthFailures,
  kBodyTooLarge,
  kHeaderTooLarge,
  kMalformed,
  kReadTimeout,
  kConnectionLimit,
  kInFlightLimit,
};
std::string_view RejectionName(Rejection r);
inline constexpr Rejection kEveryRejection[] = {
    Rejection::kFairShare,      Rejection::kSubmitRate,  Rejection::kUnfinishedCap,
    Rejection::kAuthFailures,   Rejection::kBodyTooLarge, Rejection::kHeaderTooLarge,
    Rejection::kMalformed,      Rejection::kReadTimeout, Rejection::kConnectionLimit,
    Rejection::kInFlightLimit};

struct OverloadLimits {
  int seats = 64;                        // the server's http_threads
  double tenant_submit_rate_per_s = 0;   // 0 = unlimited
  double tenant_submit_burst = 0;        // 0 = twice the rate
  double auth_failure_burst = 100;
  double auth_failure_rate_per_s = 10;
};

class OverloadGuard {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxTrackedClients = 10000;

  explicit OverloadGuard(OverloadLimits limits);

  // A seat for one user request of `tenant`; false = answer 429. Every true
  // must be matched by one Leave.
  bool TryEnter(const std::string& tenant);
  void Leave(const std::string& tenant);

  // `count` tokens for as many submits (a batch's workloads) or one dry-run
  // of `tenant`; false = answer 429, and none is taken. A batch larger than
  // the burst never passes: the caller says so.
  bool TakeSubmit(const std::string& tenant, Clock::time_point now, int count = 1);
  // The most submits one request may carry under the rate limit (its
  // burst); 0 = no limit.
  double submit_burst() const;

  // Records one failed authentication from `client`; false = its budget is
  // spent (answer 429, audit nothing).
  bool NoteAuthFailure(const std::string& client, Clock::time_point now);

  // Retry-After for a rejection, in whole seconds (at least 1): when the
  // bucket behind it has a token again.
  int RetryAfterS(Rejection r) const;

  int seats_taken() const;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last{};
  };
  // Refills `b` to `now` and takes one token if there is one.
  static bool Take(Bucket& b, double rate_per_s, double burst, Clock::time_point now, int count = 1);
  void ForgetFullBuckets(std::map<std::string, Bucket>& table, double rate_per_s, double burst,
                         Clock::time_point now);

  const OverloadLimits limits_;
  mutable std::mutex mu_;
  int taken_ = 0;
  std::map<std::string, int, std::less<>> held_;  // tenant -> seats held (> 0 only)
  std::map<std::string, Bucket> submit_tokens_;   // by tenant
  std::map<std::string, Bucket> auth_failures_;   // by client address
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_OVERLOAD_GUARD_H_
