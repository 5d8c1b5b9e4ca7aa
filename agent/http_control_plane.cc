#include <fmt/core.h>
#include <httplib.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <utility>

#include "agent/control_plane.h"
#include "agent/token_source.h"
#include "protocol/node_registration.h"

namespace tidal::agent {
namespace {

using nlohmann::json;

class HttpControlPlane final : public ControlPlane {
 public:
  HttpControlPlane(const std::string& url, const std::string& token, Duration timeout,
                   std::string credential_file, const std::string& ca_file)
      : url_(url),
        bootstrap_token_(token),
        credential_file_(std::move(credential_file)),
        timeout_(timeout),
        client_(url),
        watch_client_(url) {
    const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
    for (httplib::Client* c : {&client_, &watch_client_}) {
      if (!ca_file.empty()) c->set_ca_cert_path(ca_file.c_str());
      c->enable_server_certificate_verification(true);
      c->set_connection_timeout(0, usec);
      c->set_read_timeout(0, usec);  // a watch sets its own
      c->set_write_timeout(0, usec);
      c->set_keep_alive(true);
      // Small JSON requests on a kept-alive connection: without this, Nagle
      // plus the server's delayed ACK adds ~40 ms to every call.
      c->set_tcp_nodelay(true);
    }
    // A restarted agent presents the credential it was issued, so the server
    // lets it register its node again and adopt the pods still running.
    if (!credential_file_.empty() && access(credential_file_.c_str(), F_OK) == 0) {
      if (auto saved = ReadTokenFile(credential_file_); saved.ok()) credential_ = *saved;
    }
  }

  // Registers with the node's credential once it has one (the server then
  // accepts a re-registration from no one else), else with the bootstrap
  // token. A credential the server no longer knows (its store was wiped) is
  // dropped and the bootstrap token tried.
  StatusOr<Lease> Register(const json& body) override {
    StatusOr<json> reply = Post("/v1/agent/register", body, Token());
    if (!reply.ok() && reply.status().code() == StatusCode::kUnauthenticated && HasCredential()) {
      ForgetCredential();
      reply = Post("/v1/agent/register", body, Token());
    }
    if (!reply.ok()) return reply.status();
    auto decoded = protocol::RegistrationReplyFromJson(*reply);
    if (!decoded.ok()) return Internal("POST /v1/agent/register: reply " + decoded.status().message());
    if (!decoded->credential.empty()) {
      std::lock_guard lock(mu_);
      credential_ = decoded->credential;
      if (!credential_file_.empty()) {
        // Without the file a restart costs the node's pods (the server
        // refuses the bootstrap token for a live node), not the node.
        if (Status saved = WriteTokenFile(credential_file_, credential_); !saved.ok()) {
          std::fprintf(stderr, "tidal agent: %s\n", saved.ToString().c_str());
        }
      }
    }
    return Lease{decoded->lease_s, decoded->heartbeat_interval_s};
  }

  StatusOr<json> Heartbeat(const std::string& node, const json& body) override {
    return NodeCall(fmt::format("/v1/agent/nodes/{}/heartbeat", node), body);
  }

  // On a connection of its own: the sync thread's calls go on meanwhile.
  StatusOr<json> WatchPods(const std::string& node, const std::string& version, Duration wait) override {
    if (watch_cancelled_) return Unavailable("pod watch cancelled");
    watch_client_.set_read_timeout(0, std::chrono::duration_cast<std::chrono::microseconds>(wait + timeout_).count());
    const std::string path = fmt::format("/v1/agent/nodes/{}/pods?wait_ms={}&version={}", node, wait.count(),
                                         httplib::detail::encode_query_param(version));
    const bool had_credential = HasCredential();
    const httplib::Headers headers = {{"Authorization", "Bearer " + Token()}};
    auto res = watch_client_.Get(path.c_str(), headers);
    if (!res) return Unavailable(fmt::format("GET {}{}: {}", url_, path, httplib::to_string(res.error())));
    auto reply = Decode("GET", path, res->status, res->body);
    if (!reply.ok() && reply.status().code() == StatusCode::kUnauthenticated && had_credential) {
      return NotFound(reply.status().message() + " (the node's credential is unknown)");
    }
    return reply;
  }

  void CancelWatch() override {
    watch_cancelled_ = true;
    watch_client_.stop();
  }

