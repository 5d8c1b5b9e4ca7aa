// The unprivileged user pods run as when the agent runs as root
// (`tidal agent --run-as USER`). A pod running as the agent's own user could
// read the agent's memory and environment (/proc/PID/environ, ptrace) and so
// its credential; a root pod could do anything. The agent therefore refuses
// to start as root without a user for its pods, unless told otherwise.
#ifndef TIDAL_AGENT_POD_USER_H_
#define TIDAL_AGENT_POD_USER_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace tidal::agent {

struct PodUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, from the group database
  std::string home;
  bool operator==(const PodUser&) const = default;
};

// Looks `name` up in the user database (a name or a numeric uid).
StatusOr<PodUser> LookUpPodUser(const std::string& name);

// Who pods run as, given the agent's effective uid: `run_as` when set (it
// must not be root); nullopt (the agent's own user) when the agent is not
// root, or is root and `allow_root_pods` says root pods are wanted.
// FailedPrecondition naming --run-as when the agent is root without either.
StatusOr<std::optional<PodUser>> ChoosePodUser(uid_t agent_euid, const std::string& run_as,
                                               bool allow_root_pods);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_USER_H_
