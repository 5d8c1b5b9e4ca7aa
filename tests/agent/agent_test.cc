#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/control_plane.h"
#include "agent/fake_gpu_probe.h"
#include "agent/pod_process.h"
#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "protocol/pod_assignment.h"
#include "protocol/pod_event.h"
#include "protocol/pod_log.h"
#include "tests/support/agent_fixtures.h"

namespace tidal::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using tidal::testing::ReadWholeFile;
using tidal::testing::WaitUntil;
using std::chrono::milliseconds;

ino_t ReadInode(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Records what the agent sends, decoded with the server's protocol decoders
// (so a field the agent drops or misnames fails here), and answers
// heartbeats with `pods`, encoded like the server does.
class FakeServer final : public ControlPlane {
 public:
  StatusOr<Lease> Register(const json& body) override {
    auto reg = protocol::NodeRegistrationFromJson(body);
    EXPECT_TRUE(reg.ok()) << reg.status().ToString();
    if (!reg.ok()) return reg.status();
    registrations.push_back(*reg);
    return Lease{30, 5};
  }
  StatusOr<json> Heartbeat(const std::string& node, const json& body) override {
    EXPECT_EQ(node, "n1");
    auto heartbeat = protocol::HeartbeatFromJson(body);
    EXPECT_TRUE(heartbeat.ok()) << heartbeat.status().ToString();
    if (!heartbeat.ok()) return heartbeat.status();
    heartbeats.push_back(*heartbeat);
    if (unknown_node) {
      unknown_node = false;
      return NotFound("node n1: not registered");
    }
    // Like the server, stop listing ranks whose exit was reported.
    std::vector<PodSpec> listed;
    for (const PodSpec& p : pods) {
      if (!exited.count({p.key.workload, p.key.rank})) listed.push_back(p);
    }
    return protocol::HeartbeatReplyToJson({30, listed});
  }
  Status ReportEvents(const std::string&, const json& body) override {
    if (fail_reports > 0) {
      --fail_reports;
      return Unavailable("server restarting");
    }
    auto batch = protocol::PodEventBatchFromJson(body);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) return batch.status();
    for (const PodEvent& e : batch->events) {
      events.push_back(e);
      if (e.phase == "exited") exited.insert({e.key.workload, e.key.rank});
    }
    return Status::Ok();
  }
  Status ShipLogs(const std::string& node, const json& body) override {
    EXPECT_EQ(node, "n1");
    auto batch = protocol::PodLogBatchFromJson(body);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) return batch.status();
    for (const protocol::PodLogChunk& c : batch->chunks) logs[{c.key.workload, c.key.rank}] += c.data;
    ++log_uploads;
    return Status::Ok();
  }
  std::vector<PodEvent> PhaseEvents(const std::string& phase, int rank = -1) const {
    std::vector<PodEvent> out;
    for (const PodEvent& e : events) {
      if (e.phase == phase && (rank < 0 || e.key.rank == rank)) out.push_back(e);
    }
    return out;
  }

  std::vector<protocol::NodeRegistration> registrations;
  std::vector<protocol::Heartbeat> heartbeats;
  std::vector<PodEvent> events;
  std::vector<PodSpec> pods;
  std::set<std::pair<uint64_t, int>> exited;
  std::map<std::pair<uint64_t, int>, std::string> logs;  // what ShipLogs got, per rank
  int log_uploads = 0;
  int fail_reports = 0;
  bool unknown_node = false;
};

