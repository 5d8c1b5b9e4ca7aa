// Runs the built `tidal` binary: `tidal demo` and `tidal schedule` with good
// and bad files. Skipped when the binary was not built (a partial build).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tidal::config {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

RunResult RunTidal(const std::string& args) {
  const char* bin = std::getenv("TIDAL_BINARY_DIR");
  const std::string tidal = std::string(bin ? bin : ".") + "/tidal";
  RunResult run;
  if (!std::filesystem::exists(tidal)) return run;
  FILE* pipe = ::popen((tidal + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

bool HaveBinary() {
  const char* bin = std::getenv("TIDAL_BINARY_DIR");
  return std::filesystem::exists(std::string(bin ? bin : ".") + "/tidal");
}

std::string Example(const std::string& file) {
  const char* root = std::getenv("TIDAL_SOURCE_DIR");
  return std::string(root ? root : ".") + "/examples/basic/" + file;
}

TEST(ScheduleCommandTest, DemoPrintsJsonWithADecisionPerWorkload) {
  if (!HaveBinary()) GTEST_SKIP() << "build/tidal not built";
  RunResult run = RunTidal("demo -o json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json j = nlohmann::json::parse(run.output);
  EXPECT_EQ(j["workloads"].size(), 8u);
  const nlohmann::json& d = j["decisions"];
  EXPECT_EQ(d["places"].size() + d["waits"].size() + d["rejects"].size(), 8u);
}

TEST(ScheduleCommandTest, ScheduleOverFilesMatchesTheDemo) {
  if (!HaveBinary()) GTEST_SKIP() << "build/tidal not built";
  RunResult files = RunTidal("schedule --cluster " + Example("cluster.yaml") + " --policy " +
                       Example("policy.yaml") + " --workload " + Example("workloads.yaml"));
  RunResult demo = RunTidal("demo");
  ASSERT_EQ(files.exit_code, 0) << files.output;
  EXPECT_EQ(files.output, demo.output);
  EXPECT_NE(files.output.find("awaiting_approval"), std::string::npos);
}

TEST(ScheduleCommandTest, BadFileFailsWithFileLineAndField) {
  if (!HaveBinary()) GTEST_SKIP() << "build/tidal not built";
  const std::string path = ::testing::TempDir() + "tidal_bad_workloads.yaml";
  {
    std::ofstream out(path);
    out << "workloads:\n  - name: x\n    kind: training\n    project: vision\n    priority: 5\n";
  }
  RunResult run = RunTidal("schedule --cluster " + Example("cluster.yaml") + " --workload " + path);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find(path + ":5: workloads[0].priority: priority is derived from templates"),
            std::string::npos)
      << run.output;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tidal::config
