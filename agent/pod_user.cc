#include "agent/pod_user.h"

#include <grp.h>
#include <pwd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/core.h>

namespace tidal::agent {

StatusOr<PodUser> LookUpPodUser(const std::string& name) {
  if (name.empty()) return InvalidArgument("--run-as: expected a user name");
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* found = nullptr;
  int err = getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &found);
  if (found == nullptr && err == 0) {
    char* end = nullptr;
    const unsigned long uid = std::strtoul(name.c_str(), &end, 10);
    if (*end == '\0') err = getpwuid_r(static_cast<uid_t>(uid), &pw, buffer.data(), buffer.size(), &found);
  }
  if (found == nullptr) {
    return InvalidArgument(fmt::format("--run-as '{}': {}", name, err ? std::strerror(err) : "no such user"));
  }
  PodUser user;
  user.name = pw.pw_name;
  user.uid = pw.pw_uid;
  user.gid = pw.pw_gid;
  user.home = pw.pw_dir ? pw.pw_dir : "/";
  int count = 64;
  std::vector<gid_t> groups(count);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(count);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) count = 0;
  }
  groups.resize(count);
  user.groups = std::move(groups);
  return user;
}

StatusOr<std::optional<PodUser>> ChoosePodUser(uid_t agent_euid, const std::string& run_as,
                                               bool allow_root_pods) {
  if (!run_as.empty()) {
    TIDAL_ASSIGN_OR_RETURN(PodUser user, LookUpPodUser(run_as));
    if (user.uid == 0) {
      return InvalidArgument(fmt::format("--run-as '{}': is root; pods need an unprivileged user", run_as));
    }
    if (agent_euid != 0 && user.uid != agent_euid) {
      return FailedPrecondition(fmt::format("--run-as '{}': only an agent running as root can switch users",
                                            run_as));
    }
    return std::optional<PodUser>(std::move(user));
  }
  if (agent_euid == 0 && !allow_root_pods) {
    return FailedPrecondition(
        "--run-as: required when the agent runs as root (pods would run as root and could read the "
        "agent's credential); give --run-as USER, or --allow-root-pods to accept that");
  }
  return std::optional<PodUser>();
}

}  // namespace tidal::agent
