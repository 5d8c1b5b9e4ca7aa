// The environment a pod's process gets. Training pods see exactly the
// variables torchrun sets for its workers (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so a script written for
// torchrun runs unchanged with one process per pod. Tidal's own variables
// and CUDA_VISIBLE_DEVICES are set last: a workload's `env` cannot widen
// the GPUs it sees.
#ifndef TIDAL_AGENT_POD_ENV_H_
#define TIDAL_AGENT_POD_ENV_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/pod_spec.h"
#include "agent/pod_user.h"

namespace tidal::agent {

struct PodEnvContext {
  int local_rank = 0;        // among this workload's pods on this node, by rank
  int local_world_size = 1;  // this workload's pods on this node
  std::string node_name;
  std::string checkpoint_dir;
  std::string notice_file;
  std::string pod_dir;
  int port = 0;  // the serving port given to the pod; 0 = none
  // InheritedPodEnv (PATH, HOME, LANG, ...); lowest precedence.
  std::map<std::string, std::string> base;
};

// The only variables a pod takes from the agent: where to find programs,
// the locale, the time zone, sanitizer settings. Nothing else of the
// agent's environment (its token, its settings) reaches a pod. With a
// `user`, HOME, USER and LOGNAME are that user's.
std::map<std::string, std::string> InheritedPodEnv(const std::optional<PodUser>& user);

// "KEY=VALUE" entries, sorted by key: InheritedPodEnv's base, then the
// spec's env, then the variables above.
std::vector<std::string> BuildPodEnv(const PodSpec& spec, const PodEnvContext& ctx);

// The MASTER_PORT a pod gets when the server sends none: 29500 plus the
// workload id mod 10000, the same on every node of the gang.
int DefaultMasterPort(uint64_t workload);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_POD_ENV_H_
