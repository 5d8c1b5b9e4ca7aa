// The shipped Prometheus rules and Grafana dashboard, checked with the real
// tools: promtool validates the rules, and Debian's prometheus scrapes a
// running tidal server and answers a query through its HTTP API.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

std::string SourceDir() {
  const char* s = std::getenv("TIDAL_SOURCE_DIR");
  return s ? s : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

TEST(Prometheus, PromtoolAcceptsTheAlertRules) {
  if (!std::filesystem::exists("/usr/bin/promtool")) {
    GTEST_SKIP() << "promtool is not installed (scripts/install-deps.sh --test installs prometheus)";
  }
  const std::string cmd = "/usr/bin/promtool check rules " + SourceDir() + "/deploy/prometheus/alerts.yml > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Every tidal_ metric the rules and the dashboard use is one the server exports.
TEST(Prometheus, RulesAndDashboardUseOnlyExportedMetrics) {
  ServerProcess s;
  const std::string exported = s.Get("/metrics", "").body;
  const std::string rules = ReadFile(SourceDir() + "/deploy/prometheus/alerts.yml");
  const std::string dashboard = ReadFile(SourceDir() + "/deploy/grafana/tidal.json");
  ASSERT_FALSE(rules.empty());
  const json dash = json::parse(dashboard, nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "tidal.json is not JSON";
  ASSERT_FALSE(dash["panels"].empty());
  std::set<std::string> used;
  const std::regex name(R"(tidal_[a-z0-9_]+)");
  for (const std::string* text : {&rules, &dashboard}) {
    for (auto it = std::sregex_iterator(text->begin(), text->end(), name); it != std::sregex_iterator(); ++it) {
      std::string n = it->str();
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (n.size() > strlen(suffix) && n.ends_with(suffix) && exported.find("# TYPE " + n + " ") == std::string::npos) {
          n = n.substr(0, n.size() - strlen(suffix));
        }
      }
      used.insert(n);
    }
  }
  EXPECT_GE(used.size(), 10u);
  for (const std::string& n : used) {
    EXPECT_NE(exported.find("# TYPE " + n + " "), std::string::npos) << n << " is used but not exported";
  }
}

TEST(Prometheus, RealPrometheusScrapesTheServer) {
  const std::string prometheus = "/usr/bin/prometheus";
  if (!std::filesystem::exists(prometheus)) {
    GTEST_SKIP() << "prometheus is not installed (scripts/install-deps.sh --test installs it)";
  }
  ServerProcess s;
  ASSERT_TRUE(s.running());
  const std::string dir = s.dir() + "/prometheus";
  std::filesystem::create_directories(dir + "/data");
  std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n"
                                         << "scrape_configs:\n  - job_name: tidal\n    static_configs:\n"
                                         << "      - targets: ['127.0.0.1:" << s.port() << "']\n";
  const int port = FreePort();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string config = "--config.file=" + dir + "/prometheus.yml";
    const std::string storage = "--storage.tsdb.path=" + dir + "/data";
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port);
    freopen((dir + "/prometheus.log").c_str(), "w", stderr);
    freopen("/dev/null", "w", stdout);
    execl(prometheus.c_str(), prometheus.c_str(), config.c_str(), storage.c_str(), listen.c_str(),
          "--log.level=warn", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  json result;
  bool found = false;
  httplib::Client c("127.0.0.1", port);
  for (int i = 0; i < 120 && !found; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto r = c.Get(R"(/api/v1/query?query=tidal_queue_guaranteed_gpus%7Bqueue%3D%22research%22%7D)");
    if (!r || r->status != 200) continue;
    result = json::parse(r->body, nullptr, false);
    found = result.is_object() && result["status"] == "success" && !result["data"]["result"].empty();
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(found) << "prometheus never returned the series; last reply: " << result.dump()
                     << "\nlog: " << ReadFile(dir + "/prometheus.log");
  const json& sample = result["data"]["result"][0];
  EXPECT_EQ(sample["metric"]["job"], "tidal");
  EXPECT_EQ(sample["value"][1], "40");  // examples/basic: research guarantees 40 GPUs
}

}  // namespace
}  // namespace tidal::testing
