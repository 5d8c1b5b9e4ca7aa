// The shipped Prometheus rules and Grafana dashboard, checked with the real
// tools and a real server: promtool validates the rules (their unit tests,
// deploy/prometheus/alerts_test.yml, are the CTest prometheus.alert_rules),
// every query names metrics a running server exports, and Debian's
// prometheus scrapes a running tidal server and answers a query.
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
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <sstream>
#include <thread>
#include <vector>

#include <yaml-cpp/yaml.h>

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

// One scrape of /metrics, parsed: each sample by its name and labels as
// written ("name{a=\"x\"}"), the bare sample names, and each family's type.
struct Scrape {
  std::map<std::string, std::string> samples;
  std::set<std::string> names;
  std::map<std::string, std::string> types;
};

Scrape Parse(const std::string& text) {
  Scrape out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.starts_with("# TYPE ")) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      out.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string series = line.substr(0, space);
    out.samples[series] = line.substr(space + 1);
    out.names.insert(series.substr(0, series.find('{')));
  }
  return out;
}

// The tidal_ and process_ metric names an expression uses (label names never
// start so; a histogram's _bucket/_sum/_count are sample names).
std::set<std::string> MetricNames(const std::string& expr) {
  std::set<std::string> out;
  const std::regex name(R"(\b(tidal|process)_[a-z0-9_]+)");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name); it != std::sregex_iterator(); ++it) {
    out.insert(it->str());
  }
  return out;
}

bool Exported(const Scrape& s, const std::string& n) {
  if (s.names.count(n) || s.types.count(n)) return true;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (!n.ends_with(suffix)) continue;
    auto t = s.types.find(n.substr(0, n.size() - strlen(suffix)));
    if (t != s.types.end() && t->second == "histogram") return true;
  }
  return false;
}

// Every query of the dashboard (panels and variables) and every alert names
// metrics, and only metrics the server exports.
TEST(Prometheus, RulesAndDashboardUseOnlyExportedMetrics) {
  ServerProcess s;
  ASSERT_TRUE(s.running());
  // One API request, so that the per-route API series exist.
  ASSERT_EQ(s.Get("/v1/queues", kResearchToken).status, 200);
  const Scrape exported = Parse(s.Get("/metrics", "").body);
  ASSERT_FALSE(exported.samples.empty());
  std::vector<std::pair<std::string, std::string>> queries;  // where, expression
  const YAML::Node rules = YAML::LoadFile(SourceDir() + "/deploy/prometheus/alerts.yml");
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      queries.emplace_back("alert " + rule["alert"].as<std::string>(), rule["expr"].as<std::string>());
    }
  }
  const json dash = json::parse(ReadFile(SourceDir() + "/deploy/grafana/tidal.json"), nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "tidal.json is not JSON";
  for (const json& panel : dash["panels"]) {
    for (const json& t : panel["targets"]) {
      queries.emplace_back("panel " + panel["title"].get<std::string>(), t["expr"].get<std::string>());
    }
  }
  std::set<std::string> variables;
  for (const json& v : dash["templating"]["list"]) {
    if (v["type"] != "query") continue;
    variables.insert(v["name"].get<std::string>());
    queries.emplace_back("variable $" + v["name"].get<std::string>(), v["definition"].get<std::string>());
  }
  EXPECT_GE(queries.size(), 30u);
  for (const char* v : {"queue", "tenant", "service"}) EXPECT_TRUE(variables.count(v)) << "no $" << v;
  for (const auto& [where, expr] : queries) {
    const std::set<std::string> names = MetricNames(expr);
    EXPECT_FALSE(names.empty()) << where << " names no metric: " << expr;
    for (const std::string& n : names) {
      EXPECT_TRUE(Exported(exported, n)) << where << " uses " << n << ", which the server does not export";
    }
  }
}

// The counters the paging alerts watch exist, at 0, before their first
// event: otherwise increase() misses that event (promtool: got []).
TEST(Prometheus, AFreshServerExportsItsCountersAtZero) {
  ServerProcess s;
  ASSERT_TRUE(s.running());
  Scrape m = Parse(s.Get("/metrics", "").body);  // operator[]: a missing series reads ""
  EXPECT_EQ(m.samples["tidal_nodes_lost_total"], "0");
  EXPECT_EQ(m.samples["tidal_scale_ups_total{result=\"failed\"}"], "0");
  EXPECT_EQ(m.samples["tidal_gang_starts_total{result=\"ok\"}"], "0");
  EXPECT_EQ(m.samples["tidal_loans_total{pool=\"shared\"}"], "0");
  EXPECT_EQ(m.samples["tidal_returns_total{pool=\"shared\"}"], "0");
  EXPECT_EQ(m.types["tidal_lent_gpu_hours_total"], "counter");
  EXPECT_EQ(m.samples["tidal_preemptions_total{cause=\"reclaim\",kind=\"training\"}"], "0");
  EXPECT_EQ(m.samples["tidal_recovery_seconds_count"], "0");
  const json nodes = s.Get("/v1/nodes", kAdminToken).json();
  ASSERT_FALSE(nodes["nodes"].empty());
  for (const json& n : nodes["nodes"]) {
    const std::string series = "tidal_gpu_errors_total{kind=\"xid\",node=\"" + n["name"].get<std::string>() + "\"}";
    EXPECT_EQ(m.samples[series], "0") << series;
  }
  // The HTTP layer's gauges: this scrape's own connection is open; no agent
  // watches (the fixture runs none).
  EXPECT_GE(std::atof(m.samples["tidal_http_open_connections"].c_str()), 1);
  EXPECT_EQ(m.samples["tidal_agent_pod_watches"], "0");
  EXPECT_EQ(m.samples["tidal_http_rejected_total{reason=\"read_timeout\"}"], "0");
  // The store's counts are counters, named so.
  EXPECT_EQ(m.types["tidal_store_commits_total"], "counter");
  EXPECT_EQ(m.types["tidal_store_committed_mutations_total"], "counter");
  EXPECT_FALSE(m.types.count("tidal_store_commits"));
  // What every Prometheus client exports, and the build.
  EXPECT_EQ(m.types["process_cpu_seconds_total"], "counter");
  EXPECT_GT(std::atof(m.samples["process_resident_memory_bytes"].c_str()), 0);
  EXPECT_GT(std::atof(m.samples["process_open_fds"].c_str()), 0);
  EXPECT_GT(std::atof(m.samples["process_start_time_seconds"].c_str()), 1.7e9);
  bool build_info = false;
  for (const auto& [series, value] : m.samples) {
    if (series.starts_with("tidal_build_info{") && series.find("version=\"0.1.0\"") != std::string::npos) {
      build_info = value == "1";
    }
  }
  EXPECT_TRUE(build_info);
}

// A CSV report is counted with the status it was sent with, not -1.
TEST(Prometheus, CsvReportsAreCountedWithTheirStatus) {
  ServerProcess s;
  ASSERT_EQ(s.Get("/v1/reports?format=csv", kResearchToken).status, 200);
  Scrape m = Parse(s.Get("/metrics", "").body);  // operator[]: a missing series reads ""
  EXPECT_EQ(m.samples["tidal_api_requests_total{code=\"200\",method=\"GET\",route=\"/v1/reports\"}"], "1");
  for (const auto& [series, value] : m.samples) {
    EXPECT_EQ(series.find("code=\"-1\""), std::string::npos) << series;
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