PodSpec TrainPod(int rank, std::vector<std::string> command, std::vector<int> gpus) {
  PodSpec pod;
  pod.key = {5, rank, 0};
  pod.name = "train";
  pod.kind = "training";
  pod.world_size = 2;
  pod.gpus = std::move(gpus);
  pod.master_addr = "127.0.0.1";
  pod.master_port = 29505;
  pod.command = std::move(command);
  pod.checkpoint_dir_key = "w5";
  return pod;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tidal::testing::FreshTempDir(
        "tidal_agent", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto spec = ParseFakeGpuSpec("4xH100-80GB,nvlink=2x2,faults=" + (dir_ / "faults").string());
    ASSERT_TRUE(spec.ok());
    probe_ = std::make_unique<FakeGpuProbe>(*spec);
    config_.name = "n1";
    config_.work_dir = (dir_ / "work").string();
    config_.labels = {{"team", "nlp"}};
    config_.taints = {{"dedicated", "nlp"}};
    config_.sync_interval = std::chrono::milliseconds(50);
    config_.default_grace = std::chrono::milliseconds(300);
    config_.sample_interval = std::chrono::milliseconds(200);
    agent_ = std::make_unique<Agent>(config_, *probe_, server_);
    ASSERT_TRUE(agent_->Start(WallClockMs()).ok());
  }
  void TearDown() override {
    agent_.reset();
    fs::remove_all(dir_);
  }
  // Steps the agent until `cond` holds (or 10 s pass).
  bool StepUntil(const std::function<bool()>& cond) {
    for (int i = 0; i < 1000; ++i) {
      agent_->Step(WallClockMs());
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  fs::path dir_;
  AgentConfig config_;
  FakeServer server_;
  std::unique_ptr<FakeGpuProbe> probe_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, RegistersInventoryLabelsAndTaints) {
  ASSERT_EQ(server_.registrations.size(), 1u);
  const protocol::NodeRegistration& r = server_.registrations[0];
  EXPECT_EQ(r.name, "n1");
  EXPECT_EQ(r.gpu_model, "H100-80GB");
  EXPECT_EQ(r.gpu_memory_gib, 80);
  ASSERT_EQ(r.gpus->size(), 4u);
  EXPECT_EQ((*r.gpus)[2].uuid, "GPU-fake-0002");
  EXPECT_EQ(r.nvlink_domains, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(r.labels->at("team"), "nlp");
  EXPECT_EQ((*r.taints)[0].key, "dedicated");
}

TEST_F(AgentTest, RunsDesiredPodsWithLocalRanksAndReportsExits) {
  server_.pods = {TrainPod(1, {"env"}, {2, 3}), TrainPod(0, {"env"}, {0, 1})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("exited").size() == 2; }));
  for (const PodEvent& e : server_.PhaseEvents("exited")) {
    EXPECT_EQ(e.exit_code, 0);
    EXPECT_EQ(e.reason, "completed");
  }
  EXPECT_EQ(server_.PhaseEvents("running").size(), 2u);
  const std::string rank1 = ReadWholeFile(dir_ / "work/pods/5-r1-a0-0/stdout.log");
  EXPECT_NE(rank1.find("RANK=1\n"), std::string::npos);
  EXPECT_NE(rank1.find("LOCAL_RANK=1\n"), std::string::npos);
  EXPECT_NE(rank1.find("CUDA_VISIBLE_DEVICES=2,3\n"), std::string::npos);
  EXPECT_NE(rank1.find("MASTER_PORT=29505\n"), std::string::npos);
  EXPECT_NE(rank1.find("TIDAL_CHECKPOINT_DIR=" + (dir_ / "work/checkpoints/w5").string()),
            std::string::npos);
  EXPECT_NE(ReadWholeFile(dir_ / "work/pods/5-r0-a0-1/stdout.log").find("LOCAL_RANK=0\n"),
            std::string::npos);
  // The agent never restarts an exited pod by itself, and forgets it once
  // the server knows of the exit.
  for (int i = 0; i < 10; ++i) agent_->Step(WallClockMs());
  EXPECT_EQ(server_.PhaseEvents("running").size(), 2u);
  EXPECT_TRUE(agent_->Pods().empty());
  // Listed again (the job was requeued and placed here again): a new run.
  server_.exited.clear();
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 4; }));
}

// What a pod writes reaches the server (both streams, every byte once),
// including what it wrote just before it exited; invalid UTF-8 arrives as
// U+FFFD.
TEST_F(AgentTest, UploadsPodOutputOnceIncludingTheLastLines) {
  server_.pods = {TrainPod(0, {"/bin/sh", "-c", "echo out-1; echo err-1 >&2; printf 'bad-\\377\\n'; echo last"}, {0})};
  ASSERT_TRUE(StepUntil([&] {
    const std::string& log = server_.logs[{5, 0}];
    return server_.PhaseEvents("exited").size() == 1 && log.find("last\n") != std::string::npos &&
           log.find("err-1\n") != std::string::npos;
  })) << server_.logs[{5, 0}];
  const std::string log = server_.logs[{5, 0}];
  // Each stream in order; the two interleave by upload.
  std::string out_lines, err_lines;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) (line.starts_with("err") ? err_lines : out_lines) += line + "\n";
  EXPECT_EQ(out_lines, "out-1\nbad-\xEF\xBF\xBD\nlast\n") << log;
  EXPECT_EQ(err_lines, "err-1\n") << log;
  // More syncs upload nothing again.
  for (int i = 0; i < 10; ++i) agent_->Step(WallClockMs());
  EXPECT_EQ((server_.logs[{5, 0}]), log);
}

