// `tidal up` as a user runs it: a timed run prints the addresses and a
// summary and leaves no process behind; SIGTERM stops everything too.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <thread>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "agent/pod_process.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/agent_fixtures.h"

namespace tidal::e2e {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using tidal::testing::ReadWholeFile;
using tidal::testing::WaitUntil;

// Processes whose arguments or working directory mention `dir`.
std::vector<std::string> ProcessesUnder(const fs::path& dir) {
  std::vector<std::string> found;
  for (const tidal::testing::ProcessInfo& p : tidal::testing::LiveProcesses()) {
    const std::string args = fmt::format("{}", fmt::join(p.argv, " "));
    if (args.find(dir.string()) != std::string::npos || p.cwd.starts_with(dir.string())) {
      found.push_back(fmt::format("{}: {}", p.pid, args));
    }
  }
  return found;
}

class UpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    bin_dir_ = BuiltBinaryDir(why);
    if (bin_dir_.empty()) GTEST_SKIP() << why;
    dir_ = tidal::testing::FreshTempDir(
        "tidal_up", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    // What `tidal up` said on stderr (a sanitizer's report, an exception)
    // is what explains a failure.
    if (HasFailure() && !dir_.empty()) std::cerr << "tidal up's stderr:\n" << ReadWholeFile(dir_ / "up.err");
    up_.reset();
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  void StartUp(std::vector<std::string> extra) {
    agent::ProcessSpec spec;
    spec.argv = {bin_dir_ + "/tidal", "up", "--nodes", "3", "--gpus-per-node", "4",
                 "--work-dir", (dir_ / "cluster").string()};
    spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
    // The CLI config `tidal up` writes its context into: a temp dir, never
    // the real home.
    spec.env = {"PATH=/usr/bin:/bin", "XDG_CONFIG_HOME=" + (dir_ / "xdg").string()};
    if (const char* asan = std::getenv("ASAN_OPTIONS")) spec.env.push_back(std::string("ASAN_OPTIONS=") + asan);
    spec.stdout_path = (dir_ / "up.out").string();
    spec.stderr_path = (dir_ / "up.err").string();
    auto up = agent::PodProcess::Start(spec);
    ASSERT_TRUE(up.ok()) << up.status().message();
    up_ = std::move(up).value();
  }
  std::string Output() const { return ReadWholeFile(dir_ / "up.out"); }
  fs::path ConfigFile() const { return dir_ / "xdg" / "tidal" / "config.yaml"; }
  // Runs `tidal ARGS` with only the config file to find the server.
  int Tidal(const std::string& args, std::string* out) {
    const fs::path o = dir_ / "cli.out";
    const std::string cmd = fmt::format(
        "env -i PATH=/usr/bin:/bin XDG_CONFIG_HOME={} {}/tidal {} > {} 2>&1", (dir_ / "xdg").string(),
        bin_dir_, args, o.string());
    const int status = std::system(cmd.c_str());
    *out = ReadWholeFile(o);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  bool Exited(milliseconds timeout) {
    return WaitUntil([&] { return up_->Poll().has_value(); }, timeout);
  }

  std::string bin_dir_;
  fs::path dir_;
  std::unique_ptr<agent::PodProcess> up_;
};

TEST_F(UpTest, TimedRunPrintsAddressesAndASummaryAndLeavesNothing) {
  // A config the user had: `tidal up` adds its context and leaves the rest.
  fs::create_directories(ConfigFile().parent_path());
  std::ofstream(ConfigFile()) << "server: http://tidal.example.com\ntoken: mine\n";
  StartUp({"--for", "20s"});
  ASSERT_TRUE(Exited(milliseconds(120000))) << Output() << ReadWholeFile(dir_ / "up.err");
  EXPECT_EQ(up_->Poll()->Describe(), "exited with code 0") << Output();
  const std::string out = Output();
  EXPECT_NE(out.find("tidal up: cluster ready"), std::string::npos) << out;
  // The address printed is the one the CLI takes (no /v1), with the token.
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\n  server:   http://127\.0\.0\.1:\d+  \()"))) << out;
  EXPECT_NE(out.find("  token:    "), std::string::npos) << out;
  // The dashboard is served by the same server, at its root.
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\n  dashboard: http://127\.0\.0\.1:\d+/  \()"))) << out;
  EXPECT_NE(out.find("/metrics"), std::string::npos) << out;
  EXPECT_NE(out.find("tidal up: summary after 2"), std::string::npos) << out;  // 20 s (or a bit more)
  // The mix ran: the gang, the inference service and the short batch job,
  // which also completed within the 20 s.
  const size_t ran = out.find("  ran:");
  ASSERT_NE(ran, std::string::npos) << out;
  const std::string ran_line = out.substr(ran, out.find('\n', ran) - ran);
  EXPECT_NE(ran_line.find("llm-train (training)"), std::string::npos) << ran_line;
  EXPECT_NE(ran_line.find("chat (inference)"), std::string::npos) << ran_line;
  EXPECT_NE(out.find("  completed:  smoke-test succeeded"), std::string::npos) << out;
  EXPECT_NE(out.find("  preempted:  "), std::string::npos) << out;
  EXPECT_NE(out.find("process groups it started is left"), std::string::npos) << out;
  EXPECT_NE(out.find("  context:  'up' in " + ConfigFile().string()), std::string::npos) << out;
  EXPECT_EQ(ReadWholeFile(ConfigFile()), "server: http://tidal.example.com\ntoken: mine\n");
  up_.reset();
  EXPECT_EQ(ProcessesUnder(dir_), std::vector<std::string>());
}

TEST_F(UpTest, SigtermStopsEveryProcessItStarted) {
  StartUp({});
  // Wait until pods run on the agents: the trainer's first line in a log.
  ASSERT_TRUE(WaitUntil([&] { return Output().find("cluster ready") != std::string::npos; },
                        milliseconds(60000)))
      << Output() << ReadWholeFile(dir_ / "up.err");
  auto trainer_started = [&] {
    std::error_code ec;
    for (const auto& f : fs::recursive_directory_iterator(dir_ / "cluster", ec)) {
      if (f.path().filename() == "stdout.log" &&
          ReadWholeFile(f.path()).find("trainer: rank=") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(WaitUntil(trainer_started, milliseconds(60000))) << Output();
  // While it runs, a plain `tidal list` finds it through the context it wrote.
  const std::string config = ReadWholeFile(ConfigFile());
  EXPECT_NE(config.find("current_context: up"), std::string::npos) << config;
  std::string list;
  EXPECT_EQ(Tidal("list", &list), 0) << list;
  EXPECT_NE(list.find("llm-train"), std::string::npos) << list;
  ASSERT_TRUE(up_->SignalGroup(SIGTERM));
  ASSERT_TRUE(Exited(milliseconds(60000))) << Output();
  EXPECT_EQ(up_->Poll()->Describe(), "exited with code 0") << Output();
  EXPECT_NE(Output().find("process groups it started is left"), std::string::npos) << Output();
  // It took its context back out: the config held nothing else, so it is gone.
  EXPECT_FALSE(fs::exists(ConfigFile())) << ReadWholeFile(ConfigFile());
  up_.reset();
  EXPECT_EQ(ProcessesUnder(dir_), std::vector<std::string>());
}

}  // namespace
}  // namespace tidal::e2e
