// Pods never see the agent's credential (security issue #11, item 4): the
// token leaves the agent's environment, a token file must be private, a
// pod's environment holds nothing of the agent's but the allowlist, and an
// agent running as root runs its pods as an unprivileged user.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "agent/control_plane.h"
#include "agent/pod_env.h"
#include "agent/pod_process.h"
#include "agent/pod_user.h"
#include "agent/token_source.h"
#include "protocol/node_registration.h"
#include "tests/support/agent_fixtures.h"
#include "tests/support/server_fixture.h"

extern char** environ;

namespace tidal::agent {
namespace {

namespace fs = std::filesystem;
using tidal::testing::ReadWholeFile;

constexpr const char* kSecret = "s3cret-bootstrap-token-7d1f";
constexpr const char* kChildFlag = "TIDAL_TEST_SCRUB_CHILD";

fs::path TempDir(const std::string& name) { return tidal::testing::FreshTempDir("tidal_agent_cred", name); }

TEST(TokenSourceTest, WrittenTokenFilesArePrivateAndReadBack) {
  const fs::path dir = TempDir("write");
  const std::string path = (dir / "t").string();
  ASSERT_TRUE(WriteTokenFile(path, kSecret).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto back = ReadTokenFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, kSecret);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// A restarted agent keeps its node: the credential it was issued is in its
// work dir, and the server accepts a re-registration with it, while the
// bootstrap token may not take over a node that is alive.
TEST(AgentCredentialTest, ARestartedAgentRegistersAgainWithTheSavedCredential) {
  tidal::testing::ServerProcess server;
  ASSERT_TRUE(server.running());
  const fs::path dir = TempDir("restart");
  const std::string file = (dir / "node.credential").string();
  protocol::NodeRegistration reg;
  reg.name = "trn-rack-a-1";
  const nlohmann::json body = protocol::NodeRegistrationToJson(reg);

  auto first = MakeHttpControlPlane(server.url(), tidal::testing::kAgentToken, seconds(5), file);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Register(body).ok());
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0) << "no credential file";
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  // The same work dir after a restart: registered again, at once.
  auto restarted = MakeHttpControlPlane(server.url(), tidal::testing::kAgentToken, seconds(5), file);
  ASSERT_TRUE(restarted.ok());
  const auto again = (*restarted)->Register(body);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  // A fresh work dir has only the bootstrap token: refused while alive.
  auto fresh = MakeHttpControlPlane(server.url(), tidal::testing::kAgentToken, seconds(5),
                                    (dir / "other.credential").string());
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE((*fresh)->Register(body).ok());
}

// In the child (below): the token came in the initial environment block,
// which /proc/self/environ shows; after TakeEnvToken it must be gone there
// too, not only from getenv.
TEST(TokenSourceTest, TakeEnvTokenScrubsTheInitialEnvironment) {
  if (std::getenv(kChildFlag) != nullptr) {
    const std::optional<std::string> token = TakeEnvToken("TIDAL_TOKEN");
    const std::string environ_text = ReadWholeFile("/proc/self/environ");
    const bool ok = token == std::string(kSecret) && std::getenv("TIDAL_TOKEN") == nullptr &&
                    environ_text.find(kSecret) == std::string::npos;
    std::_Exit(ok ? 0 : 3);
  }
  // The parent re-runs this test binary with the token in its environment.
  const std::string filter = "--gtest_filter=TokenSourceTest.TakeEnvTokenScrubsTheInitialEnvironment";
  const std::string token_var = std::string("TIDAL_TOKEN=") + kSecret;
  const std::string flag_var = std::string(kChildFlag) + "=1";
  // The child's scratch dir goes inside this process's, removed with it.
  const std::string tmp_var = std::string("TMPDIR=") + std::filesystem::temp_directory_path().string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char* argv[] = {const_cast<char*>("self"), const_cast<char*>(filter.c_str()), nullptr};
    char* envp[] = {const_cast<char*>(token_var.c_str()), const_cast<char*>(flag_var.c_str()),
                    const_cast<char*>(tmp_var.c_str()), nullptr};
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the token is still readable in the child's environment";
}

TEST(TokenSourceTest, TakeEnvTokenWithoutTheVariable) {
  unsetenv("TIDAL_TOKEN_ABSENT");
  EXPECT_FALSE(TakeEnvToken("TIDAL_TOKEN_ABSENT").has_value());
}

TEST(TokenSourceTest, ATokenFileMustBePrivate) {
  const fs::path dir = TempDir("file");
  const std::string path = (dir / "agent.token").string();
  std::ofstream(path) << kSecret << "\n";
  chmod(path.c_str(), 0644);
  auto open_file = ReadTokenFile(path);
  ASSERT_FALSE(open_file.ok());
  EXPECT_EQ(open_file.status().message().rfind("--token-file", 0), 0u) << open_file.status().message();
  EXPECT_NE(open_file.status().message().find("0644"), std::string::npos) << open_file.status().message();
  chmod(path.c_str(), 0600);
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, kSecret);  // the newline is dropped
  std::ofstream(path, std::ios::trunc) << "\n";
  EXPECT_FALSE(ReadTokenFile(path).ok());
  EXPECT_FALSE(ReadTokenFile((dir / "missing").string()).ok());
  EXPECT_FALSE(ReadTokenFile(dir.string()).ok());  // a directory
  fs::remove_all(dir);
}

