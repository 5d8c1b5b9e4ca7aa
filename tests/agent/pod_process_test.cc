#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "agent/pod_process.h"
#include "agent/rotating_log.h"
#include "agent/token_bucket.h"
#include "tests/support/agent_fixtures.h"

namespace tidal::agent {
namespace {

namespace fs = std::filesystem;
using tidal::testing::ReadWholeFile;
using tidal::testing::WaitUntil;
using std::chrono::milliseconds;

fs::path TempDir(const std::string& name) {
  return tidal::testing::FreshTempDir("tidal_pod_process", name);
}

ProcessSpec Spec(const fs::path& dir, std::vector<std::string> argv) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.work_dir = dir.string();
  spec.stdout_path = (dir / "stdout.log").string();
  spec.stderr_path = (dir / "stderr.log").string();
  return spec;
}

TEST(TokenBucketTest, GrantsBurstThenRate) {
  const auto t0 = TokenBucket::Clock::time_point();
  TokenBucket bucket(/*rate_per_s=*/1000, /*burst=*/500, t0);
  EXPECT_EQ(bucket.Take(800, t0), 500);  // the burst only
  EXPECT_EQ(bucket.Take(1, t0), 0);
  // 100 ms at 1000/s = 100 tokens.
  EXPECT_EQ(bucket.Take(800, t0 + milliseconds(100)), 100);
  // 10 s would be 10,000 tokens, capped at the burst of 500.
  EXPECT_EQ(bucket.Take(800, t0 + milliseconds(10100)), 500);
  TokenBucket unlimited(0, 0, t0);
  EXPECT_EQ(unlimited.Take(1 << 30, t0), 1 << 30);
}

TEST(RotatingLogTest, RotatesBySizeAndKeepsMaxFiles) {
  fs::path dir = TempDir("rotate");
  const std::string path = (dir / "out.log").string();
  RotatingLog log(path, /*max_bytes=*/10, /*max_files=*/2);
  ASSERT_TRUE(log.Open().ok());
  // 35 bytes in files of 10: out.log.3 would be the oldest but only 2 are
  // kept: "aaaaaaaaaa" (first 10) falls off.
  ASSERT_TRUE(log.Write(std::string(10, 'a') + std::string(10, 'b')).ok());
  ASSERT_TRUE(log.Write(std::string(10, 'c') + "ddddd").ok());
  EXPECT_EQ(ReadWholeFile(path), "ddddd");
  EXPECT_EQ(ReadWholeFile(path + ".1"), std::string(10, 'c'));
  EXPECT_EQ(ReadWholeFile(path + ".2"), std::string(10, 'b'));
  EXPECT_FALSE(fs::exists(path + ".3"));
  fs::remove_all(dir);
}

TEST(PodProcessTest, PassesExactlyTheGivenEnvironmentAndArgv) {
  fs::path dir = TempDir("env");
  ProcessSpec spec = Spec(dir, {"env"});
  spec.env = {"PATH=/usr/bin:/bin", "RANK=3", "CUDA_VISIBLE_DEVICES=4,5"};
  auto proc = PodProcess::Start(spec);
  ASSERT_TRUE(proc.ok()) << proc.status().ToString();
  EXPECT_TRUE((*proc)->Wait().success());
  proc->reset();  // joins the log pump
  EXPECT_EQ(ReadWholeFile(dir / "stdout.log"), "PATH=/usr/bin:/bin\nRANK=3\nCUDA_VISIBLE_DEVICES=4,5\n");

  // argv goes through verbatim: no shell expands "$HOME" or splits words.
  auto echo = PodProcess::Start(Spec(dir, {"echo", "$HOME", "a b"}));
  ASSERT_TRUE(echo.ok());
  (*echo)->Wait();
  echo->reset();
  EXPECT_EQ(ReadWholeFile(dir / "stdout.log"),
            "PATH=/usr/bin:/bin\nRANK=3\nCUDA_VISIBLE_DEVICES=4,5\n$HOME a b\n");
  fs::remove_all(dir);
}

TEST(PodProcessTest, ReportsExitCodeSignalAndExecFailure) {
  fs::path dir = TempDir("exit");
  auto fail = PodProcess::Start(Spec(dir, {"sh", "-c", "echo oops >&2; exit 3"}));
  ASSERT_TRUE(fail.ok());
  ExitStatus s = (*fail)->Wait();
  EXPECT_EQ(s.exit_code, 3);
  EXPECT_EQ(s.Describe(), "exited with code 3");
  fail->reset();
  EXPECT_EQ(ReadWholeFile(dir / "stderr.log"), "oops\n");

  auto missing = PodProcess::Start(Spec(dir, {"/nonexistent/trainer"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "execve /nonexistent/trainer: No such file or directory");
  EXPECT_EQ(PodProcess::Start(Spec(dir, {"no-such-binary-xyz"})).status().message(),
            "command: 'no-such-binary-xyz' not found in PATH");

  auto sleeper = PodProcess::Start(Spec(dir, {"sleep", "30"}));
  ASSERT_TRUE(sleeper.ok());
  EXPECT_FALSE((*sleeper)->Poll().has_value());
  EXPECT_TRUE((*sleeper)->SignalGroup(SIGKILL));
  EXPECT_EQ((*sleeper)->Wait().Describe(), "killed by SIGKILL");
  fs::remove_all(dir);
}

TEST(PodProcessTest, OwnProcessGroupAndSignalReachesChildren) {
  fs::path dir = TempDir("group");
  // The leader starts two children and waits; all three share its group.
  auto proc = PodProcess::Start(Spec(dir, {"sh", "-c", "sleep 30 & sleep 30 & echo started; wait"}));
  ASSERT_TRUE(proc.ok());
  const pid_t pgid = (*proc)->pid();
  EXPECT_EQ(getpgid(pgid), pgid);
  EXPECT_NE(getpgid(0), pgid);  // not the test's group
  ASSERT_TRUE(WaitUntil([&] { return ReadWholeFile(dir / "stdout.log") == "started\n"; }, milliseconds(5000)));
  EXPECT_TRUE((*proc)->GroupAlive());
  EXPECT_TRUE((*proc)->SignalGroup(SIGTERM));
  EXPECT_EQ((*proc)->Wait().term_signal, SIGTERM);
  // The children got SIGTERM too, so the whole group is gone.
  EXPECT_TRUE(WaitUntil([&] { return !(*proc)->GroupAlive(); }, milliseconds(5000)));
  fs::remove_all(dir);
}

TEST(PodProcessTest, AGroupOutlivesItsLeaderWhileAMemberRuns) {
  fs::path dir = TempDir("orphan");
  // The leader leaves a child behind and exits: the group lives on without
  // it, so the answer cannot come from the leader's own /proc entry.
  auto proc = PodProcess::Start(Spec(dir, {"sh", "-c", "sleep 30 & echo started"}));
  ASSERT_TRUE(proc.ok());
  const pid_t pgid = (*proc)->pid();
  EXPECT_EQ((*proc)->Wait().exit_code, 0);
  ASSERT_TRUE(WaitUntil([&] { return ReadWholeFile(dir / "stdout.log") == "started\n"; }, milliseconds(5000)));
  EXPECT_TRUE(ProcessGroupAlive(pgid));
  EXPECT_TRUE((*proc)->SignalGroup(SIGKILL));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessGroupAlive(pgid); }, milliseconds(5000)));
  fs::remove_all(dir);
}

