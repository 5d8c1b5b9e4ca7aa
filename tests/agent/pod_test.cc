#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/http_get.h"
#include "agent/pod.h"
#include "agent/pod_env.h"
#include "agent/pod_spec.h"
#include "agent/start_limiter.h"
#include "tests/support/agent_fixtures.h"

namespace tidal::agent {
namespace {

namespace fs = std::filesystem;
using tidal::testing::ReadWholeFile;
using nlohmann::json;

fs::path TempDir(const std::string& name) {
  return tidal::testing::FreshTempDir("tidal_pod", name);
}

PodSpec ShellPod(const std::string& script, uint64_t workload = 7) {
  PodSpec spec;
  spec.key = {workload, 0, 0};
  spec.name = "job";
  spec.command = {"/bin/sh", "-c", script};
  return spec;
}

PodOptions Options(const fs::path& dir) {
  PodOptions o;
  o.node_name = "n1";
  o.pod_dir = (dir / "pod").string();
  o.checkpoint_dir = (dir / "ckpt").string();
  o.base_env = {{"PATH", "/usr/bin:/bin"}};
  return o;
}

// Ticks until the pod exits or `timeout_ms` passes; returns all events.
std::vector<PodEvent> RunUntilExit(Pod& pod, int timeout_ms) {
  std::vector<PodEvent> events;
  const int64_t end = WallClockMs() + timeout_ms;
  while (pod.phase() != Pod::Phase::kExited && WallClockMs() < end) {
    pod.Tick(WallClockMs(), events);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return events;
}

TEST(PodEnvTest, TorchrunVariablesGpusAndTidalPaths) {
  PodSpec spec;
  spec.key = {42, 5, 0};
  spec.name = "llm";
  spec.world_size = 8;
  spec.gpus = {4, 5, 6, 7};
  spec.master_addr = "10.0.0.1";
  spec.master_port = 29512;
  spec.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"}, {"LR", "0.1"}};
  PodEnvContext ctx;
  ctx.local_rank = 1;
  ctx.local_world_size = 2;
  ctx.checkpoint_dir = "/ckpt/w42";
  ctx.notice_file = "/pods/x/preempt-notice.json";
  ctx.base = {{"PATH", "/bin"}, {"LR", "overridden"}};
  std::vector<std::string> env = BuildPodEnv(spec, ctx);
  auto has = [&](const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  // The workload's env cannot widen its GPUs; its own keys win over the base.
  EXPECT_TRUE(has("CUDA_VISIBLE_DEVICES=4,5,6,7"));
  EXPECT_TRUE(has("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
  EXPECT_TRUE(has("LR=0.1"));
  EXPECT_TRUE(has("PATH=/bin"));
  EXPECT_TRUE(has("RANK=5"));
  EXPECT_TRUE(has("LOCAL_RANK=1"));
  EXPECT_TRUE(has("WORLD_SIZE=8"));
  EXPECT_TRUE(has("LOCAL_WORLD_SIZE=2"));
  EXPECT_TRUE(has("MASTER_ADDR=10.0.0.1"));
  EXPECT_TRUE(has("MASTER_PORT=29512"));
  EXPECT_TRUE(has("TIDAL_JOB_ID=42"));
  EXPECT_TRUE(has("TIDAL_CHECKPOINT_DIR=/ckpt/w42"));
  EXPECT_TRUE(has("TIDAL_PREEMPT_NOTICE_FILE=/pods/x/preempt-notice.json"));
  EXPECT_FALSE(std::any_of(env.begin(), env.end(), [](const std::string& kv) {
    return kv.starts_with("PORT=");
  }));
  spec.master_port = 0;
  spec.gpus = {};
  env = BuildPodEnv(spec, ctx);
  EXPECT_TRUE(has("MASTER_PORT=29542"));       // 29500 + 42 % 10000
  EXPECT_TRUE(has("CUDA_VISIBLE_DEVICES="));   // no GPUs: sees none
}

TEST(PodStopTest, NoticeFileSignalAndCheckpointInTime) {
  fs::path dir = TempDir("coop");
  // Checkpoints and exits on SIGTERM, reading the notice first.
  Pod pod(ShellPod("trap 'cp \"$TIDAL_PREEMPT_NOTICE_FILE\" \"$TIDAL_CHECKPOINT_DIR/ckpt\"; exit 0' "
                   "TERM; echo up; while :; do sleep 0.02; done"),
          Options(dir));
  std::vector<PodEvent> events;
  ASSERT_TRUE(pod.TryLaunch(WallClockMs(), events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].phase, "running");
  // Let the shell install its trap.
  for (int i = 0; i < 500 && ReadWholeFile(dir / "pod/stdout.log") != "up\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int64_t now = WallClockMs();
  StopNotice stop{"priority", 1000, 31000, SIGTERM};
  stop.checkpoint = true;  // the job saves on request: the notice asks
  pod.Stop(stop, now, events);
  EXPECT_EQ(pod.phase(), Pod::Phase::kStopping);
  json notice = json::parse(ReadWholeFile(pod.notice_file()));
  EXPECT_EQ(notice["cause"], "priority");
  EXPECT_EQ(notice["checkpoint"], true);
  EXPECT_EQ(notice["local_deadline_ms"], now + 30000);  // grace = 31000 - 1000
  events = RunUntilExit(pod, 5000);
  ASSERT_EQ(events.size(), 1u);
  const PodEvent& exit = events[0];
  EXPECT_EQ(exit.phase, "exited");
  EXPECT_EQ(exit.exit_code, 0);
  ASSERT_TRUE(exit.stop.has_value());
  EXPECT_EQ(exit.stop->notice_time_ms, now);
  EXPECT_FALSE(exit.stop->killed_at_deadline);
  EXPECT_TRUE(exit.stop->checkpointed_in_time);
  EXPECT_GT(exit.checkpoint_time_ms, 0);
  EXPECT_NE(exit.reason.find("stopped (priority)"), std::string::npos) << exit.reason;
  // The workload saw the notice: the checkpoint is a copy of it.
  EXPECT_EQ(json::parse(ReadWholeFile(dir / "ckpt/ckpt"))["cause"], "priority");
  fs::remove_all(dir);
}

TEST(PodStopTest, IgnoredSignalGetsSigkillAtTheGraceDeadline) {
  fs::path dir = TempDir("stubborn");
  Pod pod(ShellPod("trap '' TERM; echo up; sleep 30"), Options(dir));
  std::vector<PodEvent> events;
  pod.TryLaunch(WallClockMs(), events);
  for (int i = 0; i < 500 && ReadWholeFile(dir / "pod/stdout.log") != "up\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int64_t notice_ms = WallClockMs();
  pod.Stop(StopNotice{"reclaim", 0, 400, SIGTERM}, notice_ms, events);  // 400 ms grace
  events = RunUntilExit(pod, 5000);
  ASSERT_EQ(events.size(), 1u);
  const PodEvent& exit = events[0];
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_EQ(exit.exit_code, 128 + SIGKILL);
  ASSERT_TRUE(exit.stop.has_value());
  EXPECT_TRUE(exit.stop->killed_at_deadline);
  EXPECT_FALSE(exit.stop->checkpointed_in_time);
  // Not before the deadline; and promptly after it (ticks are 5 ms apart,
  // 1 s leaves room for a loaded 2-core machine).
  EXPECT_GE(exit.time_ms - notice_ms, 400);
  EXPECT_LT(exit.time_ms - notice_ms, 1400);
  EXPECT_NE(exit.reason.find("at the grace deadline"), std::string::npos);
  fs::remove_all(dir);
}

TEST(PodStopTest, StopBeforeLaunchNeverStartsTheProcess) {
  fs::path dir = TempDir("early");
  Pod pod(ShellPod("touch started"), Options(dir));
  std::vector<PodEvent> events;
  pod.Stop(StopNotice{"cancel", 0, 1000, SIGTERM}, WallClockMs(), events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].phase, "exited");
  EXPECT_EQ(pod.phase(), Pod::Phase::kExited);
  EXPECT_EQ(pod.pid(), -1);
  fs::remove_all(dir);
}

// The revision moves exactly when what the agent's files show of the pod
// changes (launch, notice, grace deadline, exit), never on a tick that
// changes nothing, and no two pods share one.
TEST(PodRevisionTest, MovesOnlyWhenWhatIsShownChanges) {
  fs::path dir = TempDir("revision");
  Pod pod(ShellPod("trap '' TERM; echo up; sleep 30"), Options(dir));
  Pod other(ShellPod("true", 8), Options(dir / "other"));
  EXPECT_NE(pod.revision(), other.revision());
  std::vector<PodEvent> events;
  uint64_t seen = pod.revision();
  auto moved = [&] {
    const bool m = pod.revision() != seen;
    seen = pod.revision();
    return m;
  };
  pod.Tick(WallClockMs(), events);  // not launched: nothing to show
  EXPECT_FALSE(moved());
  pod.TryLaunch(WallClockMs(), events);
  EXPECT_TRUE(moved());
  pod.TryLaunch(WallClockMs(), events);  // launched already: a no-op
  EXPECT_FALSE(moved());
  for (int i = 0; i < 500 && ReadWholeFile(dir / "pod/stdout.log") != "up\n"; ++i) {
    pod.Tick(WallClockMs(), events);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(moved());  // running ticks show nothing new
  const int64_t notice_ms = WallClockMs();
  pod.Stop(StopNotice{"reclaim", 0, 200, SIGTERM}, notice_ms, events);
  EXPECT_TRUE(moved());
  pod.Stop(StopNotice{"reclaim", 0, 200, SIGTERM}, notice_ms, events);  // later notices are ignored
  EXPECT_FALSE(moved());
  pod.Tick(notice_ms + 200, events);  // the grace deadline: SIGKILL, killed_at_deadline
  EXPECT_TRUE(moved());
  RunUntilExit(pod, 5000);
  ASSERT_EQ(pod.phase(), Pod::Phase::kExited);
  EXPECT_TRUE(moved());
  EXPECT_NE(pod.revision(), other.revision());
  fs::remove_all(dir);
}

TEST(PodReadinessTest, StartSlotHeldUntilReadyAndColdStartMeasured) {
  fs::path dir = TempDir("ready");
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  std::atomic<bool> ready{false};
  httplib::Server server;
  server.Get("/ready", [&](const httplib::Request&, httplib::Response& res) {
    res.status = ready ? 200 : 503;
  });
  server.Get("/load", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"rps": 12.5, "p95_ms": 40, "p99_ms": 80, "inflight": 3})", "application/json");
  });
  std::thread serving([&] { server.listen("127.0.0.1", *port); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  StartLimiter limiter(1);
  PodSpec spec = ShellPod("sleep 30");
  spec.readiness = HttpEndpoint{0, "/ready"};
  spec.load_endpoint = HttpEndpoint{0, "/load"};
  PodOptions options = Options(dir);
  options.port = *port;
  options.start_limiter = &limiter;
  Pod first(spec, options);
  spec.key.rank = 1;
  options.pod_dir = (dir / "pod2").string();
  Pod second(spec, options);

  std::vector<PodEvent> events;
  const int64_t t0 = WallClockMs();
  EXPECT_TRUE(first.TryLaunch(t0, events));
  EXPECT_FALSE(second.TryLaunch(t0, events));  // the one slot is taken
  EXPECT_EQ(limiter.in_use(), 1);
  first.Tick(t0 + 100, events);
  EXPECT_EQ(first.phase(), Pod::Phase::kStarting);
  EXPECT_FALSE(first.ReadLoad().has_value());  // no load before ready
  ready = true;
  first.Tick(t0 + 250, events);
  EXPECT_EQ(first.phase(), Pod::Phase::kReady);
  ASSERT_EQ(events.back().phase, "ready");
  EXPECT_EQ(events.back().cold_start_ms, 250);
  EXPECT_EQ(limiter.in_use(), 0);
  EXPECT_TRUE(second.TryLaunch(t0 + 260, events));
  auto load = first.ReadLoad();
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->rps, 12.5);
  EXPECT_EQ(load->p99_ms, 80);
  server.stop();
  serving.join();
  fs::remove_all(dir);
}

TEST(LoadReportTest, RejectsBadNumbers) {
  EXPECT_TRUE(ParseLoadReport(R"({"rps": 1})").ok());
  EXPECT_NE(ParseLoadReport(R"({"rps": "fast"})").status().message().find("load.rps"),
            std::string::npos);
  EXPECT_FALSE(ParseLoadReport("not json").ok());
  EXPECT_FALSE(ParseLoadReport(R"({"p99_ms": -1})").ok());
}

// A hostile pod's reply is refused by the agent, not forwarded: a figure the
// server would refuse in a pod event (above 1e9) would fail the agent's whole
// event batch, and deep nesting must not reach the parser.
TEST(LoadReportTest, RefusesWhatTheServerWouldRefuseAndDeepNesting) {
  auto huge = ParseLoadReport(R"({"rps": 1e12})");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("load.rps"), std::string::npos) << huge.status().message();
  auto deep = ParseLoadReport(std::string(1000, '[') + std::string(1000, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nest"), std::string::npos) << deep.status().message();
  // Extra keys stay allowed; a figure left out is 0.
  auto extra = ParseLoadReport(R"({"rps": 2, "inflight": 3})");
  ASSERT_TRUE(extra.ok());
  EXPECT_EQ(extra->rps, 2);
  EXPECT_EQ(extra->p99_ms, 0);
}

// A replica whose readiness probe passes at once, with its load endpoint at
// `server`'s /load; Ticked to ready.
class HostileLoadEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    server_.Get("/ready", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  }
  void TearDown() override {
    server_.stop();
    if (serving_.joinable()) serving_.join();
    fs::remove_all(dir_);
  }
  // Starts serving and returns a ready pod.
  std::unique_ptr<Pod> ReadyPod() {
    serving_ = std::thread([this] { server_.listen("127.0.0.1", port_); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    PodSpec spec = ShellPod("exec sleep 30");
    spec.readiness = HttpEndpoint{0, "/ready"};
    spec.load_endpoint = HttpEndpoint{0, "/load"};
    PodOptions options = Options(dir_);
    options.port = port_;
    auto pod = std::make_unique<Pod>(spec, options);
    std::vector<PodEvent> events;
    const int64_t t0 = WallClockMs();
    EXPECT_TRUE(pod->TryLaunch(t0, events));
    pod->Tick(t0 + 1, events);
    EXPECT_EQ(pod->phase(), Pod::Phase::kReady);
    return pod;
  }
  static void Kill(Pod& pod) {
    std::vector<PodEvent> events;
    const int64_t now = WallClockMs();
    pod.Stop(StopNotice{"cancel", now, now, SIGKILL}, now, events);
    RunUntilExit(pod, 5000);
  }
  fs::path dir_;
  int port_ = 0;
  httplib::Server server_;
  std::thread serving_;
};

TEST_F(HostileLoadEndpointTest, ABodyOverTheCapIsRefused) {
  // Valid JSON, but 1 KiB over the cap: refused whole, not truncated.
  const std::string body = R"({"rps": 1, "pad": ")" + std::string(kMaxProbeBodyBytes, 'x') + R"("})";
  server_.Get("/load", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(body, "application/json");
  });
  auto pod = ReadyPod();
  EXPECT_FALSE(pod->ReadLoad().has_value());
  auto reply = HttpGet("127.0.0.1", port_, "/load", std::chrono::seconds(5));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), StatusCode::kResourceExhausted) << reply.status().message();
  Kill(*pod);
}

TEST_F(HostileLoadEndpointTest, ATricklingEndpointCannotStallTheAgentLoop) {
  // One byte every 20 ms, forever: each read succeeds well within the probe
  // timeout, so only a deadline on the whole request ends it. Without one,
  // ReadLoad never returns (the agent stops heartbeating, and every pod on
  // the node is lost): this test then hangs until CTest's timeout.
  std::atomic<bool> stop{false};
  server_.Get("/load", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return !stop && sink.write(" ", 1);
    });
  });
  auto pod = ReadyPod();
  EXPECT_FALSE(pod->ReadLoad().has_value());
  stop = true;
  Kill(*pod);
}

}  // namespace
}  // namespace tidal::agent
