// The server's config file (docs/operations.md): where the cluster and policy
// files are, the store, listen address, tokens (as SHA-256 digests), GPU-hour
// prices, admission defaults per project and the loop's timings. Every field
// is optional: with no file the server runs the embedded examples/basic
// cluster and DefaultPolicy().
#ifndef TIDAL_SERVER_SERVER_CONFIG_H_
#define TIDAL_SERVER_SERVER_CONFIG_H_

#include <map>
#include <string>

#include "core/common/status.h"
#include "core/common/time.h"
#include "core/model/policy.h"
#include "core/model/workload.h"
#include "server/auth.h"
#include "server/catalog.h"
#include "server/overload_guard.h"

namespace tidal::server {

struct KindDefaults {
  std::optional<Duration> checkpoint_interval;
  std::optional<Duration> max_runtime;
  std::optional<int> gpus_per_replica;
};

// What admission fills in for a project's workloads when left out.
struct ProjectDefaults {
  std::string image;
  std::string dataset;
  std::string model_version;
  std::map<WorkloadKind, KindDefaults> kinds;
};

struct ServerConfig {
  std::string listen = "127.0.0.1:8080";
  std::string store = "sqlite:tidal.db";
  // The dashboard's bundle (web/dist), served at `/`; "" = look next to the
  // executable (server/static_files.h DefaultWebDir).
  std::string web_dir;
  // PEM certificate (chain) and unencrypted private key: both set = the API
  // is served over TLS only (https://), neither = plain HTTP. Checked at
  // start (server/tls_files.h).
  std::string tls_cert_file;
  std::string tls_key_file;
  Catalog catalog;
  PolicyConfig policy;
  // The cluster and policy files' text as read ("" = the built-in default
  // policy): the store keeps them (meta) so `tidal sim replay` reruns the
  // history under the configuration it ran under.
  std::string cluster_text;
  std::string policy_text;
  Authenticator auth;
  std::map<std::string, double> gpu_price_per_hour;  // by GPU model
  std::map<std::string, ProjectDefaults> project_defaults;
  Duration schedule_interval = seconds(1);
  // Events wake the loop, but passes are at least this far apart so that a
  // burst of submits costs one pass, not one per submit.
  Duration min_pass_gap = milliseconds(50);
  Duration node_lease = seconds(30);
  Duration heartbeat_interval = seconds(5);
  // A debug job whose GPUs stay below idle_utilization this long is reclaimed.
  Duration debug_idle_limit = minutes(30);
  double idle_utilization = 0.05;
  size_t max_body_bytes = 1 << 20;
  // The HTTP layer (server/http_server.h): handler threads (requests handled
  // at once; an idle connection holds none), the requests waiting for or
  // holding one, open connections, and the read deadlines.
  int http_threads = 64;
  int http_max_queued = 4096;
  int http_max_connections = 16384;
  Duration http_header_timeout = seconds(10);
  Duration http_body_timeout = seconds(30);
  Duration http_idle_timeout = minutes(5);
  // Overload protection (server/overload_guard.h): a tenant's unfinished
  // (pending or running) workloads, its submit rate (0 = unlimited) and each
  // client address's failed-authentication budget.
  int tenant_max_unfinished = 100000;
  double tenant_submit_rate_per_s = 0;
  double tenant_submit_burst = 0;  // 0 = twice the rate
  double auth_failure_burst = 100;
  double auth_failure_rate_per_s = 10;
  // Every this many journal records (or, if more, as many as the state has
  // workloads and nodes) the store writes a snapshot of the state and
  // deletes the records it covers (docs/formats.md "Snapshots"), so the
  // journal stays bounded; 10 to 100,000,000.
  int64_t snapshot_every_records = 10000;
};

// Parses the YAML text of a server config; relative file names resolve
// against `base_dir`.
StatusOr<ServerConfig> ParseServerConfig(std::string_view yaml, const std::string& source_name,
                                         const std::string& base_dir);
// "" = no file: embedded defaults.
StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

// The overload guard's limits from the config (server/overload_guard.h).
OverloadLimits OverloadLimitsFor(const ServerConfig& config);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_SERVER_CONFIG_H_