TEST_F(AgentTest, StopNoticeFromServerAndUnlistedPodsAreStopped) {
  server_.pods = {TrainPod(0, {"sleep", "30"}, {0}), TrainPod(1, {"sleep", "30"}, {1})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 2; }));
  pid_t unlisted_pid = -1;
  for (const PodView& v : agent_->Pods()) {
    if (v.key.rank == 1) unlisted_pid = v.pid;
  }
  ASSERT_GT(unlisted_pid, 0);
  const int64_t now = WallClockMs();
  server_.pods[0].desired_run = false;
  server_.pods[0].notice = StopNotice{"priority", now, now + 5000, SIGTERM};
  server_.pods.erase(server_.pods.begin() + 1);  // rank 1 is no longer listed at all
  ASSERT_TRUE(StepUntil([&] {
    return server_.PhaseEvents("exited").size() == 1 && agent_->Pods().empty();
  }));
  const PodEvent r0 = server_.PhaseEvents("exited", 0)[0];
  EXPECT_EQ(r0.signal, SIGTERM);  // sleep dies of the notice's SIGTERM
  // The stop outcome reaches the server (it once travelled only in
  // `reason`): notice delivered now, not killed, nothing checkpointed.
  ASSERT_TRUE(r0.stop.has_value());
  EXPECT_GE(r0.stop->notice_time_ms, now);
  EXPECT_FALSE(r0.stop->killed_at_deadline);
  EXPECT_FALSE(r0.stop->checkpointed_in_time);
  const std::string reason = r0.reason;
  EXPECT_TRUE(std::regex_search(
      reason, std::regex(R"(^stopped \(priority\): killed by SIGTERM; [0-9]+\.[0-9] s after the notice, no new checkpoint$)")))
      << reason;
  EXPECT_EQ(reason.find("grace deadline"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "work/pods/5-r0-a0-0/preempt-notice.json"));
  // The unlisted pod was stopped too, but its exit is not reported: the
  // server forgot it, and would take the exit for a later run of rank 1.
  EXPECT_TRUE(server_.PhaseEvents("exited", 1).empty());
  EXPECT_FALSE(ProcessGroupAlive(unlisted_pid));
}

TEST_F(AgentTest, RelistedRankWhileTheOldRunStopsIsANewPod) {
  server_.pods = {TrainPod(0, {"sh", "-c", "trap 'sleep 0.3; exit 0' TERM; sleep 30 & wait"}, {0})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 1; }));
  const PodSpec pod = server_.pods[0];
  server_.pods.clear();
  agent_->Step(WallClockMs() + 100);  // unlisted: retires, stopping
  server_.pods = {pod};  // placed here again at once
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 2; }));
  // The new run waited for the old one to leave GPU 0.
  EXPECT_TRUE(server_.PhaseEvents("exited").empty());
  std::vector<PodView> pods = agent_->Pods();
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].phase, "running");
}

