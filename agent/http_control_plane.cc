#include <fmt/core.h>
#include <fmt/format.h>
#include <httplib.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "agent/control_plane.h"
#include "agent/token_source.h"
#include "protocol/leader_redirect.h"
#include "protocol/node_registration.h"

namespace tidal::agent {
namespace {

using nlohmann::json;

// Replicas tried by one call before it gives up: the one it was using, the
// leader that one names (or the next in the list), and one more for a
// leader that just changed. Longer outages are the agent loop's to retry,
// at its own pace, so that a call never blocks the sync thread for more
// than a few connection timeouts.
constexpr size_t kMaxReplicasPerCall = 3;

class HttpControlPlane final : public ControlPlane {
 public:
  HttpControlPlane(std::vector<std::string> urls, const std::string& token, Duration timeout,
                   std::string credential_file, std::string ca_file)
      : urls_(std::move(urls)),
        bootstrap_token_(token),
        credential_file_(std::move(credential_file)),
        ca_file_(std::move(ca_file)),
        timeout_(timeout),
        client_(MakeClient(urls_.front())),
        watch_client_(MakeClient(urls_.front())) {
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
    const std::string path = fmt::format("/v1/agent/nodes/{}/pods?wait_ms={}&version={}", node, wait.count(),
                                         httplib::detail::encode_query_param(version));
    const bool had_credential = HasCredential();
    const httplib::Headers headers = {{"Authorization", "Bearer " + Token()}};
    const auto read_timeout = std::chrono::duration_cast<std::chrono::microseconds>(wait + timeout_).count();
    auto reply = CallLeader(Channel::kWatch, "GET", path, [&](httplib::Client& c) {
      c.set_read_timeout(0, read_timeout);
      return c.Get(path.c_str(), headers);
    });
    if (!reply.ok() && reply.status().code() == StatusCode::kUnauthenticated && had_credential) {
      return NotFound(reply.status().message() + " (the node's credential is unknown)");
    }
    return reply;
  }

