#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/control_plane.h"
#include "agent/fake_gpu_probe.h"
#include "agent/pod_process.h"

namespace tidal::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("tidal_agent_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Records what the agent sends and answers heartbeats with `pods`.
class FakeServer final : public ControlPlane {
 public:
  StatusOr<Lease> Register(const json& body) override {
    registrations.push_back(body);
    return Lease{30, 5};
  }
  StatusOr<json> Heartbeat(const std::string& node, const json& body) override {
    EXPECT_EQ(node, "n1");
    heartbeats.push_back(body);
    if (unknown_node) {
      unknown_node = false;
      return NotFound("node n1: not registered");
    }
    // Like the server, stop listing ranks whose exit was reported.
    json listed = json::array();
    for (const json& p : pods) {
      if (!exited.count({p["workload"].get<uint64_t>(), p["rank"].get<int>()})) listed.push_back(p);
    }
    return json{{"lease_s", 30}, {"pods", listed}};
  }
  Status ReportEvents(const std::string&, const json& body) override {
    if (fail_reports > 0) {
      --fail_reports;
      return Unavailable("server restarting");
    }
    for (const json& e : body["events"]) {
      events.push_back(e);
      if (e.value("phase", "") == "exited") exited.insert({e["workload"].get<uint64_t>(), e["rank"].get<int>()});
    }
    return Status::Ok();
  }
  std::vector<json> PhaseEvents(const std::string& phase, int rank = -1) const {
    std::vector<json> out;
    for (const json& e : events) {
      if (e.value("phase", "") == phase && (rank < 0 || e["rank"] == rank)) {
        out.push_back(e);
      }
    }
    return out;
  }

  std::vector<json> registrations, heartbeats, events;
  json pods = json::array();
  std::set<std::pair<uint64_t, int>> exited;
  int fail_reports = 0;
  bool unknown_node = false;
};

json PodJson(int rank, std::vector<std::string> command, std::vector<int> gpus) {
  return {{"workload", 5}, {"name", "train"}, {"kind", "training"}, {"rank", rank},
          {"world_size", 2}, {"gpus", gpus}, {"master_addr", "127.0.0.1"},
          {"master_port", 29505}, {"command", command}, {"desired", "run"}};
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto spec = ParseFakeGpuSpec("4xH100-80GB,nvlink=2x2,faults=" + (dir_ / "faults").string());
    ASSERT_TRUE(spec.ok());
    probe_ = std::make_unique<FakeGpuProbe>(*spec);
    AgentConfig config;
    config.name = "n1";
    config.work_dir = (dir_ / "work").string();
    config.labels = {{"team", "nlp"}};
    config.taints = {{"dedicated", "nlp"}};
    config.sync_interval = std::chrono::milliseconds(50);
    config.default_grace = std::chrono::milliseconds(300);
    config.sample_interval = std::chrono::milliseconds(200);
    agent_ = std::make_unique<Agent>(config, *probe_, server_);
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
  FakeServer server_;
  std::unique_ptr<FakeGpuProbe> probe_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, RegistersInventoryLabelsAndTaints) {
  ASSERT_EQ(server_.registrations.size(), 1u);
  const json& r = server_.registrations[0];
  EXPECT_EQ(r["name"], "n1");
  EXPECT_EQ(r["gpu_model"], "H100-80GB");
  EXPECT_EQ(r["gpu_memory_gib"], 80);
  EXPECT_EQ(r["gpus"].size(), 4u);
  EXPECT_EQ(r["gpus"][2]["uuid"], "GPU-fake-0002");
  EXPECT_EQ(r["nvlink_domains"], json::parse("[[0,1],[2,3]]"));
  EXPECT_EQ(r["labels"]["team"], "nlp");
  EXPECT_EQ(r["taints"][0]["key"], "dedicated");
}

TEST_F(AgentTest, RunsDesiredPodsWithLocalRanksAndReportsExits) {
  server_.pods = json::array({PodJson(1, {"env"}, {2, 3}), PodJson(0, {"env"}, {0, 1})});
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("exited").size() == 2; }));
  for (const json& e : server_.PhaseEvents("exited")) {
    EXPECT_EQ(e["exit_code"], 0);
    EXPECT_EQ(e["reason"], "completed");
  }
  EXPECT_EQ(server_.PhaseEvents("running").size(), 2u);
  const std::string rank1 = ReadFile(dir_ / "work/pods/5-r1-a0-0/stdout.log");
  EXPECT_NE(rank1.find("RANK=1\n"), std::string::npos);
  EXPECT_NE(rank1.find("LOCAL_RANK=1\n"), std::string::npos);
  EXPECT_NE(rank1.find("CUDA_VISIBLE_DEVICES=2,3\n"), std::string::npos);
  EXPECT_NE(rank1.find("MASTER_PORT=29505\n"), std::string::npos);
  EXPECT_NE(rank1.find("TIDAL_CHECKPOINT_DIR=" + (dir_ / "work/checkpoints/w5").string()),
            std::string::npos);
  EXPECT_NE(ReadFile(dir_ / "work/pods/5-r0-a0-1/stdout.log").find("LOCAL_RANK=0\n"),
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

TEST_F(AgentTest, StopNoticeFromServerAndUnlistedPodsAreStopped) {
  server_.pods = json::array({PodJson(0, {"sleep", "30"}, {0}), PodJson(1, {"sleep", "30"}, {1})});
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 2; }));
  pid_t unlisted_pid = -1;
  for (const PodView& v : agent_->Pods()) {
    if (v.key.rank == 1) unlisted_pid = v.pid;
  }
  ASSERT_GT(unlisted_pid, 0);
  const int64_t now = WallClockMs();
  server_.pods[0]["desired"] = "stop";
  server_.pods[0]["notice"] = {{"cause", "priority"}, {"notice_time_ms", now},
                               {"grace_deadline_ms", now + 5000}, {"signal", "SIGTERM"}};
  server_.pods.erase(1);  // rank 1 is no longer listed at all
  ASSERT_TRUE(StepUntil([&] {
    return server_.PhaseEvents("exited").size() == 1 && agent_->Pods().empty();
  }));
  const json r0 = server_.PhaseEvents("exited", 0)[0];
  EXPECT_EQ(r0["signal"], SIGTERM);  // sleep dies of the notice's SIGTERM
  const std::string reason = r0["reason"];
  EXPECT_NE(reason.find("stopped (priority): killed by SIGTERM; notice at"), std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("grace deadline"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "work/pods/5-r0-a0-0/preempt-notice.json"));
  // The unlisted pod was stopped too, but its exit is not reported: the
  // server forgot it, and would take the exit for a later run of rank 1.
  EXPECT_TRUE(server_.PhaseEvents("exited", 1).empty());
  EXPECT_FALSE(ProcessGroupAlive(unlisted_pid));
}

