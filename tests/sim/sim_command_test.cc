// `tidal sim`, `tidal sim compare` and `tidal sim import-load` through the
// built binary (TIDAL_BINARY_DIR/tidal).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class SimCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("TIDAL_BINARY_DIR");
    tidal_ = std::string(bin != nullptr ? bin : ".") + "/tidal";
    if (!std::filesystem::exists(tidal_)) GTEST_SKIP() << tidal_ << " is not built";
    dir_ = testing::MakeScratchDir("simcmd");
    cluster_ = testing::WriteScratchFile(dir_, "cluster.yaml", testing::SmallClusterYaml(1, 1, 2));
    workload_ = testing::WriteScratchFile(dir_, "workloads.yaml",
                                          "workloads:\n"
                                          "  - {name: chat, kind: inference, project: online, replicas: 1,\n"
                                          "     min_replicas: 1, max_replicas: 8, target_p99_ms: 1000,\n"
                                          "     replica_capacity_rps: 10, cold_start_s: 60}\n"
                                          "  - {name: train, kind: training, project: research, gpus_per_replica: 8,\n"
                                          "     replicas: 2, duration_s: 1800, checkpoint_interval_s: 600, submit_at_s: 30}\n");
    load_ = testing::WriteScratchFile(dir_, "load.csv", "time_s,service,rps\n0,chat,12\n1200,chat,40\n");
  }
  std::string Sim(const std::string& out, const std::string& extra = "") {
    return tidal_ + " sim --cluster " + cluster_ + " --workload " + workload_ + " --load " + load_ +
           " --trace philly:" + testing::SourceDir() + "/tests/data/philly_head50.csv,project=research,limit=5" +
           " --end-s 3600 --deterministic --out " + out + " " + extra;
  }

  std::string tidal_, dir_, cluster_, workload_, load_;
};

TEST_F(SimCommandTest, RunsTwiceToIdenticalFilesAndCompares) {
  const std::string a = dir_ + "/static", b = dir_ + "/again", c = dir_ + "/predictive";
  CommandResult r1 = RunCommand(Sim(a, "--colocation static --seed 3"));
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_NE(r1.output.find("static mode"), std::string::npos) << r1.output;
  CommandResult r2 = RunCommand(Sim(b, "--colocation static --seed 3"));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  for (const char* f : {"summary.json", "events.jsonl", "report.html", "timeseries.csv"}) {
    const std::string fa = testing::ReadWholeFile(a + "/" + f);
    EXPECT_FALSE(fa.empty()) << f;
    EXPECT_EQ(fa, testing::ReadWholeFile(b + "/" + f)) << f;
  }
  EXPECT_NE(testing::ReadWholeFile(a + "/summary.json").find("\"colocation\": \"static\""), std::string::npos);
  CommandResult r3 = RunCommand(Sim(c, "--colocation predictive"));
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  CommandResult cmp = RunCommand(tidal_ + " sim compare " + a + " " + c + " --out " + dir_ + "/cmp.html");
  ASSERT_EQ(cmp.exit_code, 0) << cmp.output;
  EXPECT_NE(cmp.output.find("inference.slo_attainment"), std::string::npos) << cmp.output;
  EXPECT_NE(cmp.output.find("predictive"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/cmp.html"));
}

TEST_F(SimCommandTest, ARunWithoutServicesPrintsNoSloAttainmentAndNoProgressIntoAPipe) {
  const std::string out = dir_ + "/training-only";
  CommandResult r = RunCommand(tidal_ + " sim --cluster " + cluster_ + " --trace philly:" + testing::SourceDir() +
                               "/tests/data/philly_head50.csv,project=research,limit=5 --end-s 3600 "
                               "--deterministic --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SLO attainment n/a, scale-up success n/a"), std::string::npos) << r.output;
  // stderr is a pipe here: the progress line is for terminals only.
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_NE(testing::ReadWholeFile(out + "/summary.json").find("\"slo_attainment\": null"), std::string::npos);
}

TEST_F(SimCommandTest, BadInputIsAClearErrorAndANonZeroExit) {
  const std::string bad = testing::WriteScratchFile(dir_, "bad.csv", "time_s,service,rps\n0,chat,fast\n");
  CommandResult r = RunCommand(tidal_ + " sim --cluster " + cluster_ + " --workload " + workload_ +
                               " --load " + bad + " --out " + dir_ + "/x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(bad + ":2: field 'rps'"), std::string::npos) << r.output;
  CommandResult mode = RunCommand(Sim(dir_ + "/y", "--colocation sometimes"));
  EXPECT_NE(mode.exit_code, 0);
  EXPECT_NE(mode.output.find("--colocation"), std::string::npos) << mode.output;
  CommandResult missing = RunCommand(tidal_ + " sim compare " + dir_ + "/nothing-here");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("summary.json"), std::string::npos) << missing.output;
}

// The real-trace example reads traces that may not be committed: the demo
// says to run its run.sh instead of failing on a missing load.csv; any other
// folder without the demo's files is named with what is missing.
TEST_F(SimCommandTest, DemoOfAnExampleWithoutItsInputsSaysWhatToRun) {
  CommandResult r = RunCommand(tidal_ + " sim demo --example " + testing::SourceDir() +
                               "/examples/colocation-traces --out " + dir_ + "/demo");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no load.csv: this example reads public traces from outside the repository; run "
                          "DATA=/path/to/traces " +
                          testing::SourceDir() + "/examples/colocation-traces/run.sh"),
            std::string::npos)
      << r.output;
  CommandResult empty = RunCommand(tidal_ + " sim demo --example " + dir_ + " --out " + dir_ + "/demo");
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("--example " + dir_ + ": no policy.yaml"), std::string::npos) << empty.output;
}

TEST_F(SimCommandTest, ImportLoadWritesALoadCsv) {
  const std::string out = dir_ + "/load-out.csv";
  CommandResult r = RunCommand(tidal_ + " sim import-load \"code=azure_llm:" + testing::SourceDir() +
                               "/tests/data/azure_code_head300.csv,load_scale=2\" --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string csv = testing::ReadWholeFile(out);
  EXPECT_EQ(csv.rfind("time_s,service,rps\n0,code,", 0), 0u) << csv;
}

}  // namespace
}  // namespace tidal::sim
