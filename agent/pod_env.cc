#include "agent/pod_env.h"

#include <cstdlib>

#include <fmt/core.h>
#include <fmt/ranges.h>

namespace tidal::agent {

std::map<std::string, std::string> InheritedPodEnv(const std::optional<PodUser>& user) {
  static const char* const kKeep[] = {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER",
                                      "TMPDIR", "LD_LIBRARY_PATH", "ASAN_OPTIONS",
                                      "UBSAN_OPTIONS", "LSAN_OPTIONS"};
  std::map<std::string, std::string> env;
  for (const char* key : kKeep) {
    if (const char* value = std::getenv(key)) env[key] = value;
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  if (user) {
    env["HOME"] = user->home;
    env["USER"] = user->name;
    env["LOGNAME"] = user->name;
  }
  return env;
}

int DefaultMasterPort(uint64_t workload) { return 29500 + static_cast<int>(workload % 10000); }

std::vector<std::string> BuildPodEnv(const PodSpec& spec, const PodEnvContext& ctx) {
  std::map<std::string, std::string> env = ctx.base;
  for (const auto& [k, v] : spec.env) env[k] = v;
  env["CUDA_VISIBLE_DEVICES"] = fmt::format("{}", fmt::join(spec.gpus, ","));
  // NVML indices are in PCI bus order; CUDA's default order is fastest
  // first, which would make the indices above name other GPUs.
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  env["RANK"] = std::to_string(spec.key.rank);
  env["LOCAL_RANK"] = std::to_string(ctx.local_rank);
  env["WORLD_SIZE"] = std::to_string(spec.world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(ctx.local_world_size);
  env["MASTER_ADDR"] = spec.master_addr.empty() ? "127.0.0.1" : spec.master_addr;
  env["MASTER_PORT"] = std::to_string(spec.master_port > 0 ? spec.master_port
                                                           : DefaultMasterPort(spec.key.workload));
  env["TIDAL_JOB_ID"] = std::to_string(spec.key.workload);
  env["TIDAL_JOB_NAME"] = spec.name;
  env["TIDAL_KIND"] = spec.kind;
  env["TIDAL_ATTEMPT"] = std::to_string(spec.key.attempt);
  env["TIDAL_NODE"] = ctx.node_name;
  env["TIDAL_CHECKPOINT_DIR"] = ctx.checkpoint_dir;
  env["TIDAL_PREEMPT_NOTICE_FILE"] = ctx.notice_file;
  env["TIDAL_POD_DIR"] = ctx.pod_dir;
  if (ctx.port > 0) {
    env["PORT"] = std::to_string(ctx.port);
    env["TIDAL_PORT"] = std::to_string(ctx.port);
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace tidal::agent