TEST_F(AgentTest, StopForAPodNeverRunHereIsAnsweredWithItsExitOnce) {
  PodSpec pod = TrainPod(0, {"sleep", "30"}, {0});
  pod.desired_run = false;
  pod.notice = StopNotice{"priority", 0, 1000, SIGTERM};
  server_.pods = {pod};
  server_.exited.clear();
  for (int i = 0; i < 5; ++i) {
    agent_->Step(WallClockMs());
    server_.exited.clear();  // keep listing it: the answer must not repeat
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  ASSERT_EQ(server_.PhaseEvents("exited").size(), 1u);
  EXPECT_NE(server_.PhaseEvents("exited")[0].reason.find("not running on this node"),
            std::string::npos);
  EXPECT_TRUE(server_.PhaseEvents("running").empty());
  EXPECT_TRUE(agent_->Pods().empty());
}

TEST_F(AgentTest, XidForcesAnImmediateHeartbeatMarkingTheGpuUnhealthy) {
  agent_->Step(WallClockMs());
  const size_t before = server_.heartbeats.size();
  { std::ofstream(dir_ / "faults") << "xid 3 79\n"; }
  agent_->Step(WallClockMs());  // within the sync interval: only the fault triggers it
  ASSERT_EQ(server_.heartbeats.size(), before + 1);
  const protocol::GpuReport& gpu3 = server_.heartbeats.back().gpus[3];
  EXPECT_EQ(gpu3.healthy, false);
  EXPECT_EQ(gpu3.xid, 79);
  EXPECT_EQ(server_.heartbeats.back().gpus[2].healthy, true);
  EXPECT_EQ(agent_->failed_gpus(), std::set<int>({3}));
  EXPECT_NE(ReadWholeFile(dir_ / "work/pods.json").find("\"failed_gpus\": [\n  3\n ]"),
            std::string::npos);
}

// The agent's files are rewritten (a new file renamed over the old one,
// so a new inode) when what they show changes, not on every tick: 256
// agents rewriting theirs each tick took most of their CPU on one host.
TEST_F(AgentTest, FilesAreRewrittenOnlyWhenWhatTheyShowChanges) {
  auto inodes = [&] {
    return std::pair(ReadInode(dir_ / "work/pods.json"), ReadInode(dir_ / "work/agent-state.json"));
  };
  server_.pods = {TrainPod(0, {"sh", "-c", "trap '' TERM; sleep 30"}, {0})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 1; }));
  agent_->Step(WallClockMs());
  const auto running = inodes();
  EXPECT_NE(ReadWholeFile(dir_ / "work/pods.json").find("\"phase\": \"running\""), std::string::npos);
  for (int i = 0; i < 10; ++i) {
    agent_->Step(WallClockMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(inodes(), running);
  // A stop notice changes the pod's state (it ignores SIGTERM, so it stops
  // at the grace deadline): both files are written again.
  const int64_t now = WallClockMs();
  server_.pods[0].desired_run = false;
  server_.pods[0].notice = StopNotice{"priority", now, now + 300, SIGTERM};
  ASSERT_TRUE(StepUntil([&] { return inodes().second != running.second; }));
  EXPECT_NE(inodes().first, running.first);
  EXPECT_NE(ReadWholeFile(dir_ / "work/agent-state.json").find("\"notice\""), std::string::npos);
  ASSERT_TRUE(StepUntil([&] { return agent_->Pods().empty(); }));
  agent_->Step(WallClockMs());
  EXPECT_EQ(ReadWholeFile(dir_ / "work/pods.json").find("\"workload\""), std::string::npos);
}

TEST_F(AgentTest, UnsentEventsAreKeptAndResentInOrder) {
  server_.fail_reports = 3;
  server_.pods = {TrainPod(0, {"true"}, {0})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("exited").size() == 1; }));
  ASSERT_EQ(server_.PhaseEvents("running").size(), 1u);
  size_t running_at = 0, exited_at = 0;
  for (size_t i = 0; i < server_.events.size(); ++i) {
    if (server_.events[i].phase == "running") running_at = i;
    if (server_.events[i].phase == "exited") exited_at = i;
  }
  EXPECT_LT(running_at, exited_at);
}

TEST_F(AgentTest, UnknownNodeRegistersAgain) {
  server_.unknown_node = true;
  ASSERT_TRUE(StepUntil([&] { return server_.registrations.size() == 2; }));
}