  Status ReportEvents(const std::string& node, const json& body) override {
    auto reply = NodeCall(fmt::format("/v1/agent/nodes/{}/pods/status", node), body);
    return reply.ok() ? Status::Ok() : reply.status();
  }

  Status ShipLogs(const std::string& node, const json& body) override {
    auto reply = NodeCall(fmt::format("/v1/agent/nodes/{}/pods/logs", node), body);
    return reply.ok() ? Status::Ok() : reply.status();
  }

 private:
  std::string Token() const {
    std::lock_guard lock(mu_);
    return credential_.empty() ? bootstrap_token_ : credential_;
  }
  bool HasCredential() const {
    std::lock_guard lock(mu_);
    return !credential_.empty();
  }
  void ForgetCredential() {
    std::lock_guard lock(mu_);
    credential_.clear();
    if (!credential_file_.empty()) unlink(credential_file_.c_str());
  }

  // A call with the node's credential. 401 means the server does not know
  // it (a wiped store): NotFound makes the agent register again, with the
  // bootstrap token.
  StatusOr<json> NodeCall(const std::string& path, const json& body) {
    const bool had_credential = HasCredential();
    auto reply = Post(path, body, Token());
    if (!reply.ok() && reply.status().code() == StatusCode::kUnauthenticated && had_credential) {
      ForgetCredential();
      return NotFound(reply.status().message() + " (the node's credential is unknown: registering again)");
    }
    return reply;
  }

  StatusOr<json> Post(const std::string& path, const json& body, const std::string& token) {
    const httplib::Headers headers = {{"Authorization", "Bearer " + token}};
    auto res = client_.Post(path.c_str(), headers, body.dump(), "application/json");
    if (!res) {
      return Unavailable(fmt::format("POST {}{}: {}", url_, path, httplib::to_string(res.error())));
    }
    return Decode("POST", path, res->status, res->body);
  }

  static StatusOr<json> Decode(const char* method, const std::string& path, int status, const std::string& body) {
    json reply = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (status >= 200 && status < 300) {
      if (reply.is_discarded()) return Internal(fmt::format("{} {}: reply is not JSON", method, path));
      return reply;
    }
    std::string message = body;
    if (reply.is_object() && reply.contains("error") && reply["error"].is_object()) {
      message = reply["error"].value("message", body);
    }
    message = fmt::format("{} {}: {} {}", method, path, status, message);
    switch (status) {
      case 401: return Unauthenticated(message);
      case 403: return PermissionDenied(message);
      case 404: return NotFound(message);
      case 400: return InvalidArgument(message);
      default: return Unavailable(message);
    }
  }

  std::string url_;
  const std::string bootstrap_token_;
  // The node's credential: in memory, and in `credential_file_` (mode 0600,
  // in the agent's work dir) when one is given; never in the environment or
  // argv, where a pod could read it.
  const std::string credential_file_;
  const Duration timeout_;
  mutable std::mutex mu_;
  std::string credential_;
  httplib::Client client_;
  httplib::Client watch_client_;
  std::atomic<bool> watch_cancelled_{false};
};

}  // namespace

StatusOr<std::unique_ptr<ControlPlane>> MakeHttpControlPlane(const std::string& server_url,
                                                             const std::string& token,
                                                             Duration timeout,
                                                             const std::string& credential_file,
                                                             const std::string& ca_file) {
  if (!server_url.starts_with("http://") && !server_url.starts_with("https://")) {
    return InvalidArgument(fmt::format("--server '{}': expected http://HOST:PORT", server_url));
  }
  if (server_url.starts_with("https://")) {
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
    return InvalidArgument(fmt::format("--server '{}': this build has no TLS support", server_url));
#endif
  } else if (!ca_file.empty()) {
    return InvalidArgument(fmt::format("--ca-file: given, but --server '{}' is not https://", server_url));
  }
  // httplib would only fail each handshake; say which file is wrong now.
  if (!ca_file.empty() && access(ca_file.c_str(), R_OK) != 0) {
    return InvalidArgument(fmt::format("--ca-file '{}': cannot read it", ca_file));
  }
  return std::unique_ptr<ControlPlane>(new HttpControlPlane(server_url, token, timeout, credential_file, ca_file));
}

}  // namespace tidal::agent
