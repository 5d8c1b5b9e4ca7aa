// A small blocking HTTP GET on loopback/the node network for readiness and
// load probes. The other end is a pod, so assume it is hostile: the whole
// request (connect, headers, body) has one deadline, and the body one size
// cap, so that a pod that trickles bytes or streams gigabytes cannot stall
// the agent loop (its heartbeats keep every other pod on the node alive) or
// fill its memory. cpp-httplib's client only bounds each read, so this uses
// Boost.Beast (the server's HTTP library), whose stream deadline bounds the
// whole exchange.
#ifndef TIDAL_AGENT_HTTP_GET_H_
#define TIDAL_AGENT_HTTP_GET_H_

#include <string>

#include "core/common/status.h"
#include "core/common/time.h"

namespace tidal::agent {

struct HttpReply {
  int status = 0;
  std::string body;
};

// A probe reply is a status and a small JSON object; anything longer is
// refused, not truncated.
inline constexpr size_t kMaxProbeBodyBytes = size_t{64} << 10;

// GET http://host:port/path within `timeout` in all, with no redirects, no
// proxy and no protocol but HTTP. A body over max_body_bytes is an error.
StatusOr<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                            Duration timeout, size_t max_body_bytes = kMaxProbeBodyBytes);

// A free TCP port on 127.0.0.1 (bind to port 0, read it back, close). Racy
// by nature, so callers bind soon after.
StatusOr<int> PickFreePort();
// Whether 127.0.0.1:port can be bound now.
bool PortIsFree(int port);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_HTTP_GET_H_
