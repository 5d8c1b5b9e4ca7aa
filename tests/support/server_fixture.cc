#include "tests/support/server_fixture.h"

// tidal_testing does not link PkgConfig::HTTPLIB, so match the definitions the
// system cpp-httplib was built with (pkg-config --cflags cpp-httplib): the
// class layouts depend on them.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "protocol/node_registration.h"

namespace tidal::testing {

std::string DefaultServerConfig(const std::string& extra_yaml) {
  const char* src = std::getenv("TIDAL_SOURCE_DIR");
  const std::string testdata = std::string(src ? src : ".") + "/tests/server/testdata";
  return "cluster_file: " + testdata + "/cluster.yaml\npolicy_file: " + testdata + "/policy.yaml\n" +
         std::string(R"(store: sqlite:tidal.db
schedule_interval_ms: 200
min_pass_gap_ms: 10
tokens:
  - {name: admin, role: admin, token: admin-token}
  - {name: alice, role: user, tenant: research, token: research-token}
  - {name: bob, role: user, tenant: ads, token: ads-token}
  - {name: carol, role: user, tenant: chat, token: chat-token}
  - {name: node-agent, role: agent, token: agent-token}
gpu_prices: {H100-SXM-80GB: 2.5}
)") + extra_yaml;
}

nlohmann::json HttpReply::json() const {
  return nlohmann::json::parse(body, nullptr, false);
}

ServerProcess::ServerProcess(const std::string& config_yaml) {
  char tmpl[] = "/tmp/tidal-server-test-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  std::ofstream(dir_ + "/server.yaml") << config_yaml;
  Start();
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill(SIGKILL);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string ServerProcess::tidal_binary() const {
  const char* bin = std::getenv("TIDAL_BINARY_DIR");
  return std::string(bin ? bin : ".") + "/tidal";
}

std::string ServerProcess::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

bool ServerProcess::Start() {
  int out[2];
  if (pipe(out) != 0) return false;
  const std::string binary = tidal_binary();
  const std::string config = dir_ + "/server.yaml";
  const std::string log = dir_ + "/server.log";
  pid_ = fork();
  if (pid_ == 0) {
    // Dies with the test process, even if that one crashes.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out[1], STDOUT_FILENO);
    const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    execl(binary.c_str(), binary.c_str(), "server", "--config", config.c_str(), "--listen",
          "127.0.0.1:0", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // The first line names the port: "tidal server listening on http://127.0.0.1:PORT ...".
  std::string line;
  char c;
  while (line.size() < 4096 && read(out[0], &c, 1) == 1 && c != '\n') line += c;
  close(out[0]);
  const size_t at = line.find("127.0.0.1:");
  if (at == std::string::npos) {
    Kill(SIGKILL);
    return false;
  }
  port_ = std::atoi(line.c_str() + at + 10);
  return port_ > 0;
}

void ServerProcess::Kill(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void ServerProcess::RegisterClusterNodes() const {
  const HttpReply nodes = Get("/v1/nodes", kAdminToken);
  if (nodes.status != 200) throw std::runtime_error("GET /v1/nodes: " + std::to_string(nodes.status) + " " + nodes.body);
  const nlohmann::json list = nodes.json();  // the loop must not range over a temporary's member
  for (const nlohmann::json& n : list["nodes"]) {
    protocol::NodeRegistration reg;
    reg.name = n["name"].get<std::string>();
    const HttpReply r = PostJson("/v1/agent/register", kAgentToken, protocol::NodeRegistrationToJson(reg));
    if (r.status != 200) throw std::runtime_error("register " + reg.name + ": " + r.body);
  }
}

HttpReply ServerProcess::Get(const std::string& path, const std::string& token) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(30, 0);
  c.set_tcp_nodelay(true);
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  auto r = c.Get(path.c_str(), h);
  if (!r) return {};
  return {r->status, r->body};
}

HttpReply ServerProcess::Post(const std::string& path, const std::string& token, const std::string& body,
                              const std::map<std::string, std::string>& headers) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(30, 0);
  c.set_tcp_nodelay(true);
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  for (const auto& [k, v] : headers) h.emplace(k, v);
  auto r = c.Post(path.c_str(), h, body, "application/json");
  if (!r) return {};
  return {r->status, r->body};
}

}  // namespace tidal::testing
