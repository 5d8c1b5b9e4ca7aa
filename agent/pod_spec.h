// What the server asks this node to run: one entry of
// GET /v1/agent/nodes/{name}/pods. The type and its codec are the
// protocol's (protocol/pod_assignment.h), shared with the server; the agent
// knows them by its own names.
#ifndef TIDAL_AGENT_POD_SPEC_H_
#define TIDAL_AGENT_POD_SPEC_H_

#include "protocol/pod_assignment.h"
#include "protocol/pod_key.h"

namespace tidal::agent {

using PodKey = protocol::PodKey;
using HttpEndpoint = protocol::HttpEndpoint;
using StopNotice = protocol::StopNotice;
using PodSpec = protocol::PodAssignment;

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_SPEC_H_
