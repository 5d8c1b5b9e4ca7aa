#include "tests/support/etcd_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include <httplib.h>

namespace tidal::testing {
namespace {

// A port nothing listens on now. Another process could take it before
// etcd binds it; etcd then fails to start and the fixture says so.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string FindEtcd() {
  for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

}  // namespace

bool EtcdRequired() {
  const char* v = std::getenv("TIDAL_REQUIRE_ETCD");
  return v != nullptr && std::string(v) == "1";
}

EtcdCluster::EtcdCluster(int members) {
  binary_ = FindEtcd();
  if (binary_.empty()) {
    why_not_ = "etcd is not installed (scripts/install-deps.sh --test installs Debian's etcd-server)";
    return;
  }
  char tmpl[] = "/tmp/tidal-etcd-test-XXXXXX";
  if (!mkdtemp(tmpl)) {
    why_not_ = "mkdtemp failed";
    return;
  }
  dir_ = tmpl;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = FreePort();
    m.peer_port = FreePort();
    initial_cluster_ += (i ? "," : "") + m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
    members_.push_back(m);
  }
  for (Member& m : members_) {
    if (!Spawn(m, /*fresh=*/true)) {
      why_not_ = "etcd member " + m.name + " did not start (see " + dir_ + "/" + m.name + ".log)";
      return;
    }
  }
  for (const Member& m : members_) {
    if (!WaitHealthy(m, std::chrono::seconds(30))) {
      why_not_ = "etcd member " + m.name + " did not become healthy (see " + dir_ + "/" + m.name + ".log)";
      return;
    }
  }
  available_ = true;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) Kill(i);
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool EtcdCluster::Spawn(Member& m, bool fresh) {
  const std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  const std::string data = dir_ + "/" + m.name;
  const std::string log = dir_ + "/" + m.name + ".log";
  std::vector<std::string> args = {binary_,
                                   "--name", m.name,
                                   "--data-dir", data,
                                   "--listen-client-urls", client,
                                   "--advertise-client-urls", client,
                                   "--listen-peer-urls", peer,
                                   "--initial-advertise-peer-urls", peer,
                                   "--initial-cluster", initial_cluster_,
                                   "--initial-cluster-state", fresh ? "new" : "existing",
                                   "--initial-cluster-token", "tidal-test",
                                   "--logger", "zap",
                                   "--log-level", "warn"};
  m.pid = fork();
  if (m.pid < 0) return false;
  if (m.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary_.c_str(), argv.data());
    _exit(127);
  }
  return true;
}

bool EtcdCluster::WaitHealthy(const Member& m, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  httplib::Client c("127.0.0.1", m.client_port);
  c.set_connection_timeout(0, 200'000);
  c.set_read_timeout(1, 0);
  while (std::chrono::steady_clock::now() < deadline) {
    if (m.pid > 0 && waitpid(m.pid, nullptr, WNOHANG) == m.pid) return false;  // it exited
    auto res = c.Get("/health");
    if (res && res->status == 200 && res->body.find("\"true\"") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a condition, not a guess
  }
  return false;
}

bool EtcdCluster::WaitForQuorum(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const Member& m : members_) {
      if (m.pid > 0 && WaitHealthy(m, std::chrono::milliseconds(200))) return true;
    }
  }
  return false;
}

std::string EtcdCluster::StoreUrl(const std::string& prefix) const {
  std::string url = "etcd://";
  for (size_t i = 0; i < members_.size(); ++i) {
    url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(members_[i].client_port);
  }
  return url + "?prefix=" + prefix;
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back("http://127.0.0.1:" + std::to_string(m.client_port));
  return out;
}

void EtcdCluster::Kill(int member) {
  Member& m = members_[member];
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

bool EtcdCluster::Start(int member) {
  Member& m = members_[member];
  if (m.pid > 0) return true;
  return Spawn(m, /*fresh=*/false) && WaitHealthy(m, std::chrono::seconds(30));
}

}  // namespace tidal::testing
