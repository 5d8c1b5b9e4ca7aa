// The CLI config file (~/.config/tidal/config.yaml): where `tidal` finds a
// server and a token when neither a flag nor the environment names them.
//
//   server: http://127.0.0.1:8080     # used when no context is current; a
//                                     # comma-separated list for replicas
//   token: ...
//   ca_file: /etc/tidal/ca.pem        # optional: the CA an https:// server's
//                                     # certificate must chain to
//   current_context: up               # optional: which context wins
//   contexts:
//     up: {server: http://127.0.0.1:46075, token: ...}
//
// `tidal up` writes the context "up" and makes it current, and removes it on
// exit if it still points at that cluster, so a plain `tidal list` talks to
// the local cluster while it runs and to the usual server after.
#ifndef TIDAL_CLI_CLI_CONFIG_H_
#define TIDAL_CLI_CLI_CONFIG_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"

namespace tidal::cli {

struct CliContext {
  std::string server;
  std::string token;
  std::string ca_file;  // "" = the system's CAs
  bool operator==(const CliContext&) const = default;
};

class CliConfig {
 public:
  // $TIDAL_CONFIG, else $XDG_CONFIG_HOME/tidal/config.yaml, else
  // $HOME/.config/tidal/config.yaml; "" when none of them is set.
  static std::string DefaultPath();

  // A missing file is an empty config; an unknown key is an error naming it.
  static StatusOr<CliConfig> Load(const std::string& path);
  // Writes atomically (a temp file renamed over), mode 0600: it holds tokens.
  // An empty config removes the file.
  Status Save(const std::string& path) const;

  // The current context's server and token, else the top-level ones.
  CliContext Effective() const;
  bool empty() const { return top_.server.empty() && top_.token.empty() && contexts_.empty(); }

  void SetContext(const std::string& name, CliContext c) { contexts_[name] = std::move(c); }
  void UseContext(const std::string& name) { current_ = name; }
  // Drops the context `name` if it still holds `expected` (and stops using
  // it); returns whether it did.
  bool RemoveContextIf(const std::string& name, const CliContext& expected);

 private:
  CliContext top_;
  std::string current_;
  std::map<std::string, CliContext> contexts_;
};

// The server's base URL as the CLI uses it: a scheme added when missing, and
// a trailing "/" or "/v1" dropped, so that the API address `tidal up` or a
// colleague prints (".../v1") works as well as the bare one.
std::string NormalizeServerUrl(std::string url);

// A server setting (--server, TIDAL_SERVER, the config file's server): one
// base URL, or the comma-separated URLs of a replicated control plane's
// replicas ("a:8080,b:8080"), each normalized as above, then checked and
// deduplicated by protocol::ParseServerList. Errors name --server.
StatusOr<std::vector<std::string>> ParseServerUrls(std::string_view list);

}  // namespace tidal::cli

#endif  // TIDAL_CLI_CLI_CONFIG_H_