TEST(PodProcessTest, DestructorKillsEverythingInTheGroup) {
  fs::path dir = TempDir("dtor");
  pid_t pgid;
  {
    auto proc = PodProcess::Start(Spec(dir, {"sh", "-c", "sleep 30 & wait"}));
    ASSERT_TRUE(proc.ok());
    pgid = (*proc)->pid();
  }
  EXPECT_TRUE(WaitUntil([&] { return !ProcessGroupAlive(pgid); }, milliseconds(5000)));
  fs::remove_all(dir);
}

TEST(PodProcessTest, LogRateCapDropsExcessAndSaysSo) {
  fs::path dir = TempDir("rate");
  ProcessSpec spec = Spec(dir, {"head", "-c", "1000000", "/dev/zero"});
  spec.log_rate_bytes_per_s = 1000;
  spec.log_burst_bytes = 10000;
  auto proc = PodProcess::Start(spec);
  ASSERT_TRUE(proc.ok());
  (*proc)->Wait();
  // Joining the pump happens in the destructor; read counters before it.
  ASSERT_TRUE(WaitUntil([&] { return (*proc)->dropped_log_bytes() > 0; }, milliseconds(5000)));
  proc->reset();
  const auto size = fs::file_size(dir / "stdout.log");
  // 1,000,000 bytes written at a 10,000-byte burst: ~10 KB kept (plus what
  // 1000 B/s refills while it runs, and the note).
  EXPECT_GE(size, 10000u);
  EXPECT_LT(size, 20000u);
  EXPECT_NE(ReadWholeFile(dir / "stdout.log").find("[tidal] log rate limit: dropped"), std::string::npos);
  fs::remove_all(dir);
}

