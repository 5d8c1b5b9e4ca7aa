// Latency model of an inference service: an M/M/c queue.
//
// Each replica is one server with exponential service at rate
// mu = replica_capacity_rps; requests arrive as a Poisson stream at lambda
// (req/s) and wait in one FCFS queue shared by the c replicas. With offered
// load a = lambda/mu and utilisation rho = a/c < 1:
//   Erlang B by the stable recursion B(0) = 1, B(k) = a B(k-1) / (k + a B(k-1)),
//   Erlang C  C(c, a) = B / (1 - rho (1 - B))       (= P(wait > 0)),
//   mean wait  E[W] = C / (c mu - lambda),
//   wait tail  P(W > t) = C e^{-theta t},  theta = c mu - lambda.
// The response time T = W + S (S ~ Exp(mu)) has the exact tail
//   P(T > t) = (1 - C) e^{-mu t} + C H(t),
//   H(t) = (mu e^{-theta t} - theta e^{-mu t}) / (mu - theta)  (hypoexponential),
// with the limit (1 + mu t) e^{-mu t} when theta = mu; its quantiles are found
// by bisection. For c = 1 this reduces to M/M/1: T ~ Exp(mu - lambda).
// An unstable queue (rho >= 1) has infinite waits.
#ifndef TIDAL_CORE_COLOCATION_LATENCY_MODEL_H_
#define TIDAL_CORE_COLOCATION_LATENCY_MODEL_H_

#include "core/common/time.h"

namespace tidal {

// Erlang B blocking probability for `servers` servers and offered load `a`
// (erlangs). servers >= 0, a >= 0.
double ErlangB(int servers, double offered_load);
// Erlang C: probability that an arrival waits. 1 when servers <= a.
double ErlangC(int servers, double offered_load);

struct QueueLatency {
  bool stable = false;       // lambda < c mu
  double utilization = 0;    // rho = lambda / (c mu); may exceed 1
  double p_wait = 0;         // Erlang C
  double mean_wait_ms = 0;   // E[W]; +inf when unstable
  double mean_response_ms = 0;
  double p95_ms = 0;         // response-time quantiles; +inf when unstable
  double p99_ms = 0;
};

// The M/M/c figures for `arrival_rps` spread over `replicas` replicas of
// `capacity_rps` each. arrival_rps <= 0 gives the bare service time
// quantiles (or +inf with no replicas).
QueueLatency ModelLatency(double arrival_rps, double capacity_rps, int replicas);

// Quantile q in (0, 1) of the response time, in ms.
double ResponseTimeQuantileMs(double arrival_rps, double capacity_rps, int replicas,
                              double quantile);
// Quantile q of the waiting time alone, in ms: ln(C / (1 - q)) / theta, or 0
// when C <= 1 - q.
double WaitTimeQuantileMs(double arrival_rps, double capacity_rps, int replicas,
                          double quantile);

// Smallest replica count whose modelled P99 response time at
// rps * (1 + headroom) is at most target_p99. 0 for no load. When the target
// is below what any count can reach (the bare service time's P99,
// ln(100)/mu, is already over it), returns the smallest count at which
// requests' P99 wait is zero (C <= 1%), since more replicas barely help.
int MinReplicasForTarget(double rps, double capacity_rps, Duration target_p99,
                         double headroom);

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_LATENCY_MODEL_H_