TEST_F(AgentTest, BusyPodsShowGpuUtilizationIdleOnesDoNot) {
  // One pod burns CPU (a stand-in for a GPU kernel), the other sleeps.
  server_.pods = {TrainPod(0, {"sh", "-c", "while :; do :; done"}, {0}),
                  TrainPod(1, {"sleep", "30"}, {1})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 2; }));
  // Busy = at least 2% of a core over a 200 ms sample. A sample that
  // covers a pod's start counts the start's own CPU (exec, the sanitizers'
  // start-up), so the idle pod is judged in a later one.
  EXPECT_TRUE(StepUntil([&] {
    bool busy = false, idle = false;
    for (const PodView& v : agent_->Pods()) {
      if (v.key.rank == 0) busy = v.utilization > 0.5;
      if (v.key.rank == 1) idle = v.utilization < 0.1;
    }
    return busy && idle;
  }));
  // The next heartbeat carries the sample just taken.
  const size_t sent = server_.heartbeats.size();
  ASSERT_TRUE(StepUntil([&] { return server_.heartbeats.size() > sent; }));
  const protocol::Heartbeat& hb = server_.heartbeats.back();
  EXPECT_GT(hb.gpus[0].memory_used_gib.value_or(-1), 40.0);  // 60% of 80 GiB = 48
  EXPECT_EQ(hb.gpus[2].memory_used_gib.value_or(-1), 0.0);
}

// Processes (not zombies) with `arg` among their arguments.
int CountProcessesWithArg(const std::string& arg) {
  int count = 0;
  for (const tidal::testing::ProcessInfo& p : tidal::testing::LiveProcesses()) {
    count += std::count(p.argv.begin(), p.argv.end(), arg) > 0 ? 1 : 0;
  }
  return count;
}

TEST_F(AgentTest, RestartedAgentAdoptsItsRunningPodInsteadOfStartingItAgain) {
  // $0 of the shell is a marker that names this pod's process alone.
  const std::string marker = "adopt-marker-" + std::to_string(getpid());
  server_.pods = {TrainPod(
      0, {"sh", "-c", "trap 'echo bye; exit 0' TERM; while :; do echo tick; sleep 0.05; done",
          marker},
      {0})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 1; }));
  const PodView before = agent_->Pods().at(0);
  ASSERT_GT(before.workload_pid, 0);
  agent_->Detach();
  agent_.reset();  // the agent goes; its pod stays
  EXPECT_TRUE(ProcessGroupAlive(before.pid));

  agent_ = std::make_unique<Agent>(config_, *probe_, server_);
  ASSERT_TRUE(agent_->Start(WallClockMs()).ok());
  std::vector<PodView> after = agent_->Pods();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].pid, before.pid);
  EXPECT_EQ(after[0].workload_pid, before.workload_pid);
  EXPECT_EQ(after[0].pod_dir, before.pod_dir);
  EXPECT_EQ(after[0].phase, "running");
  // The server still lists it: no second start, no second process, and its
  // log (pumped by the new agent now) keeps growing.
  const fs::path log = fs::path(before.pod_dir) / "stdout.log";
  const size_t logged = ReadWholeFile(log).size();
  for (int i = 0; i < 20; ++i) {
    agent_->Step(WallClockMs());
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(server_.PhaseEvents("running").size(), 1u);
  EXPECT_EQ(agent_->Pods().size(), 1u);
  EXPECT_EQ(CountProcessesWithArg(marker), 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "work/pods"), fs::directory_iterator()), 1);
  EXPECT_TRUE(WaitUntil([&] { return ReadWholeFile(log).size() > logged + 20; }, milliseconds(3000)));

  // The new agent runs the stop protocol and reports the exit.
  const int64_t now = WallClockMs();
  server_.pods[0].desired_run = false;
  server_.pods[0].notice = StopNotice{"priority", now, now + 5000, SIGTERM};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("exited").size() == 1; }));
  const std::string reason = server_.PhaseEvents("exited")[0].reason;
  EXPECT_NE(reason.find("stopped (priority): exited with code 0"), std::string::npos) << reason;
  EXPECT_TRUE(WaitUntil([&] { return !ProcessGroupAlive(before.pid); }, milliseconds(3000)));
  EXPECT_TRUE(WaitUntil([&] { return ReadWholeFile(log).find("bye\n") != std::string::npos; },
                        milliseconds(3000)));
}