  void CancelWatch() override {
    std::shared_ptr<httplib::Client> watch;
    {
      std::lock_guard lock(mu_);
      watch_cancelled_ = true;
      watch = watch_client_;
    }
    watch->stop();
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
  // The sync thread's calls and the pod watch each have a connection.
  enum class Channel { kSync, kWatch };

  std::shared_ptr<httplib::Client> MakeClient(const std::string& url) const {
    auto c = std::make_shared<httplib::Client>(url);
    const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(timeout_).count();
    if (!ca_file_.empty()) c->set_ca_cert_path(ca_file_.c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(0, usec);
    c->set_read_timeout(0, usec);  // a watch sets its own
    c->set_write_timeout(0, usec);
    c->set_keep_alive(true);
    // Small JSON requests on a kept-alive connection: without this, Nagle
    // plus the server's delayed ACK adds ~40 ms to every call.
    c->set_tcp_nodelay(true);
    return c;
  }

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
    const std::string text = body.dump();
    return CallLeader(Channel::kSync, "POST", path, [&](httplib::Client& c) {
      return c.Post(path.c_str(), headers, text, "application/json");
    });
  }

  // Sends the request to the replica in use; when that one cannot be
  // reached or answers that it does not lead, moves to the leader it names
  // or the next replica of the list and sends it again there, up to
  // kMaxReplicasPerCall replicas. Resending is safe: each agent call is one
  // the agent loop repeats anyway when it fails (a heartbeat, a
  // registration, events and logs the server takes again).
  StatusOr<json> CallLeader(Channel channel, const char* method, const std::string& path,
                            const std::function<httplib::Result(httplib::Client&)>& send) {
    const size_t tries = std::min(urls_.size(), kMaxReplicasPerCall);
    std::vector<std::string> failures;  // "URL: why", one per replica tried
    Status last;
    for (size_t i = 0; i < tries; ++i) {
      size_t index = 0;
      std::shared_ptr<httplib::Client> client;
      {
        std::lock_guard lock(mu_);
        if (channel == Channel::kWatch && watch_cancelled_) return Unavailable("pod watch cancelled");
        index = current_;
        client = channel == Channel::kWatch ? watch_client_ : client_;
      }
      const std::string& url = urls_[index];
      httplib::Result res = send(*client);
      std::string leader;
      if (res) {
        std::optional<protocol::NotLeaderReply> not_leader;
        if (res->status == 503) {
          not_leader = protocol::NotLeaderReplyFromJson(json::parse(res->body, nullptr, /*allow_exceptions=*/false));
        }
        if (!not_leader) return Decode(method, path, res->status, res->body);
        leader = not_leader->leader_url;
        last = Decode(method, path, res->status, res->body).status();
        failures.push_back(fmt::format("{}: not the leader ({})", url, not_leader->message));
      } else {
        if (channel == Channel::kWatch && WatchCancelled()) return Unavailable("pod watch cancelled");
        last = Unavailable(fmt::format("{} {}{}: {}", method, url, path, httplib::to_string(res.error())));
        failures.push_back(fmt::format("{}: {}", url, httplib::to_string(res.error())));
      }
      FailOver(index, leader);
    }
    // One replica: its own error, as without replicas.
    if (failures.size() == 1) return last;
    return Unavailable(fmt::format("{} {}: no replica answered as the leader ({})", method, path,
                                   fmt::join(failures, "; ")));
  }

  bool WatchCancelled() const {
    std::lock_guard lock(mu_);
    return watch_cancelled_;
  }

  // Moves both connections off the replica at `failed` (unless another
  // call already did): to `leader` when the list has it, else to the next
  // replica. A leader outside the list is not followed: the list is what
  // the operator trusts with the node's credential, and a replica that is
  // confused (or hostile) must not send the agent, and its token,
  // elsewhere.
  void FailOver(size_t failed, const std::string& leader) {
    std::shared_ptr<httplib::Client> old_watch;
    {
      std::lock_guard lock(mu_);
      if (current_ != failed) return;
      size_t next = (failed + 1) % urls_.size();
      if (!leader.empty()) {
        // Written as the list's URLs are ("http://b:8080/" is "http://b:8080").
        auto canonical = protocol::ParseServerList(leader, "leader");
        auto it = canonical.ok() ? std::find(urls_.begin(), urls_.end(), canonical->front()) : urls_.end();
        if (it != urls_.end() && it != urls_.begin() + failed) next = it - urls_.begin();
      }
      if (next == failed) return;
      current_ = next;
      client_ = MakeClient(urls_[next]);
      old_watch = std::exchange(watch_client_, MakeClient(urls_[next]));
    }
    // A long-poll still open on the old replica would hold the watch there
    // (and a CancelWatch, which stops the new connection, would miss it):
    // the watch asks the new replica instead.
    old_watch->stop();
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

  // The replicas, in the operator's order (protocol::ParseServerList).
  const std::vector<std::string> urls_;
  const std::string bootstrap_token_;
  // The node's credential: in memory, and in `credential_file_` (mode 0600,
  // in the agent's work dir) when one is given; never in the environment or
  // argv, where a pod could read it. Every replica accepts it: they share
  // one store.
  const std::string credential_file_;
  const std::string ca_file_;
  const Duration timeout_;
  mutable std::mutex mu_;
  std::string credential_;
  // The replica in use, and a connection to it for each channel: replaced
  // together on a fail-over. A call holds its own reference, so one in
  // flight keeps the connection it started on.
  size_t current_ = 0;
  std::shared_ptr<httplib::Client> client_;
  std::shared_ptr<httplib::Client> watch_client_;
  bool watch_cancelled_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<ControlPlane>> MakeHttpControlPlane(const std::string& server_urls,
                                                             const std::string& token,
                                                             Duration timeout,
                                                             const std::string& credential_file,
                                                             const std::string& ca_file) {
  auto urls = protocol::ParseServerList(server_urls, "--server");
  if (!urls.ok()) return urls.status();
  // Every replica may become the leader: each must pass the checks.
  for (const std::string& url : *urls) {
    if (url.starts_with("https://")) {
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
      return InvalidArgument(fmt::format("--server '{}': this build has no TLS support", url));
#endif
    } else if (!ca_file.empty()) {
      return InvalidArgument(fmt::format("--ca-file: given, but --server '{}' is not https://", url));
    }
  }
  // httplib would only fail each handshake; say which file is wrong now.
  if (!ca_file.empty() && access(ca_file.c_str(), R_OK) != 0) {
    return InvalidArgument(fmt::format("--ca-file '{}': cannot read it", ca_file));
  }
  return std::unique_ptr<ControlPlane>(
      new HttpControlPlane(std::move(urls).value(), token, timeout, credential_file, ca_file));
}

}  // namespace tidal::agent
