#include "server/server_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/cluster_loader.h"
#include "config/embedded_examples.h"
#include "config/field_reader.h"
#include "config/policy_loader.h"
#include "config/yaml_document.h"
#include "server/workload_codec.h"

namespace tidal::server {

namespace {

// A file the loader just read; "" if it vanished meanwhile (the replay then
// asks for the file).
std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace
namespace {

using config::ObjectReader;
using nlohmann::json;

Status ApplyCluster(const config::ClusterConfig& cc, ServerConfig& out) {
  out.catalog.cluster = cc.cluster;
  out.catalog.queues = cc.queues;
  out.catalog.projects = cc.projects;
  out.catalog.Index();
  return Status::Ok();
}

Status ReadTokens(const ObjectReader& root, ServerConfig& out) {
  if (!root.Has("tokens")) return Status::Ok();
  TIDAL_RETURN_IF_ERROR(config::ExpectArray(root.at("tokens"), "tokens"));
  size_t i = 0;
  for (const json& t : root.at("tokens")) {
    const std::string path = config::IndexPath("tokens", i++);
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r,
                           ObjectReader::Open(t, path, {"name", "role", "tenant", "sha256", "token"}));
    Principal p;
    TIDAL_RETURN_IF_ERROR(r.String("name", &p.name, /*required=*/true));
    std::string role = "user";
    TIDAL_RETURN_IF_ERROR(r.String("role", &role));
    auto parsed = ParseRole(role);
    if (!parsed.ok()) return config::FieldError(r.FieldPath("role"), parsed.status().message());
    p.role = *parsed;
    TIDAL_RETURN_IF_ERROR(r.String("tenant", &p.tenant));
    std::string digest, plain;
    TIDAL_RETURN_IF_ERROR(r.String("sha256", &digest));
    TIDAL_RETURN_IF_ERROR(r.String("token", &plain));
    if (digest.empty() == plain.empty()) {
      return config::FieldError(path, "set exactly one of sha256 (preferred) or token");
    }
    // A plain token is hashed here and not kept.
    if (!plain.empty()) digest = Sha256Hex(plain);
    Status s = out.auth.AddToken(digest, p);
    if (!s.ok()) return config::FieldError(path, s.message());
  }
  return Status::Ok();
}

Status ReadProjects(const ObjectReader& root, ServerConfig& out) {
  if (!root.Has("projects")) return Status::Ok();
  const json& projects = root.at("projects");
  if (!projects.is_object()) return config::FieldError("projects", "expected a map of project name to defaults");
  for (const auto& [name, value] : projects.items()) {
    const std::string path = config::JoinPath("projects", name);
    if (!out.catalog.FindProject(name)) {
      return config::FieldError(path, fmt::format("unknown project \"{}\"", name));
    }
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(value, path,
                                                              {"image", "dataset", "model_version", "kinds"}));
    ProjectDefaults d;
    TIDAL_RETURN_IF_ERROR(r.String("image", &d.image));
    TIDAL_RETURN_IF_ERROR(r.String("dataset", &d.dataset));
    TIDAL_RETURN_IF_ERROR(r.String("model_version", &d.model_version));
    if (r.Has("kinds")) {
      if (!r.at("kinds").is_object()) return config::FieldError(r.FieldPath("kinds"), "expected a map");
      for (const auto& [kind_name, kv] : r.at("kinds").items()) {
        const std::string kpath = config::JoinPath(r.FieldPath("kinds"), kind_name);
        auto kind = ParseKind(kind_name);
        if (!kind) return config::FieldError(kpath, "unknown kind");
        TIDAL_ASSIGN_OR_RETURN(ObjectReader k, ObjectReader::Open(kv, kpath,
                                                                  {"checkpoint_interval_s", "max_runtime_s", "gpus_per_replica"}));
        KindDefaults kd;
        if (k.Has("checkpoint_interval_s")) {
          Duration v{0};
          TIDAL_RETURN_IF_ERROR(k.Seconds("checkpoint_interval_s", &v));
          kd.checkpoint_interval = v;
        }
        if (k.Has("max_runtime_s")) {
          Duration v{0};
          TIDAL_RETURN_IF_ERROR(k.Seconds("max_runtime_s", &v));
          kd.max_runtime = v;
        }
        if (k.Has("gpus_per_replica")) {
          int v = 1;
          TIDAL_RETURN_IF_ERROR(k.Int("gpus_per_replica", &v, 1, kMaxGpusPerNode));
          kd.gpus_per_replica = v;
        }
        d.kinds[*kind] = kd;
      }
    }
    out.project_defaults[name] = d;
  }
  return Status::Ok();
}

std::string Resolve(const std::string& base_dir, const std::string& file) {
  std::filesystem::path p(file);
  if (p.is_absolute() || base_dir.empty()) return file;
  return (std::filesystem::path(base_dir) / p).string();
}

}  // namespace