TEST_F(AgentTest, ExitWhileNoAgentRanIsReportedByTheNextWithItsCode) {
  server_.pods = {TrainPod(0, {"sh", "-c", "sleep 0.3; exit 3"}, {0})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 1; }));
  const pid_t pgid = agent_->Pods().at(0).pid;
  agent_->Detach();
  agent_.reset();
  ASSERT_TRUE(WaitUntil([&] { return !ProcessGroupAlive(pgid); }, milliseconds(5000)));
  agent_ = std::make_unique<Agent>(config_, *probe_, server_);
  ASSERT_TRUE(agent_->Start(WallClockMs()).ok());
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("exited").size() == 1; }));
  const PodEvent e = server_.PhaseEvents("exited")[0];
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.reason, "failed: exited with code 3");
  EXPECT_EQ(server_.PhaseEvents("running").size(), 1u);  // not started again
}

TEST_F(AgentTest, PodsOfAnAgentThatNeverComesBackDieAfterTheOrphanTimeout) {
  agent_.reset();
  config_.orphan_timeout = milliseconds(600);
  agent_ = std::make_unique<Agent>(config_, *probe_, server_);
  ASSERT_TRUE(agent_->Start(WallClockMs()).ok());
  server_.pods = {TrainPod(0, {"sleep", "30"}, {0})};
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 1; }));
  const pid_t pgid = agent_->Pods().at(0).pid;
  agent_->Detach();
  agent_.reset();
  // No agent touches the lease file any more: alive for the timeout (0.6 s
  // after the last touch, which was at most 1 s before), then killed.
  EXPECT_TRUE(ProcessGroupAlive(pgid));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessGroupAlive(pgid); }, milliseconds(4000)));
}

// A server that hangs: once armed, every call after the current heartbeat
// blocks for `stall_ms`. Called from the agent's sync thread.
class StallingServer final : public ControlPlane {
 public:
  StatusOr<Lease> Register(const json&) override { return Lease{30, 5}; }
  StatusOr<json> Heartbeat(const std::string&, const json&) override {
    Stall();
    std::lock_guard lock(mu);
    if (arm) {
      arm = false;
      stall_ms = 2000;
    }
    return protocol::HeartbeatReplyToJson({std::nullopt, pods});
  }
  Status ReportEvents(const std::string&, const json& body) override {
    Stall();
    std::lock_guard lock(mu);
    auto batch = protocol::PodEventBatchFromJson(body);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (batch.ok()) events.insert(events.end(), batch->events.begin(), batch->events.end());
    return Status::Ok();
  }
  void Stall() {
    int ms;
    {
      std::lock_guard lock(mu);
      ms = stall_ms;
    }
    std::this_thread::sleep_for(milliseconds(ms));
  }

  std::mutex mu;
  std::vector<PodSpec> pods;
  std::vector<PodEvent> events;
  bool arm = false;
  int stall_ms = 0;
};