TEST(PodUserTest, RootNeedsARunAsUserUnlessRootPodsAreAllowed) {
  auto refused = ChoosePodUser(0, "", false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("--run-as", 0), 0u) << refused.status().message();
  auto allowed = ChoosePodUser(0, "", true);
  ASSERT_TRUE(allowed.ok());
  EXPECT_FALSE(allowed->has_value());
  // Not root: pods run as the agent's user.
  auto plain = ChoosePodUser(1000, "", false);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_value());
  // Root itself is no unprivileged user; nor is a name nobody has.
  EXPECT_FALSE(ChoosePodUser(0, "root", false).ok());
  EXPECT_FALSE(ChoosePodUser(0, "0", false).ok());
  EXPECT_FALSE(ChoosePodUser(0, "no-such-user-tidal", false).ok());
  auto nobody = ChoosePodUser(0, "nobody", false);
  ASSERT_TRUE(nobody.ok()) << nobody.status().ToString();
  ASSERT_TRUE(nobody->has_value());
  EXPECT_EQ((*nobody)->name, "nobody");
  EXPECT_NE((*nobody)->uid, 0u);
}

// A real child process: what the agent has in its environment (its token,
// anything else) does not reach the pod.
TEST(PodEnvTest, APodsEnvironmentHoldsNothingOfTheAgentsButTheAllowlist) {
  setenv("TIDAL_TOKEN", kSecret, 1);
  setenv("AWS_SECRET_ACCESS_KEY", kSecret, 1);
  PodSpec spec;
  spec.key = {7, 0, 1};
  spec.name = "envdump";
  spec.env = {{"MINE", "yes"}};
  spec.gpus = {0};
  PodEnvContext ctx;
  ctx.base = InheritedPodEnv(std::nullopt);
  const fs::path dir = TempDir("env");
  ProcessSpec ps;
  ps.argv = {"env"};
  ps.env = BuildPodEnv(spec, ctx);
  ps.work_dir = dir.string();
  ps.stdout_path = (dir / "stdout.log").string();
  ps.stderr_path = (dir / "stderr.log").string();
  auto proc = PodProcess::Start(ps);
  unsetenv("TIDAL_TOKEN");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  ASSERT_TRUE(proc.ok()) << proc.status().ToString();
  EXPECT_TRUE((*proc)->Wait().success());
  proc->reset();  // joins the log pump
  const std::string out = ReadWholeFile(dir / "stdout.log");
  EXPECT_NE(out.find("MINE=yes\n"), std::string::npos) << out;
  EXPECT_NE(out.find("TIDAL_JOB_ID=7\n"), std::string::npos) << out;
  EXPECT_EQ(out.find(kSecret), std::string::npos) << out;
  EXPECT_EQ(out.find("TIDAL_TOKEN="), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(PodUserTest, APodRunsAsTheRunAsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  auto user = LookUpPodUser("nobody");
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  const fs::path dir = TempDir("runas");
  // The pod's directory is the agent's; the pod only needs to run there.
  chmod(dir.c_str(), 0755);
  PodEnvContext ctx;
  ctx.base = InheritedPodEnv(*user);
  ProcessSpec ps;
  ps.argv = {"sh", "-c", "id -u; id -g; echo $HOME"};
  PodSpec spec;
  ps.env = BuildPodEnv(spec, ctx);
  ps.work_dir = dir.string();
  ps.stdout_path = (dir / "stdout.log").string();
  ps.stderr_path = (dir / "stderr.log").string();
  ps.run_as_uid = static_cast<int>(user->uid);
  ps.run_as_gid = static_cast<int>(user->gid);
  ps.run_as_groups = user->groups;
  auto proc = PodProcess::Start(ps);
  ASSERT_TRUE(proc.ok()) << proc.status().ToString();
  EXPECT_TRUE((*proc)->Wait().success());
  proc->reset();
  EXPECT_EQ(ReadWholeFile(dir / "stdout.log"),
            fmt::format("{}\n{}\n{}\n", user->uid, user->gid, user->home));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tidal::agent