TEST_F(AgentTest, RelistedRankWhileTheOldRunStopsIsANewPod) {
  server_.pods = json::array({PodJson(0, {"sh", "-c", "trap 'sleep 0.3; exit 0' TERM; sleep 30 & wait"}, {0})});
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 1; }));
  const json pod = server_.pods[0];
  server_.pods = json::array();
  agent_->Step(WallClockMs() + 100);  // unlisted: retires, stopping
  server_.pods = json::array({pod});  // placed here again at once
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 2; }));
  // The new run waited for the old one to leave GPU 0.
  EXPECT_TRUE(server_.PhaseEvents("exited").empty());
  std::vector<PodView> pods = agent_->Pods();
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].phase, "running");
}

TEST_F(AgentTest, StopForAPodNeverRunHereIsAnsweredWithItsExitOnce) {
  json pod = PodJson(0, {"sleep", "30"}, {0});
  pod["desired"] = "stop";
  pod["notice"] = {{"cause", "priority"}, {"notice_time_ms", 0}, {"grace_deadline_ms", 1000}};
  server_.pods = json::array({pod});
  server_.exited.clear();
  for (int i = 0; i < 5; ++i) {
    agent_->Step(WallClockMs());
    server_.exited.clear();  // keep listing it: the answer must not repeat
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  ASSERT_EQ(server_.PhaseEvents("exited").size(), 1u);
  EXPECT_NE(server_.PhaseEvents("exited")[0]["reason"].get<std::string>().find("not running on this node"),
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
  const json& gpu3 = server_.heartbeats.back()["gpus"][3];
  EXPECT_EQ(gpu3["healthy"], false);
  EXPECT_EQ(gpu3["xid"], 79);
  EXPECT_EQ(server_.heartbeats.back()["gpus"][2]["healthy"], true);
  EXPECT_EQ(agent_->failed_gpus(), std::set<int>({3}));
  EXPECT_NE(ReadFile(dir_ / "work/pods.json").find("\"failed_gpus\": [\n  3\n ]"),
            std::string::npos);
}

TEST_F(AgentTest, UnsentEventsAreKeptAndResentInOrder) {
  server_.fail_reports = 3;
  server_.pods = json::array({PodJson(0, {"true"}, {0})});
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("exited").size() == 1; }));
  ASSERT_EQ(server_.PhaseEvents("running").size(), 1u);
  size_t running_at = 0, exited_at = 0;
  for (size_t i = 0; i < server_.events.size(); ++i) {
    if (server_.events[i].value("phase", "") == "running") running_at = i;
    if (server_.events[i].value("phase", "") == "exited") exited_at = i;
  }
  EXPECT_LT(running_at, exited_at);
}

TEST_F(AgentTest, UnknownNodeRegistersAgain) {
  server_.unknown_node = true;
  ASSERT_TRUE(StepUntil([&] { return server_.registrations.size() == 2; }));
}

TEST_F(AgentTest, BusyPodsShowGpuUtilizationIdleOnesDoNot) {
  // One pod burns CPU (a stand-in for a GPU kernel), the other sleeps.
  server_.pods = json::array({PodJson(0, {"sh", "-c", "while :; do :; done"}, {0}),
                              PodJson(1, {"sleep", "30"}, {1})});
  ASSERT_TRUE(StepUntil([&] { return server_.PhaseEvents("running").size() == 2; }));
  // Busy = at least 2% of a core over a 200 ms sample.
  EXPECT_TRUE(StepUntil([&] {
    for (const PodView& v : agent_->Pods()) {
      if (v.key.rank == 0 && v.utilization > 0.5) return true;
    }
    return false;
  }));
  for (const PodView& v : agent_->Pods()) {
    if (v.key.rank == 1) {
      EXPECT_LT(v.utilization, 0.1);
    }
  }
  // The next heartbeat carries the sample just taken.
  const size_t sent = server_.heartbeats.size();
  ASSERT_TRUE(StepUntil([&] { return server_.heartbeats.size() > sent; }));
  const json& hb = server_.heartbeats.back();
  EXPECT_GT(hb["gpus"][0]["memory_used_gib"].get<double>(), 40.0);  // 60% of 80 GiB = 48
  EXPECT_EQ(hb["gpus"][2]["memory_used_gib"].get<double>(), 0.0);
}

}  // namespace
}  // namespace tidal::agent
