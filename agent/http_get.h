// A small blocking HTTP GET on loopback/the node network for readiness and
// load probes, with short timeouts so one slow replica cannot stall the
// agent loop for long.
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

StatusOr<HttpReply> HttpGet(const std::string& host, int port, const std::string& path,
                            Duration timeout);

// A free TCP port on 127.0.0.1 (bind to port 0, read it back, close). Racy
// by nature, so callers bind soon after.
StatusOr<int> PickFreePort();
// Whether 127.0.0.1:port can be bound now.
bool PortIsFree(int port);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_HTTP_GET_H_