TEST(PodProcessTest, LogsRotateWhileThePodWrites) {
  fs::path dir = TempDir("podrotate");
  ProcessSpec spec = Spec(dir, {"head", "-c", "25000", "/dev/zero"});
  spec.log_max_bytes = 10000;
  spec.log_max_files = 5;
  auto proc = PodProcess::Start(spec);
  ASSERT_TRUE(proc.ok());
  (*proc)->Wait();
  proc->reset();
  // 25,000 bytes in files of 10,000: stdout.log.2, .1 full, 5,000 current.
  EXPECT_EQ(fs::file_size(dir / "stdout.log.2"), 10000u);
  EXPECT_EQ(fs::file_size(dir / "stdout.log.1"), 10000u);
  EXPECT_EQ(fs::file_size(dir / "stdout.log"), 5000u);
  fs::remove_all(dir);
}

TEST(PodProcessTest, DetachedProcessIsAdoptedWithItsLogsAndExitStatus) {
  fs::path dir = TempDir("adopt");
  ProcessSpec spec = Spec(dir, {"sh", "-c", "echo one; sleep 0.5; echo two; exit 4"});
  pid_t pgid = -1, workload = -1;
  uint64_t ticks = 0;
  {
    auto proc = PodProcess::Start(spec);
    ASSERT_TRUE(proc.ok()) << proc.status().ToString();
    pgid = (*proc)->pid();
    workload = (*proc)->workload_pid();
    ticks = (*proc)->start_ticks();
    EXPECT_NE(pgid, workload);  // the keeper leads the group, the workload is in it
    EXPECT_EQ(getpgid(workload), pgid);
    ASSERT_TRUE(WaitUntil([&] { return ReadWholeFile(dir / "stdout.log") == "one\n"; },
                          milliseconds(5000)));
    (*proc)->Detach();
  }  // the agent's side goes away; the process does not
  EXPECT_TRUE(ProcessGroupAlive(pgid));
  auto adopted = PodProcess::Adopt(spec, pgid, workload, ticks);
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  // The status comes from the keeper's file: 4, not a guess.
  EXPECT_EQ((*adopted)->Wait().Describe(), "exited with code 4");
  adopted->reset();
  EXPECT_EQ(ReadWholeFile(dir / "stdout.log"), "one\ntwo\n");
  fs::remove_all(dir);
}

TEST(PodProcessTest, GroupKilledWithItsKeeperReadsAsSigkill) {
  fs::path dir = TempDir("adoptkill");
  ProcessSpec spec = Spec(dir, {"sleep", "30"});
  auto proc = PodProcess::Start(spec);
  ASSERT_TRUE(proc.ok());
  const pid_t pgid = (*proc)->pid();
  auto adopted = PodProcess::Adopt(spec, pgid, (*proc)->workload_pid(), (*proc)->start_ticks());
  ASSERT_TRUE(adopted.ok());
  EXPECT_FALSE((*adopted)->Poll().has_value());
  EXPECT_TRUE((*adopted)->SignalGroup(SIGKILL));  // no one is left to write a status
  EXPECT_EQ((*proc)->Wait().Describe(), "killed by SIGKILL");  // reaped by its parent
  EXPECT_EQ((*adopted)->Wait().Describe(), "killed by SIGKILL");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tidal::agent