TEST_F(AgentTest, AHangingServerDoesNotDelayTheGraceDeadlineKill) {
  agent_.reset();
  StallingServer server;
  Agent agent(config_, *probe_, server);
  ASSERT_TRUE(agent.Start(WallClockMs()).ok());
  {
    std::lock_guard lock(server.mu);
    // Ignores SIGTERM: only the SIGKILL at the deadline ends it.
    server.pods = {TrainPod(0, {"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}, {0})};
  }
  std::atomic<bool> stop{false};
  std::thread loop([&] { agent.Run([&] { return stop.load(); }, milliseconds(20)); });
  auto phase = [&] {
    std::vector<PodView> pods = agent.Pods();
    return pods.empty() ? std::string() : pods[0].phase;
  };
  ASSERT_TRUE(WaitUntil([&] { return phase() == "running"; }, milliseconds(5000)));
  const int64_t notice_ms = WallClockMs();
  {
    std::lock_guard lock(server.mu);
    server.pods[0].desired_run = false;
    server.pods[0].notice = StopNotice{"priority", notice_ms, notice_ms + 300, SIGTERM};
    server.arm = true;  // the reply with the notice is the last quick one
  }
  // Notice within a sync (50 ms), SIGKILL 300 ms later, reaped on the next
  // tick: well under 1.5 s, while every server call now hangs for 2 s.
  EXPECT_TRUE(WaitUntil([&] { return phase() == "exited"; }, milliseconds(1500)));
  EXPECT_LT(WallClockMs() - notice_ms, 1500);
  // The exit reaches the server once it answers again.
  EXPECT_TRUE(WaitUntil([&] {
    std::lock_guard lock(server.mu);
    return !server.events.empty() && server.events.back().phase == "exited";
  }, milliseconds(8000)));
  stop = true;
  loop.join();
  std::lock_guard lock(server.mu);
  ASSERT_FALSE(server.events.empty());
  const std::string reason = server.events.back().reason;
  EXPECT_NE(reason.find("killed by SIGKILL at the grace deadline"), std::string::npos) << reason;
}

// A server without the pod watch answers GET .../pods at once and with no
// version: the agent must fall back to heartbeat lists after one call, not
// ask again in a loop (which would hammer that server).
class ServerWithoutWatch final : public ControlPlane {
 public:
  StatusOr<Lease> Register(const json&) override { return Lease{30, 5}; }
  StatusOr<json> Heartbeat(const std::string&, const json&) override {
    std::lock_guard lock(mu);
    ++heartbeats;
    return protocol::HeartbeatReplyToJson({30, pods});
  }
  StatusOr<json> WatchPods(const std::string&, const std::string&, Duration) override {
    std::lock_guard lock(mu);
    ++watches;
    return protocol::PodAssignmentListToJson({pods, ""});
  }
  Status ReportEvents(const std::string&, const json&) override { return Status::Ok(); }

  std::mutex mu;
  std::vector<PodSpec> pods;
  int heartbeats = 0;
  int watches = 0;
};

TEST_F(AgentTest, AServerWithoutThePodWatchIsAskedOnceAndHeartbeatsCarryThePods) {
  agent_.reset();
  ServerWithoutWatch server;
  Agent agent(config_, *probe_, server);
  ASSERT_TRUE(agent.Start(WallClockMs()).ok());
  {
    std::lock_guard lock(server.mu);
    server.pods = {TrainPod(0, {"sleep", "30"}, {0})};
  }
  std::atomic<bool> stop{false};
  std::thread loop([&] { agent.Run([&] { return stop.load(); }, milliseconds(20)); });
  // Several heartbeats (50 ms apart here) and the pod from their lists.
  EXPECT_TRUE(WaitUntil([&] {
    std::lock_guard lock(server.mu);
    return server.heartbeats >= 5;
  }, milliseconds(5000)));
  EXPECT_TRUE(WaitUntil([&] { return !agent.Pods().empty() && agent.Pods()[0].phase == "running"; },
                        milliseconds(5000)));
  stop = true;
  loop.join();
  std::lock_guard lock(server.mu);
  EXPECT_EQ(server.watches, 1);
}

// What the watch fakes below share: a watch that ends when the agent
// cancels it, and the pod events they count.
class WatchFake : public ControlPlane {
 public:
  void CancelWatch() override {
    std::lock_guard lock(mu);
    cancelled = true;
    cv.notify_all();
  }
  Status ReportEvents(const std::string&, const json& body) override {
    auto batch = protocol::PodEventBatchFromJson(body);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) return batch.status();
    std::lock_guard lock(mu);
    for (const PodEvent& e : batch->events) {
      if (e.phase == "running") ++started;
      if (e.phase == "exited") ++exited;
    }
    cv.notify_all();
    return Status::Ok();
  }

  std::mutex mu;
  std::condition_variable cv;
  int watches = 0;
  int started = 0;
  int exited = 0;
  bool cancelled = false;
};

// The pod watch and the event sender run side by side: a watch reply the
// server computed just before it took a pod's exit can arrive just after
// the agent delivered it. The fake answers the second watch with such a
// stale list (the pod still named), once the exit is delivered; the agent
// must not start the pod a second time. The third list, asked for after the
// exit, omits the pod; the fourth names it again: a new run (the job was
// placed here again), which does start.
class StaleWatchServer final : public WatchFake {
 public:
  StatusOr<Lease> Register(const json&) override { return Lease{30, 5}; }
  StatusOr<json> Heartbeat(const std::string&, const json&) override {
    std::lock_guard lock(mu);
    // The sync thread heartbeats before it sends events: one after the
    // exit comes once the agent has forgotten the pod.
    if (exited > 0) ++heartbeats_after_exit;
    cv.notify_all();
    return protocol::HeartbeatReplyToJson({30, std::nullopt});
  }
  StatusOr<json> WatchPods(const std::string&, const std::string& version, Duration) override {
    std::unique_lock lock(mu);
    const int call = ++watches;
    if (call == 2) cv.wait(lock, [&] { return heartbeats_after_exit > 0 || cancelled; });
    // Time for a wrongly started second run to show (its "running" event),
    // before the list that would retire it.
    if (call == 3) cv.wait(lock, [&] { return started > 1 || heartbeats_after_exit > 5 || cancelled; });
    if (call >= 5) {
      // Nothing changes any more: a long poll that ends with the test.
      cv.wait(lock, [&] { return cancelled; });
      return protocol::PodAssignmentListToJson({{}, version});
    }
    std::vector<PodSpec> pods;
    if (call != 3) pods = {pod};
    return protocol::PodAssignmentListToJson({pods, std::to_string(call)});
  }
  PodSpec pod = TrainPod(0, {"true"}, {0});
  int heartbeats_after_exit = 0;
};

TEST_F(AgentTest, AWatchListOlderThanADeliveredExitDoesNotStartThePodAgain) {
  agent_.reset();
  StaleWatchServer server;
  Agent agent(config_, *probe_, server);
  ASSERT_TRUE(agent.Start(WallClockMs()).ok());
  std::atomic<bool> stop{false};
  std::thread loop([&] { agent.Run([&] { return stop.load(); }, milliseconds(20)); });
  // The fifth watch is asked for once the fourth list was reconciled, and
  // the second exit follows the fourth list's run.
  const bool done = WaitUntil([&] {
    std::lock_guard lock(server.mu);
    return server.watches >= 5 && server.exited >= 2;
  }, milliseconds(10000));
  stop = true;
  loop.join();
  ASSERT_TRUE(done);
  std::lock_guard lock(server.mu);
  // 2 runs: the first list's and the fourth's; none from the stale second
  // (which would make 3).
  EXPECT_EQ(server.started, 2);
  EXPECT_EQ(server.exited, 2);
}

// A server with the pod watch: the first list places one pod, later watches
// wait for the end of the test. Heartbeats say whether the agent follows
// its pods by the watch.
class WatchingServer final : public WatchFake {
 public:
  StatusOr<Lease> Register(const json&) override { return Lease{30, 1}; }
  StatusOr<json> Heartbeat(const std::string&, const json& body) override {
    auto heartbeat = protocol::HeartbeatFromJson(body);
    EXPECT_TRUE(heartbeat.ok()) << heartbeat.status().ToString();
    std::lock_guard lock(mu);
    if (heartbeat.ok() && heartbeat->pods_by_watch) ++heartbeats_by_watch;
    return protocol::HeartbeatReplyToJson({30, std::nullopt});
  }
  StatusOr<json> WatchPods(const std::string&, const std::string& version, Duration) override {
    std::unique_lock lock(mu);
    if (++watches == 1) return protocol::PodAssignmentListToJson({{pod}, "1"});
    cv.wait(lock, [&] { return cancelled; });
    return protocol::PodAssignmentListToJson({{pod}, version});
  }
  PodSpec pod = TrainPod(0, {"sleep", "30"}, {0});
  int heartbeats_by_watch = 0;
};

TEST_F(AgentTest, APodListIsActedOnAtOnceNotAtTheNextTick) {
  agent_.reset();
  WatchingServer server;
  Agent agent(config_, *probe_, server);
  ASSERT_TRUE(agent.Start(WallClockMs()).ok());
  std::atomic<bool> stop{false};
  // A tick far longer than the test: the pod starts, and its "running"
  // event reaches the server, only because the list wakes the tick and the
  // event sender does not wait for one.
  std::thread loop([&] { agent.Run([&] { return stop.load(); }, seconds(600)); });
  const bool started = WaitUntil([&] {
    std::lock_guard lock(server.mu);
    return server.started == 1;
  }, milliseconds(10000));
  // Once the watch answered, heartbeats (every second here) ask for no pods.
  const bool lean = WaitUntil([&] {
    std::lock_guard lock(server.mu);
    return server.heartbeats_by_watch > 0;
  }, milliseconds(10000));
  stop = true;
  loop.join();
  EXPECT_TRUE(started);
  EXPECT_TRUE(lean);
  agent.Shutdown(milliseconds(100));
}

}  // namespace
}  // namespace tidal::agent