StatusOr<ServerConfig> ParseServerConfig(std::string_view yaml, const std::string& source_name,
                                         const std::string& base_dir) {
  ServerConfig out;
  out.policy = config::DefaultPolicy();
  json empty = json::object();
  std::optional<config::YamlDocument> doc;
  if (!yaml.empty()) {
    TIDAL_ASSIGN_OR_RETURN(config::YamlDocument d, config::YamlDocument::Parse(yaml, source_name));
    doc = std::move(d);
  }
  const json& root = doc && !doc->root().is_null() ? doc->root() : empty;
  auto locate = [&](Status s) { return doc ? doc->Locate(s) : s; };
  auto r_or = ObjectReader::Open(root, "",
                                 {"cluster_file", "policy_file", "listen", "store",
                                  "schedule_interval_ms", "min_pass_gap_ms", "node_lease_s",
                                  "heartbeat_interval_s", "debug_idle_limit_s", "idle_utilization",
                                  "max_body_bytes", "http_threads", "http_max_queued", "http_max_connections",
                                  "http_header_timeout_ms", "http_body_timeout_ms", "http_idle_timeout_s", "gpu_prices", "tokens",
                                  "projects", "web_dir", "tls_cert_file", "tls_key_file", "tenant_max_unfinished",
                                  "tenant_submit_rate_per_s", "tenant_submit_burst", "auth_failure_burst",
                                  "auth_failure_rate_per_s", "snapshot_every_records"});
  if (!r_or.ok()) return locate(r_or.status());
  const ObjectReader& r = *r_or;
  auto step = [&](Status s) -> Status { return locate(s); };
  std::string cluster_file, policy_file;
  TIDAL_RETURN_IF_ERROR(step(r.String("cluster_file", &cluster_file)));
  TIDAL_RETURN_IF_ERROR(step(r.String("policy_file", &policy_file)));
  if (cluster_file.empty()) {
    TIDAL_ASSIGN_OR_RETURN(config::ClusterConfig cc,
                           config::ParseClusterYaml(config::kBasicClusterYaml, "embedded cluster.yaml"));
    TIDAL_RETURN_IF_ERROR(ApplyCluster(cc, out));
    out.cluster_text = std::string(config::kBasicClusterYaml);
  } else {
    TIDAL_ASSIGN_OR_RETURN(config::ClusterConfig cc,
                           config::LoadClusterFile(Resolve(base_dir, cluster_file)));
    TIDAL_RETURN_IF_ERROR(ApplyCluster(cc, out));
    out.cluster_text = ReadText(Resolve(base_dir, cluster_file));
  }
  if (!policy_file.empty()) {
    TIDAL_ASSIGN_OR_RETURN(out.policy, config::LoadPolicyFile(Resolve(base_dir, policy_file)));
    out.policy_text = ReadText(Resolve(base_dir, policy_file));
  }
  TIDAL_RETURN_IF_ERROR(step(r.String("listen", &out.listen)));
  TIDAL_RETURN_IF_ERROR(step(r.String("store", &out.store)));
  TIDAL_RETURN_IF_ERROR(step(r.String("web_dir", &out.web_dir)));
  if (!out.web_dir.empty()) out.web_dir = Resolve(base_dir, out.web_dir);
  TIDAL_RETURN_IF_ERROR(step(r.String("tls_cert_file", &out.tls_cert_file)));
  TIDAL_RETURN_IF_ERROR(step(r.String("tls_key_file", &out.tls_key_file)));
  if (out.tls_cert_file.empty() != out.tls_key_file.empty()) {
    return locate(config::FieldError(out.tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file",
                                     "required when the other TLS file is set"));
  }
  if (!out.tls_cert_file.empty()) out.tls_cert_file = Resolve(base_dir, out.tls_cert_file);
  if (!out.tls_key_file.empty()) out.tls_key_file = Resolve(base_dir, out.tls_key_file);
  if (!out.store.empty() && out.store.rfind("sqlite:", 0) == 0 && out.store.size() > 7) {
    out.store = "sqlite:" + Resolve(base_dir, out.store.substr(7));
  }
  TIDAL_RETURN_IF_ERROR(step(r.Millis("schedule_interval_ms", &out.schedule_interval, 3600e3)));
  TIDAL_RETURN_IF_ERROR(step(r.Millis("min_pass_gap_ms", &out.min_pass_gap, 60e3)));
  TIDAL_RETURN_IF_ERROR(step(r.Seconds("node_lease_s", &out.node_lease, 86400)));
  TIDAL_RETURN_IF_ERROR(step(r.Seconds("heartbeat_interval_s", &out.heartbeat_interval, 86400)));
  TIDAL_RETURN_IF_ERROR(step(r.Seconds("debug_idle_limit_s", &out.debug_idle_limit, 30 * 86400.0)));
  TIDAL_RETURN_IF_ERROR(step(r.Double("idle_utilization", &out.idle_utilization, 0, 1)));
  int max_body = static_cast<int>(out.max_body_bytes);
  TIDAL_RETURN_IF_ERROR(step(r.Int("max_body_bytes", &max_body, 1024, 256 << 20)));
  out.max_body_bytes = static_cast<size_t>(max_body);
  TIDAL_RETURN_IF_ERROR(step(r.Int("http_threads", &out.http_threads, 2, 4096)));
  TIDAL_RETURN_IF_ERROR(step(r.Int("http_max_queued", &out.http_max_queued, 1, 1'000'000)));
  TIDAL_RETURN_IF_ERROR(step(r.Int("http_max_connections", &out.http_max_connections, 1, 1'000'000)));
  auto millis = [&](const char* key, Duration* d, int min_ms, int max_ms) -> Status {
    int ms = static_cast<int>(d->count());
    TIDAL_RETURN_IF_ERROR(step(r.Int(key, &ms, min_ms, max_ms)));
    *d = milliseconds(ms);
    return Status::Ok();
  };
  TIDAL_RETURN_IF_ERROR(millis("http_header_timeout_ms", &out.http_header_timeout, 100, 600'000));
  TIDAL_RETURN_IF_ERROR(millis("http_body_timeout_ms", &out.http_body_timeout, 100, 3'600'000));
  int idle_s = static_cast<int>(out.http_idle_timeout.count() / 1000);
  TIDAL_RETURN_IF_ERROR(step(r.Int("http_idle_timeout_s", &idle_s, 1, 86400)));
  out.http_idle_timeout = seconds(idle_s);
  TIDAL_RETURN_IF_ERROR(step(r.Int("tenant_max_unfinished", &out.tenant_max_unfinished, 1, 10000000)));
  TIDAL_RETURN_IF_ERROR(step(r.Double("tenant_submit_rate_per_s", &out.tenant_submit_rate_per_s, 0, 1e6)));
  TIDAL_RETURN_IF_ERROR(step(r.Double("tenant_submit_burst", &out.tenant_submit_burst, 0, 1e7)));
  TIDAL_RETURN_IF_ERROR(step(r.Double("auth_failure_burst", &out.auth_failure_burst, 1, 1e6)));
  TIDAL_RETURN_IF_ERROR(step(r.Double("auth_failure_rate_per_s", &out.auth_failure_rate_per_s, 0.001, 1e6)));
  TIDAL_RETURN_IF_ERROR(step(r.Int64("snapshot_every_records", &out.snapshot_every_records, 10, 100'000'000)));
  if (r.Has("gpu_prices")) {
    const json& prices = r.at("gpu_prices");
    if (!prices.is_object()) return locate(config::FieldError("gpu_prices", "expected a map of GPU model to price per GPU-hour"));
    for (const auto& [model, price] : prices.items()) {
      if (!price.is_number() || price.get<double>() < 0) {
        return locate(config::FieldError(config::JoinPath("gpu_prices", model),
                                         "expected a non-negative number, got " + config::Shown(price)));
      }
      out.gpu_price_per_hour[model] = price.get<double>();
    }
  }
  TIDAL_RETURN_IF_ERROR(step(ReadTokens(r, out)));
  TIDAL_RETURN_IF_ERROR(step(ReadProjects(r, out)));
  return out;
}

StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  if (path.empty()) return ParseServerConfig("", "", "");
  TIDAL_ASSIGN_OR_RETURN(std::string text, config::ReadTextFile(path));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ParseServerConfig(text, path, dir);
}

OverloadLimits OverloadLimitsFor(const ServerConfig& config) {
  return OverloadLimits{config.http_threads, config.tenant_submit_rate_per_s, config.tenant_submit_burst,
                        config.auth_failure_burst, config.auth_failure_rate_per_s};
}

}  // namespace tidal::server
