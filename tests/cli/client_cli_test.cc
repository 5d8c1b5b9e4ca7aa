// Golden tests of the `tidal` client commands against a real server: the
// table output of each command is compared with tests/cli/golden/*.txt
// (TIDAL_UPDATE_GOLDEN=1 rewrites them). Also: where the server address and
// token come from, and that errors are one line with a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("TIDAL_SOURCE_DIR");
  return s ? s : ".";
}

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->running());
    home_ = server_->dir() + "/home";
    std::filesystem::create_directories(home_);
  }

  // Runs `tidal ARGS` with the given environment additions.
  CliRun Tidal(const std::string& args, const std::string& token = kResearchToken, bool use_env = true) {
    const std::string out = server_->dir() + "/cli.out", err = server_->dir() + "/cli.err";
    std::string env = "env -u TIDAL_SERVER -u TIDAL_TOKEN HOME=" + home_ + " XDG_CONFIG_HOME= ";
    if (use_env) env += "TIDAL_SERVER=" + server_->url() + " TIDAL_TOKEN=" + token + " ";
    const std::string cmd = env + server_->tidal_binary() + " " + args + " > " + out + " 2> " + err;
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Read(out);
    r.err = Read(err);
    return r;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  void ExpectGolden(const std::string& name, const std::string& actual) {
    const std::string path = SourceDir() + "/tests/cli/golden/" + name + ".txt";
    if (std::getenv("TIDAL_UPDATE_GOLDEN")) std::ofstream(path) << actual;
    EXPECT_EQ(actual, Read(path)) << "golden " << path << " (TIDAL_UPDATE_GOLDEN=1 to rewrite)";
  }

  // Waits until every workload went through a scheduling pass.
  void WaitForPass() {
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      const nlohmann::json list = server_->Get("/v1/workloads", kAdminToken).json();
      for (const auto& w : list["workloads"]) {
        all = all && (w["state"] != "pending" || !w["wait"].is_null());
      }
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::unique_ptr<ServerProcess> server_;
  std::string home_;
};

TEST_F(CliTest, SubmitListExplainQueuesMatchGolden) {
  CliRun submit = Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml");
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  ExpectGolden("submit", submit.out);
  WaitForPass();
  ExpectGolden("list", Tidal("list").out);
  ExpectGolden("list_debug", Tidal("list --kind debug").out);
  ExpectGolden("explain_awaiting", Tidal("explain 1").out);
  ExpectGolden("queues", Tidal("queues").out);
  CliRun approve = Tidal("approve 1", kAdminToken);
  EXPECT_EQ(approve.exit_code, 0) << approve.err;
  ExpectGolden("approve", approve.out);
  CliRun cancel = Tidal("cancel 3");
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  ExpectGolden("cancel", cancel.out);
}

TEST_F(CliTest, JsonOutputIsTheApiObject) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  CliRun get = Tidal("get 2 -o json");
  ASSERT_EQ(get.exit_code, 0) << get.err;
  auto j = nlohmann::json::parse(get.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << get.out;
  EXPECT_EQ(j["name"], "vision-ft");
  EXPECT_EQ(j["priority"]["derivation"].back(), "total 500");
}

TEST_F(CliTest, ErrorsAreOneLineWithNonZeroExit) {
  CliRun missing = Tidal("get 99");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "tidal: error: workload 99 not found (HTTP 404)\n");
  CliRun denied = Tidal("approve 1");
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_EQ(denied.err, "tidal: error: role user may not call this endpoint (needs admin) (HTTP 403)\n");
  CliRun unauth = Tidal("list", "wrong-token");
  EXPECT_EQ(unauth.exit_code, 1);
  EXPECT_EQ(unauth.err, "tidal: error: unknown token (HTTP 401)\n");
  std::ofstream(server_->dir() + "/bad.yaml") << "name: x\nproject: vision\nreplicas: -3\n";
  CliRun bad = Tidal("submit -f " + server_->dir() + "/bad.yaml");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "tidal: error: replicas: expected an integer from 1 to 4096, got -3 (HTTP 400)\n");
  CliRun nowhere = Tidal("list --server http://127.0.0.1:1");
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_EQ(std::count(nowhere.err.begin(), nowhere.err.end(), '\n'), 1) << nowhere.err;
}

TEST_F(CliTest, AddressAndTokenFromFlagsEnvOrConfigFile) {
  // Config file only.
  std::filesystem::create_directories(home_ + "/.config/tidal");
  std::ofstream(home_ + "/.config/tidal/config.yaml")
      << "server: " << server_->url() << "\ntoken: " << kAdsToken << "\n";
  CliRun from_file = Tidal("queues -o json", "", /*use_env=*/false);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  // Flags win over the file: the research token sees research's workloads.
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  CliRun ads = Tidal("list -o json", "", false);
  EXPECT_TRUE(nlohmann::json::parse(ads.out)["workloads"].empty()) << ads.out;
  CliRun flags = Tidal(std::string("list -o json --token ") + kResearchToken, "", false);
  EXPECT_EQ(nlohmann::json::parse(flags.out)["workloads"].size(), 3u) << flags.out << flags.err;
  // The environment wins over the file too.
  CliRun env = Tidal("list -o json", kResearchToken, true);
  EXPECT_EQ(nlohmann::json::parse(env.out)["workloads"].size(), 3u);
}

}  // namespace
}  // namespace tidal::testing
