// The agent <-> server messages, both directions (what a hostile agent can
// send the server and what a hostile server can send an agent), and a
// replica's load reply (what a hostile pod can send its agent).
#include "fuzz/fuzz_input.h"
#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "protocol/pod_assignment.h"
#include "protocol/pod_event.h"
#include "protocol/pod_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = tidal::fuzz::AsJson(data, size);
  if (!j) return 0;
  using namespace tidal::protocol;
  if (auto r = NodeRegistrationFromJson(*j); r.ok()) (void)NodeRegistrationToJson(*r);
  (void)RegistrationReplyFromJson(*j);
  (void)HeartbeatFromJson(*j);
  (void)HeartbeatReplyFromJson(*j);
  (void)PodAssignmentListFromJson(*j);
  (void)PodEventBatchFromJson(*j);
  (void)PodLogBatchFromJson(*j);
  (void)PodLogPageFromJson(*j);
  (void)LoadReplyFromJson(*j);
  return 0;
}
