// End-to-end fixture: a LocalCluster (real `tidal server` and `tidal agent`
// processes with fake GPUs on loopback, in a temp dir) per test, helpers to
// wait on API state, and a check that every process the test started is
// gone when it ends.
#ifndef TIDAL_TESTS_E2E_E2E_FIXTURE_H_
#define TIDAL_TESTS_E2E_E2E_FIXTURE_H_

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/local_cluster.h"
#include "agent/pod_process.h"

namespace tidal::e2e {

using nlohmann::json;
namespace fs = std::filesystem;

inline std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// key=value pairs of the example trainer's first line in a pod's stdout:
// "trainer: rank=0 local_rank=0 world_size=2 ... resume_step=0".
inline std::map<std::string, std::string> TrainerStart(const std::string& pod_dir) {
  std::map<std::string, std::string> kv;
  std::istringstream lines(ReadText(fs::path(pod_dir) / "stdout.log"));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("trainer: rank=")) continue;
    std::istringstream words(line.substr(9));
    std::string word;
    while (words >> word) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    break;
  }
  return kv;
}

// TIDAL_BINARY_DIR when `tidal` and the example workloads are built there;
// else "" with the reason in `why` (the test then skips).
inline std::string BuiltBinaryDir(std::string& why) {
  const char* bin = std::getenv("TIDAL_BINARY_DIR");
  if (bin == nullptr) {
    why = "TIDAL_BINARY_DIR not set (run through ctest)";
    return "";
  }
  const std::string dir = bin;
  if (access((dir + "/tidal").c_str(), X_OK) != 0 ||
      access((dir + "/examples/trainer").c_str(), X_OK) != 0) {
    why = "build the tidal and example_* targets first";
    return "";
  }
  return dir;
}

// (node, gpu) pairs held by two live pods in one reading of the agents'
// pods.json files; each one is a GPU bound twice.
inline std::vector<std::string> DoublyBound(const json& pods) {
  std::map<std::pair<std::string, int>, std::string> holder;
  std::vector<std::string> twice;
  for (const json& p : pods) {
    const std::string phase = p.value("phase", "");
    if (phase == "exited" || phase == "waiting_for_slot") continue;
    const std::string who = fmt::format("{}/{}/{}", p["workload"].dump(), p["rank"].dump(), p["attempt"].dump());
    for (const json& g : p["gpus"]) {
      auto [it, fresh] = holder.emplace(std::make_pair(p["node"].get<std::string>(), g.get<int>()), who);
      if (!fresh && it->second != who) {
        twice.push_back(fmt::format("{} gpu {}: {} and {}", p["node"].get<std::string>(), g.get<int>(),
                                    it->second, who));
      }
    }
  }
  return twice;
}

class E2eTest : public ::testing::Test {
 protected:
  // Starts the cluster; skips when the binaries were not built. `tweak`
  // edits the options last (TLS files, timings).
  void StartCluster(std::vector<agent::LocalNodeOptions> nodes,
                    const std::function<void(agent::LocalClusterOptions&)>& tweak = {}) {
    std::string why;
    bin_dir_ = BuiltBinaryDir(why);
    if (bin_dir_.empty()) GTEST_SKIP() << why;
    work_dir_ = fs::temp_directory_path() /
                fmt::format("tidal_e2e_{}_{}",
                            ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                            getpid());
    fs::remove_all(work_dir_);
    agent::LocalClusterOptions options;
    options.tidal_binary = bin_dir_ + "/tidal";
    options.work_dir = work_dir_.string();
    options.nodes = std::move(nodes);
    options.node_lease_s = 3;
    options.default_grace_s = 5;
    options.scale_down_delay_s = 5;
    options.agent_sync_ms = 200;
    options.agent_sample_ms = 500;
    if (tweak) tweak(options);
    auto cluster = agent::LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status().message();
    cluster_ = std::move(cluster).value();
    started_pids_.insert(cluster_->server_pid());
    for (size_t i = 0; i < options.nodes.size(); ++i) started_pids_.insert(cluster_->agent_pid(i));
  }

  void TearDown() override {
    if (!cluster_) return;
    Pods();  // record the last pods' pids
    cluster_->Stop();
    cluster_.reset();
    for (pid_t pid : started_pids_) {
      if (pid <= 0) continue;
      // Each child leads its own process group; none may outlive the test.
      bool gone = false;
      for (int i = 0; i < 200 && !gone; ++i) {
        gone = !agent::ProcessGroupAlive(pid);
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
      EXPECT_TRUE(gone) << "process group " << pid << " outlived the test";
    }
    if (!HasFailure()) fs::remove_all(work_dir_);
  }

  std::string Examples() const { return bin_dir_ + "/examples"; }
  static std::vector<agent::LocalNodeOptions> Nodes(std::vector<std::string> pools, int gpus) {
    std::vector<agent::LocalNodeOptions> nodes;
    for (size_t i = 0; i < pools.size(); ++i) {
      agent::LocalNodeOptions n;
      n.name = fmt::format("node-{}", i + 1);
      n.pool = pools[i];
      n.gpus = gpus;
      n.nvlink = gpus % 2 == 0 ? fmt::format("2x{}", gpus / 2) : "none";
      nodes.push_back(n);
    }
    return nodes;
  }

  uint64_t Submit(const json& body) {
    auto reply = cluster_->Post("/v1/workloads", body);
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    return reply.ok() ? (*reply)["id"].get<uint64_t>() : 0;
  }
  json Workload(uint64_t id) {
    auto reply = cluster_->Get(fmt::format("/v1/workloads/{}", id));
    return reply.ok() ? *reply : json::object();
  }
  std::string State(uint64_t id) { return Workload(id).value("state", ""); }

  // The pods agents run now (from their pods.json), remembering every pid.
  json Pods() {
    json pods = cluster_->LocalPods();
    for (const json& p : pods) {
      if (p.value("pid", -1) > 0) started_pids_.insert(p["pid"].get<pid_t>());
    }
    return pods;
  }
  json PodsOf(uint64_t id, const std::string& phase = "") {
    json out = json::array();
    for (const json& p : Pods()) {
      if (p["workload"] == id && (phase.empty() || p["phase"] == phase)) out.push_back(p);
    }
    return out;
  }

  // Stops the cluster (agents stop their pods, the server journals the
  // exits) and reruns the server's journal through `tidal sim replay`: every
  // decision, timer and loan the replay makes must be the one the server
  // made (issue #9: a simulation predicts production).
  void ExpectReplayMatches() {
    Pods();
    cluster_->Stop();
    const fs::path out = work_dir_ / "replay.txt";
    const std::string command = fmt::format("'{}/tidal' sim replay --store 'sqlite:{}/tidal.db' >'{}' 2>&1",
                                            bin_dir_, work_dir_.string(), out.string());
    const int rc = std::system(command.c_str());
    const std::string report = ReadText(out);
    EXPECT_EQ(rc, 0) << report;
    EXPECT_NE(report.find("identical"), std::string::npos) << report;
    EXPECT_EQ(report.find("edits compared: 0\n"), std::string::npos) << report;
  }

  // Polls `cond` every 100 ms for up to `timeout_s`.
  bool WaitFor(const std::function<bool()>& cond, double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return cond();
  }

  std::string bin_dir_;
  fs::path work_dir_;
  std::unique_ptr<agent::LocalCluster> cluster_;
  std::set<pid_t> started_pids_;
};

}  // namespace tidal::e2e

#endif  // TIDAL_TESTS_E2E_E2E_FIXTURE_H_
