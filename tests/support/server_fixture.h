// Test fixture for the control plane: runs a real `tidal server` process on a
// free loopback port (it binds port 0 and prints the port it got) with a temp
// store, and talks to it over HTTP. The destructor kills the process and
// removes the temp dir, so a test leaves nothing behind.
#ifndef TIDAL_TESTS_SUPPORT_SERVER_FIXTURE_H_
#define TIDAL_TESTS_SUPPORT_SERVER_FIXTURE_H_

#include <sys/types.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace tidal::testing {

// Tokens every fixture config declares (plain text here, hashed by the server).
inline constexpr const char* kAdminToken = "admin-token";
inline constexpr const char* kResearchToken = "research-token";  // user, tenant research
inline constexpr const char* kAdsToken = "ads-token";            // user, tenant ads
inline constexpr const char* kChatToken = "chat-token";          // user, tenant chat
inline constexpr const char* kAgentToken = "agent-token";

// The default server config text: tests/server/testdata/{cluster,policy}.yaml
// (found through TIDAL_SOURCE_DIR) and the tokens above.
std::string DefaultServerConfig(const std::string& extra_yaml = "");

struct HttpReply {
  int status = 0;  // 0 = no connection
  std::string body;
  nlohmann::json json() const;
};

class ServerProcess {
 public:
  // Writes `config_yaml` to a fresh temp dir and starts the server there.
  explicit ServerProcess(const std::string& config_yaml = DefaultServerConfig());
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts (again) on the same store; returns false if it did not come up.
  bool Start();
  // Sends `signal` and waits for the process to exit.
  void Kill(int signal);
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  std::string url() const;
  const std::string& dir() const { return dir_; }
  std::string tidal_binary() const;

  HttpReply Get(const std::string& path, const std::string& token) const;
  HttpReply Post(const std::string& path, const std::string& token, const std::string& body,
                 const std::map<std::string, std::string>& headers = {}) const;
  HttpReply PostJson(const std::string& path, const std::string& token, const nlohmann::json& body) const {
    return Post(path, token, body.dump());
  }
  // Registers every node the server knows (GET /v1/nodes) as its agent
  // would, with the agent token and nothing but its name: a node whose agent
  // never registered is not ready and takes no work. Stands in for agents in
  // tests that schedule without running pods; the leases run out after
  // node_lease_s without heartbeats.
  void RegisterClusterNodes() const;

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_SERVER_FIXTURE_H_
