#include "core/colocation/latency_model.h"

#include <cmath>
#include <limits>

#include "core/common/check.h"

namespace tidal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Hypoexponential tail P(E_theta + E_mu > t). Near theta == mu the two-term
// form cancels catastrophically, so it is rewritten with expm1 there:
// e^{-mu t} (1 + mu t (1 - e^{-d t}) / (d t)), d = theta - mu.
double HypoTail(double mu, double theta, double t) {
  const double d = theta - mu;
  if (std::abs(d) < 1e-4 * mu) {
    const double x = d * t;
    const double g = x == 0 ? 1.0 : -std::expm1(-x) / x;
    return std::exp(-mu * t) * (1 + mu * t * g);
  }
  return (mu * std::exp(-theta * t) - theta * std::exp(-mu * t)) / (mu - theta);
}

// P(T > t) of the M/M/c response time.
double ResponseTail(double mu, double theta, double c_prob, double t) {
  return (1 - c_prob) * std::exp(-mu * t) + c_prob * HypoTail(mu, theta, t);
}

}  // namespace

double ErlangB(int servers, double offered_load) {
  TIDAL_CHECK(servers >= 0 && offered_load >= 0) << "ErlangB(" << servers << ", " << offered_load << ")";
  double b = 1.0;
  for (int k = 1; k <= servers; ++k) b = offered_load * b / (k + offered_load * b);
  return b;
}

namespace {

// ErlangC given `erlang_b` = ErlangB(servers, offered_load), which a caller
// stepping through server counts keeps by the recurrence.
double ErlangCFromB(int servers, double offered_load, double erlang_b) {
  if (servers <= 0 || offered_load >= servers) return 1.0;
  if (offered_load <= 0) return 0.0;
  const double rho = offered_load / servers;
  return erlang_b / (1 - rho * (1 - erlang_b));
}

// ResponseTimeQuantileMs given `c_prob` = ErlangC(replicas, lambda / mu).
double ResponseQuantileMsGivenWait(double lambda, double mu, int replicas, double quantile, double c_prob) {
  const double theta = replicas * mu - lambda;
  if (theta <= 0) return kInf;
  const double tail = 1 - quantile;
  // The tail is at most e^{-min(mu,theta) t} (1 + mu t), so doubling from
  // 1/min(mu, theta) brackets the quantile quickly.
  double lo = 0;
  double hi = 1.0 / std::min(mu, theta);
  while (ResponseTail(mu, theta, c_prob, hi) > tail) {
    lo = hi;
    hi *= 2;
  }
  for (int i = 0; i < 100 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (ResponseTail(mu, theta, c_prob, mid) > tail) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi) * 1000.0;
}

}  // namespace

double ErlangC(int servers, double offered_load) {
  if (servers <= 0 || offered_load >= servers) return 1.0;
  if (offered_load <= 0) return 0.0;
  return ErlangCFromB(servers, offered_load, ErlangB(servers, offered_load));
}

double ResponseTimeQuantileMs(double arrival_rps, double capacity_rps, int replicas,
                              double quantile) {
  TIDAL_CHECK(quantile > 0 && quantile < 1) << "quantile " << quantile;
  TIDAL_CHECK(capacity_rps > 0) << "replica capacity must be positive";
  if (replicas <= 0) return kInf;
  const double mu = capacity_rps;
  const double lambda = std::max(0.0, arrival_rps);
  return ResponseQuantileMsGivenWait(lambda, mu, replicas, quantile, ErlangC(replicas, lambda / mu));
}

double WaitTimeQuantileMs(double arrival_rps, double capacity_rps, int replicas,
                          double quantile) {
  TIDAL_CHECK(quantile > 0 && quantile < 1) << "quantile " << quantile;
  TIDAL_CHECK(capacity_rps > 0) << "replica capacity must be positive";
  if (replicas <= 0) return arrival_rps > 0 ? kInf : 0.0;
  const double lambda = std::max(0.0, arrival_rps);
  const double theta = replicas * capacity_rps - lambda;
  if (theta <= 0) return kInf;
  const double c_prob = ErlangC(replicas, lambda / capacity_rps);
  if (c_prob <= 1 - quantile) return 0.0;
  return std::log(c_prob / (1 - quantile)) / theta * 1000.0;
}

QueueLatency ModelLatency(double arrival_rps, double capacity_rps, int replicas) {
  TIDAL_CHECK(capacity_rps > 0) << "replica capacity must be positive";
  QueueLatency out;
  const double mu = capacity_rps;
  const double lambda = std::max(0.0, arrival_rps);
  if (replicas <= 0) {
    out.stable = false;
    out.utilization = lambda > 0 ? kInf : 0.0;
    out.p_wait = 1;
    out.mean_wait_ms = out.mean_response_ms = out.p95_ms = out.p99_ms = kInf;
    return out;
  }
  const double theta = replicas * mu - lambda;
  out.utilization = lambda / (replicas * mu);
  out.stable = theta > 0;
  if (!out.stable) {
    out.p_wait = 1;
    out.mean_wait_ms = out.mean_response_ms = out.p95_ms = out.p99_ms = kInf;
    return out;
  }
  out.p_wait = ErlangC(replicas, lambda / mu);
  out.mean_wait_ms = out.p_wait / theta * 1000.0;
  out.mean_response_ms = out.mean_wait_ms + 1000.0 / mu;
  out.p95_ms = ResponseTimeQuantileMs(lambda, mu, replicas, 0.95);
  out.p99_ms = ResponseTimeQuantileMs(lambda, mu, replicas, 0.99);
  return out;
}

int MinReplicasForTarget(double rps, double capacity_rps, Duration target_p99,
                         double headroom) {
  TIDAL_CHECK(capacity_rps > 0) << "replica capacity must be positive";
  TIDAL_CHECK(headroom >= 0) << "headroom " << headroom;
  const double lambda = std::max(0.0, rps) * (1 + headroom);
  if (lambda <= 0) return 0;
  const double mu = capacity_rps;
  const double target_ms = static_cast<double>(target_p99.count());
  // The smallest stable count.
  int c = static_cast<int>(std::floor(lambda / mu)) + 1;
  const bool reachable = target_ms > std::log(100.0) / mu * 1000.0;
  // ErlangB(c) from ErlangB(c - 1) by one step of its recurrence, the same
  // arithmetic as ErlangB's own loop: each count up costs O(1), not O(c).
  const double offered = lambda / mu;
  double erlang_b = ErlangB(c, offered);
  while (true) {
    const double c_prob = ErlangCFromB(c, offered, erlang_b);
    if (reachable) {
      if (ResponseQuantileMsGivenWait(lambda, mu, c, 0.99, c_prob) <= target_ms) return c;
    } else if (c_prob <= 0.01) {
      return c;
    }
    ++c;
    erlang_b = offered * erlang_b / (c + offered * erlang_b);
  }
}

}  // namespace tidal
