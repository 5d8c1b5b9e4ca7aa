#include "server/http_api.h"

#include <cctype>
#include <cstdio>
#include <map>
#include <string_view>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/input_limits.h"
#include "core/colocation/loan_calendar.h"
#include "protocol/json_writer.h"
#include "protocol/leader_redirect.h"
#include "protocol/object_reader.h"
#include "protocol/pod_assignment.h"
#include "protocol/workload_batch.h"
#include "server/overload_guard.h"
#include "server/report.h"
#include "server/static_files.h"

namespace tidal::server {

using nlohmann::json;

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

// The Idempotency-Key header of a submit ("" = none), bounded.
StatusOr<std::string> IdempotencyKey(const HttpRequest& req) {
  std::string key(req.header("Idempotency-Key"));
  if (key.size() > 200) return InvalidArgument("Idempotency-Key: longer than 200 characters");
  return key;
}

std::string ErrorBody(const Status& status, std::string_view code_name) {
  const std::string& msg = status.message();
  // A message that starts with a path ("replicas: ...", "gpus[2].index: ...")
  // names its field.
  const std::string field(protocol::FieldOfMessage(msg));
  std::string code(code_name.empty() ? StatusCodeName(status.code()) : code_name);
  for (char& c : code) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  json j = {{"error", {{"code", code}, {"message", msg}}}};
  j["error"]["field"] = field.empty() ? json(nullptr) : json(field);
  return j.dump();
}

StatusOr<std::pair<std::string, int>> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(fmt::format("--listen: expected HOST:PORT, got \"{}\"", listen));
  }
  const std::string host = listen.substr(0, colon);
  const std::string port_s = listen.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_s.c_str(), &end, 10);
  if (port_s.empty() || *end != '\0' || port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("--listen: port must be 0..65535, got \"{}\"", port_s));
  }
  return std::make_pair(host, static_cast<int>(port));
}

const std::vector<ApiRoute>& ApiRoutes() {
  static const std::vector<ApiRoute> routes = {
      {"GET", "/healthz"},
      {"GET", "/readyz"},
      {"GET", "/metrics"},
      {"POST", "/v1/workloads"},
      {"POST", protocol::kWorkloadBatchPath.data()},
      {"GET", "/v1/workloads", true},
      {"GET", "/v1/workloads/{id}", true},
      {"POST", "/v1/workloads/{id}/cancel"},
      {"POST", "/v1/workloads/{id}/resize"},
      {"POST", "/v1/workloads/{id}/approve"},
      {"GET", "/v1/workloads/{id}/explain"},
      {"GET", "/v1/workloads/{id}/logs"},
      {"POST", "/v1/dry-run"},
      {"GET", "/v1/queues", true},
      {"GET", "/v1/nodes", true},
      {"POST", "/v1/nodes/{node}/cordon"},
      {"POST", "/v1/nodes/{node}/uncordon"},
      {"GET", "/v1/loans", true},
      {"GET", "/v1/audit", true},
      {"GET", "/v1/reports", true},
      {"POST", "/v1/agent/register"},
      {"POST", "/v1/agent/nodes/{node}/heartbeat"},
      {"GET", "/v1/agent/nodes/{node}/pods"},
      {"POST", "/v1/agent/nodes/{node}/pods/status"},
      {"POST", "/v1/agent/nodes/{node}/pods/logs"},
  };
  return routes;
}

namespace {

// A reply's JSON text. An asynchronous route encodes it where its answer
// is made: a submit's on its handler thread, while the store commits.
StatusOr<std::string> Encoded(const StatusOr<json>& r) {
  if (!r.ok()) return r.status();
  return protocol::DumpReserved(*r);
}

void Reply(HttpResponse& res, StatusOr<std::string> text, int ok_status) {
  if (text.ok()) {
    res.status = ok_status;
    // set_content would copy the body once more.
    res.body = std::move(*text);
    res.set_header("Content-Type", "application/json");
  } else {
    res.status = HttpStatusFor(text.status().code());
    res.set_content(ErrorBody(text.status()), "application/json");
  }
}

void Reply(HttpResponse& res, const StatusOr<json>& r, int ok_status = 200) { Reply(res, Encoded(r), ok_status); }

StatusOr<json> ParseBody(const HttpRequest& req, size_t limit) {
  if (req.body.size() > limit) {
    return InvalidArgument(fmt::format("body: {} bytes is above the limit of {}", req.body.size(), limit));
  }
  if (req.body.empty()) return InvalidArgument("body: expected a JSON object, got nothing");
  // Before parsing: a body of 150,000 '[' would exhaust the stack of the
  // parser's callers (copies and destructors recurse).
  TIDAL_RETURN_IF_ERROR(config::CheckJsonDepth(req.body, "body"));
  try {
    return json::parse(req.body);
  } catch (const json::parse_error& e) {
    return InvalidArgument(fmt::format("body: malformed JSON at byte {}", e.byte));
  } catch (const json::exception& e) {
    // 1e309: nlohmann refuses numbers that overflow a double.
    const std::string what = e.what();  // "[json.exception.out_of_range.406] number overflow ..."
    const size_t cut = what.find("] ");
    return InvalidArgument(fmt::format("body: {}", cut == std::string::npos ? what : what.substr(cut + 2)));
  }
}

StatusOr<uint64_t> ParseId(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v == 0 || s[0] == '-') {
    return InvalidArgument(fmt::format("id: expected a positive integer, got \"{}\"", s));
  }
  return static_cast<uint64_t>(v);
}

Status ParamInt(const HttpRequest& req, const char* name, int64_t* out, int64_t min, int64_t max) {
  if (!req.has_param(name)) return Status::Ok();
  const std::string v = req.param(name);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < min || x > max) {
    return InvalidArgument(fmt::format("{}: expected an integer from {} to {}, got \"{}\"", name, min, max, v));
  }
  *out = x;
  return Status::Ok();
}

Status OnlyParams(const HttpRequest& req, std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, v] : req.params) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || k == a;
    if (!ok) return InvalidArgument(fmt::format("{}: unknown query parameter", k));
  }
  return Status::Ok();
}

}  // namespace

namespace {

HttpServerOptions ServerOptions(const ServerConfig& config) {
  HttpServerOptions o;
  o.workers = config.http_threads;
  o.max_queued = config.http_max_queued;
  o.max_connections = config.http_max_connections;
  o.max_body_bytes = config.max_body_bytes;
  o.header_timeout = config.http_header_timeout;
  o.body_timeout = config.http_body_timeout;
  o.idle_timeout = config.http_idle_timeout;
  // TLS is all or nothing: a TLS server answers only TLS handshakes, so a
  // plain-HTTP client (which would send tokens in the clear) gets no reply.
  o.tls_cert_file = config.tls_cert_file;
  o.tls_key_file = config.tls_key_file;
  return o;
}

}  // namespace

HttpApi::HttpApi(ControlPlane& cp, const Authenticator& auth, const ServerConfig& config)
    : HttpApi(&cp, nullptr, cp.metrics(), cp.overload(), auth, config) {}

HttpApi::HttpApi(FollowerReads& follower, const Authenticator& auth, const ServerConfig& config)
    : HttpApi(nullptr, &follower, follower.metrics(), follower.overload(), auth, config) {}

HttpApi::HttpApi(ControlPlane* leader, FollowerReads* follower, Metrics& metrics, OverloadGuard& overload,
                 const Authenticator& auth, const ServerConfig& config)
    : leader_(leader),
      follower_(follower),
      metrics_(metrics),
      overload_(overload),
      auth_(auth),
      config_(config),
      svr_(std::make_unique<HttpServer>(ServerOptions(config))) {
  Routes();
}

// Parked long-polls and submits waiting for their fsync hold responders
// into the HTTP server and this object: all answered before they go.
HttpApi::~HttpApi() {
  if (leader_) leader_->AnswerPodWatches();
  std::unique_lock lock(async_mu_);
  async_done_.wait(lock, [this] { return async_in_flight_ == 0; });
}

StatusOr<int> HttpApi::Bind(const std::string& host, int port) { return svr_->Bind(host, port); }

void HttpApi::Serve() { svr_->Serve(); }
void HttpApi::Stop() { svr_->Stop(); }

std::shared_ptr<ControlPlane> HttpApi::Plane() const {
  // The leader's outlives this object: a pointer that owns nothing.
  if (leader_) return std::shared_ptr<ControlPlane>(std::shared_ptr<ControlPlane>(), leader_);
  return follower_->view();
}

namespace {

// The 503 that sends a client to the leader (protocol/leader_redirect.h),
// or says why there is none.
void NotLeader(const FollowerView& view, HttpResponse& res) {
  protocol::NotLeaderReply reply;
  reply.leader_url = view.leader_url;
  if (!view.problem.empty()) {
    reply.message = fmt::format(
        "no replica can lead: {}; the API and scheduling resume by themselves when etcd answers", view.problem);
  } else if (view.leader_url.empty()) {
    reply.message = "this replica does not lead, and no replica leads yet (an election is on); retry";
  } else {
    reply.message = fmt::format("this replica does not lead; the leader is {}", view.leader_url);
  }
  res.status = 503;
  if (!reply.leader_url.empty()) res.set_header(protocol::kLeaderHeader, reply.leader_url);
  res.set_header("Retry-After", "1");
  res.set_content(protocol::NotLeaderReplyToJson(reply).dump(), "application/json");
}

bool FollowerReadsRoute(const std::string& method, const std::string& name) {
  for (const ApiRoute& r : ApiRoutes()) {
    if (r.follower_reads && method == r.method && name == r.name) return true;
  }
  return false;
}

}  // namespace

bool HttpApi::FollowerAnswers(const HttpRequest& req, const std::string& route_name, const ControlPlane* view,
                              HttpResponse& res) const {
  const FollowerView leader = follower_->leader();
  if (view == nullptr || req.header(protocol::kConsistencyHeader) != protocol::kConsistencyStale ||
      !FollowerReadsRoute(req.method, route_name)) {
    NotLeader(leader, res);
    return false;
  }
  res.set_header(protocol::kReplicaHeader, "follower");
  res.set_header(protocol::kStaleMsHeader, std::to_string(follower_->stale_ms()));
  if (!leader.leader_url.empty()) res.set_header(protocol::kLeaderHeader, leader.leader_url);
  return true;
}

StatusOr<Principal> HttpApi::Authenticate(const std::string& authorization_header, const ControlPlane& cp) const {
  TIDAL_ASSIGN_OR_RETURN(const std::string digest, BearerTokenDigest(authorization_header));
  auto who = auth_.Authenticate(digest);
  if (who.ok()) return who;
  // Not a configured token: maybe a node's credential, which the control
  // plane issued and keeps (by digest) in its store.
  auto node = cp.AuthenticateNode(digest);
  return node.ok() ? node : who;
}

void HttpApi::Admission::LeaveSeat() {
  if (guard != nullptr) guard->Leave(tenant);
  guard = nullptr;
}

HttpApi::Admission::~Admission() { LeaveSeat(); }

StatusOr<Principal> HttpApi::Admit(const HttpRequest& req, const ControlPlane& cp, bool submit,
                                   Admission* admission) {
  OverloadGuard& guard = overload_;
  const auto now = std::chrono::steady_clock::now();
  auto who = Authenticate(std::string(req.header("Authorization")), cp);
  if (!who.ok()) {
    if (guard.NoteAuthFailure(req.remote_addr, now)) return who;
    return Rejected(Rejection::kAuthFailures, admission,
                    fmt::format("too many failed authentications from {}", req.remote_addr));
  }
  // Admins and nodes pass: the operator and the agents' leases must get
  // through an overload (server/overload_guard.h).
  if (who->role != Role::kUser) return who;
  if (!guard.TryEnter(who->tenant)) {
    return Rejected(Rejection::kFairShare, admission,
                    fmt::format("server busy: tenant {} holds its fair share of the server's request seats",
                                who->tenant));
  }
  admission->guard = &guard;
  admission->tenant = who->tenant;
  if (submit && !guard.TakeSubmit(who->tenant, now)) {
    return Rejected(Rejection::kSubmitRate, admission,
                    fmt::format("tenant {} is over its submit rate (tenant_submit_rate_per_s)", who->tenant));
  }
  return who;
}

Status HttpApi::TakeBatchSubmits(const Principal& who, size_t count, Admission* admission) {
  if (who.role != Role::kUser) return Status::Ok();
  const double burst = overload_.submit_burst();
  if (burst > 0 && static_cast<double>(count) > burst) {
    // It would wait forever: no bucket ever holds more than the burst.
    return InvalidArgument(fmt::format("workloads: a batch of {} is more than tenant {} may submit at once ({}, "
                                       "tenant_submit_burst); split it",
                                       count, who.tenant, burst));
  }
  if (!overload_.TakeSubmit(who.tenant, std::chrono::steady_clock::now(), static_cast<int>(count))) {
    return Rejected(Rejection::kSubmitRate, admission,
                    fmt::format("tenant {} is over its submit rate (tenant_submit_rate_per_s) for a batch of {}",
                                who.tenant, count));
  }
  return Status::Ok();
}

Status HttpApi::Rejected(Rejection why, Admission* admission, std::string_view message) {
  metrics_.Inc("tidal_http_rejected_total", {{"reason", std::string(RejectionName(why))}});
  // One figure for the body and the header (Finish writes it), so the two
  // cannot disagree.
  admission->retry_after_s = overload_.RetryAfterS(why);
  return ResourceExhausted(fmt::format("{}; retry after {} s", message, admission->retry_after_s));
}

void HttpApi::Finish(const std::string& route_name, const std::string& method,
                     std::chrono::steady_clock::time_point start, const Admission& admission,
                     HttpResponse& res) {
  if (admission.retry_after_s > 0) res.set_header("Retry-After", std::to_string(admission.retry_after_s));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.Observe("tidal_api_request_seconds", {{"route", route_name}, {"method", method}}, s);
  metrics_.Inc("tidal_api_requests_total", {{"route", route_name}, {"method", method}, {"code", std::to_string(res.status)}});
}

void HttpApi::Routes() {
  // The replies the HTTP layer gives itself get the API's error body.
  svr_->OnError([this](std::optional<Rejection> why, HttpResponse& res) {
    if (why) metrics_.Inc("tidal_http_rejected_total", {{"reason", std::string(RejectionName(*why))}});
    const std::string message = std::move(res.body);
    switch (res.status) {
      case 500: res.set_content(ErrorBody(Internal(message)), "application/json"); break;
      case 413: res.set_content(ErrorBody(InvalidArgument(message), "payload_too_large"), "application/json"); break;
      case 431: res.set_content(ErrorBody(InvalidArgument(message), "header_too_large"), "application/json"); break;
      case 503:
        res.set_header("Retry-After", "1");
        res.set_content(ErrorBody(Unavailable(message)), "application/json");
        break;
      default: res.set_content(ErrorBody(InvalidArgument(message)), "application/json"); break;
    }
  });
  using Req = HttpRequest;
  using Res = HttpResponse;
  using Handler = std::function<StatusOr<json>(const Req&, const Principal&, ControlPlane&, int* ok_status)>;
  // Wraps a handler with the follower's check, auth, timing and error
  // mapping. The request holds its control plane (a follower's view may be
  // replaced meanwhile) until it is answered.
  auto route = [this](const std::string& route_name, Handler h) {
    const bool submits = route_name == "/v1/workloads" || route_name == "/v1/dry-run";
    return [this, route_name, h, submits](const Req& req, Res& res) {
      const auto start = std::chrono::steady_clock::now();
      const std::shared_ptr<ControlPlane> cp = Plane();
      if (follower_ && !FollowerAnswers(req, route_name, cp.get(), res)) {
        return Finish(route_name, req.method, start, Admission(), res);
      }
      Admission admission;
      auto who = Admit(req, *cp, submits && req.method == "POST", &admission);
      int ok_status = 200;
      StatusOr<json> out = who.ok() ? h(req, *who, *cp, &ok_status) : StatusOr<json>(who.status());
      Reply(res, out, ok_status);
      Finish(route_name, req.method, start, admission, res);
    };
  };
  // The same for a handler that answers later (HttpServer::RouteAsync): it
  // gets `finish` (a reply and its 2xx status) to call once, from any
  // thread. The caller's seat is given back when the handler returns: seats
  // share the handler threads, and a request waiting for its fsync holds
  // none (else a lone tenant's submits in flight would exceed its share).
  using Finisher = std::function<void(StatusOr<std::string> json_text, int ok_status)>;
  // Only the leader serves them (a follower's view takes no writes, and
  // parks no watch), so its control plane outlives them.
  using AsyncBody = std::function<void(const Req&, const Principal&, Admission&, const Finisher&)>;
  auto async_route = [this](const std::string& route_name, AsyncBody body) -> HttpServer::AsyncHandler {
    const bool submits = route_name == "/v1/workloads";
    return [this, route_name, body, submits](const Req& req, HttpServer::Responder reply) {
      const auto start = std::chrono::steady_clock::now();
      if (follower_) {
        Res res;
        NotLeader(follower_->leader(), res);
        Finish(route_name, req.method, start, Admission(), res);
        return reply(std::move(res));
      }
      auto admission = std::make_shared<Admission>();
      const std::string method = req.method;
      {
        std::lock_guard lock(async_mu_);
        ++async_in_flight_;
      }
      Finisher finish = [this, route_name, method, start, admission, reply](StatusOr<std::string> json_text,
                                                                             int ok_status) {
        Res res;
        Reply(res, std::move(json_text), ok_status);
        Finish(route_name, method, start, *admission, res);
        reply(std::move(res));
        std::lock_guard lock(async_mu_);
        if (--async_in_flight_ == 0) async_done_.notify_all();
      };
      try {
        auto who = Admit(req, *leader_, submits && req.method == "POST", admission.get());
        if (!who.ok()) return finish(who.status(), 200);
        body(req, *who, *admission, finish);
        admission->LeaveSeat();
      } catch (const std::exception& e) {
        // Only before `body` handed `finish` on: the bodies below do not
        // throw once they have.
        finish(Internal(e.what()), 200);
      }
    };
  };
  const size_t limit = config_.max_body_bytes;
  std::map<std::string, HttpServer::Handler> handlers;  // "METHOD name" -> handler
  std::map<std::string, HttpServer::AsyncHandler> async_handlers;
  auto add = [&handlers](const std::string& method, const std::string& name, HttpServer::Handler h) {
    handlers[method + " " + name] = std::move(h);
  };
  auto user_or_admin = [](const Principal& p) { return RequireRole(p, {Role::kUser, Role::kAdmin}); };

  add("GET", "/healthz", [this](const Req&, Res& res) {
    if (!follower_) return res.set_content("ok\n", "text/plain");
    const std::string leader = follower_->leader().leader_url;
    res.set_content(fmt::format("following {}\n", leader.empty() ? "(no leader yet)" : leader), "text/plain");
  });
  add("GET", "/readyz", [this](const Req&, Res& res) {
    // Ready means leading, so a load balancer that checks it sends nothing
    // to a follower; one for stale reads checks /healthz.
    if (follower_) return NotLeader(follower_->leader(), res);
    const bool ready = leader_->ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "recovering\n", "text/plain");
  });
  add("GET", "/metrics", [this](const Req&, Res& res) {
    res.set_content(follower_ ? follower_->MetricsText() : leader_->MetricsText(svr_->connections()),
                    "text/plain; version=0.0.4");
  });

  // A durable submit's answer: 201, or 200 for an Idempotency-Key retry.
  const auto answer_submit = [](const Finisher& finish) {
    return [finish](StatusOr<ControlPlane::EncodedSubmit> r) {
      if (!r.ok()) return finish(r.status(), 200);
      finish(std::move(r->text), r->replayed ? 200 : 201);
    };
  };
  // Answered from the store's writer thread once durable: no handler thread
  // sleeps on the fsync.
  async_handlers["POST /v1/workloads"] = async_route(
      "/v1/workloads", [=, this](const Req& req, const Principal& p, Admission&, const Finisher& finish) {
        if (Status s = user_or_admin(p); !s.ok()) return finish(s, 200);
        StatusOr<std::string> key = IdempotencyKey(req);
        if (!key.ok()) return finish(key.status(), 200);
        StatusOr<json> body = ParseBody(req, limit);
        if (!body.ok()) return finish(body.status(), 200);
        leader_->SubmitAsync(
            p, SubmitRequest{{std::move(*body)}, *key, false},
            [](SubmitResult& r) { return std::move(r.workloads.front()); },
            answer_submit(finish));
      });
  // Workloads submitted together: admitted all or none, in one store change
  // (protocol/workload_batch.h). Each draws a token of the submit rate.
  async_handlers["POST " + std::string(protocol::kWorkloadBatchPath)] = async_route(
      std::string(protocol::kWorkloadBatchPath),
      [=, this](const Req& req, const Principal& p, Admission& admission, const Finisher& finish) {
        if (Status s = user_or_admin(p); !s.ok()) return finish(s, 200);
        StatusOr<std::string> key = IdempotencyKey(req);
        if (!key.ok()) return finish(key.status(), 200);
        StatusOr<json> body = ParseBody(req, limit);
        if (!body.ok()) return finish(body.status(), 200);
        StatusOr<protocol::WorkloadBatch> batch = protocol::WorkloadBatchFromJson(*body);
        if (!batch.ok()) return finish(batch.status(), 200);
        if (Status s = TakeBatchSubmits(p, batch->workloads.size(), &admission); !s.ok()) return finish(s, 200);
        leader_->SubmitAsync(
            p, SubmitRequest{std::move(batch->workloads), *key, true},
            [](SubmitResult& r) { return protocol::WorkloadBatchText(r.workloads); },
            answer_submit(finish));
      });
  add("GET", "/v1/workloads", route("/v1/workloads", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_RETURN_IF_ERROR(OnlyParams(req, {"tenant", "project", "queue", "kind", "state", "limit"}));
    ListFilter f;
    f.tenant = req.param("tenant");
    f.project = req.param("project");
    f.queue = req.param("queue");
    f.kind = req.param("kind");
    f.state = req.param("state");
    int64_t lim = 500;
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "limit", &lim, 1, 10000));
    f.limit = static_cast<int>(lim);
    return cp.List(p, f);
  }));
  add("GET", "/v1/workloads/{id}", route("/v1/workloads/{id}", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_ASSIGN_OR_RETURN(uint64_t id, ParseId(req.path_params[0]));
    return cp.Get(p, id);
  }));
  add("POST", "/v1/workloads/{id}/cancel", route("/v1/workloads/{id}/cancel", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_ASSIGN_OR_RETURN(uint64_t id, ParseId(req.path_params[0]));
    return cp.Cancel(p, id);
  }));
  add("POST", "/v1/workloads/{id}/resize", route("/v1/workloads/{id}/resize", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_ASSIGN_OR_RETURN(uint64_t id, ParseId(req.path_params[0]));
    TIDAL_ASSIGN_OR_RETURN(json body, ParseBody(req, limit));
    return cp.Resize(p, id, body);
  }));
  add("POST", "/v1/workloads/{id}/approve", route("/v1/workloads/{id}/approve", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(RequireRole(p, {Role::kAdmin}));
    TIDAL_ASSIGN_OR_RETURN(uint64_t id, ParseId(req.path_params[0]));
    return cp.Approve(p, id);
  }));
  add("GET", "/v1/workloads/{id}/explain", route("/v1/workloads/{id}/explain", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_ASSIGN_OR_RETURN(uint64_t id, ParseId(req.path_params[0]));
    return cp.Explain(p, id);
  }));
  add("GET", "/v1/workloads/{id}/logs", route("/v1/workloads/{id}/logs", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_ASSIGN_OR_RETURN(uint64_t id, ParseId(req.path_params[0]));
    TIDAL_RETURN_IF_ERROR(OnlyParams(req, {"rank", "offset"}));
    int64_t rank = 0, offset = 0;
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "rank", &rank, 0, protocol::kMaxPodRank - 1));
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "offset", &offset, 0, INT64_MAX));
    return cp.WorkloadLogs(p, id, static_cast<int>(rank), offset);
  }));
  add("POST", "/v1/dry-run", route("/v1/dry-run", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_ASSIGN_OR_RETURN(json body, ParseBody(req, limit));
    return cp.DryRun(p, body);
  }));
  add("GET", "/v1/queues", route("/v1/queues", [=, this](const Req&, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    return cp.Queues(p);
  }));
  add("GET", "/v1/nodes", route("/v1/nodes", [=, this](const Req&, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    return cp.Nodes(p);
  }));
  for (const bool cordoned : {true, false}) {
    const std::string verb = cordoned ? "cordon" : "uncordon";
    add("POST", "/v1/nodes/{node}/" + verb,
        route("/v1/nodes/{node}/" + verb, [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
          TIDAL_RETURN_IF_ERROR(RequireRole(p, {Role::kAdmin}));
          return cp.Cordon(p, req.path_params[0], cordoned);
        }));
  }
  add("GET", "/v1/loans", route("/v1/loans", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_RETURN_IF_ERROR(OnlyParams(req, {"hours", "slot_minutes"}));
    int64_t hours = 24, slot_minutes = 30;
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "hours", &hours, 1, 7 * 24));
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "slot_minutes", &slot_minutes, 5, 24 * 60));
    if (hours * 60 < slot_minutes) {
      return InvalidArgument(fmt::format("slot_minutes: {} is longer than hours ({} h)", slot_minutes, hours));
    }
    LoanCalendarOptions options;
    options.span = std::chrono::hours(hours);
    options.slot = std::chrono::minutes(slot_minutes);
    return cp.Loans(p, options);
  }));
  add("GET", "/v1/audit", route("/v1/audit", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_RETURN_IF_ERROR(user_or_admin(p));
    TIDAL_RETURN_IF_ERROR(OnlyParams(req, {"from_ms", "to_ms", "workload", "action", "tenant", "limit"}));
    AuditQuery q;
    int64_t wl = 0, lim = 1000;
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "from_ms", &q.from_ms, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "to_ms", &q.to_ms, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "workload", &wl, 0, INT64_MAX));
    TIDAL_RETURN_IF_ERROR(ParamInt(req, "limit", &lim, 1, 100000));
    q.workload = static_cast<uint64_t>(wl);
    q.limit = static_cast<int>(lim);
    q.action = req.param("action");
    q.tenant = req.param("tenant");
    return cp.Audit(p, q);
  }));
  add("GET", "/v1/reports", [=, this](const Req& req, Res& res) {
    const auto start = std::chrono::steady_clock::now();
    const std::shared_ptr<ControlPlane> cp = Plane();
    if (follower_ && !FollowerAnswers(req, "/v1/reports", cp.get(), res)) {
      return Finish("/v1/reports", "GET", start, Admission(), res);
    }
    Admission admission;
    auto who = Admit(req, *cp, false, &admission);
    std::string format = req.has_param("format") ? req.param("format") : "json";
    StatusOr<json> out = json();
    if (!who.ok()) {
      out = who.status();
    } else {
      out = [&]() -> StatusOr<json> {
        TIDAL_RETURN_IF_ERROR(user_or_admin(*who));
        TIDAL_RETURN_IF_ERROR(OnlyParams(req, {"from_ms", "to_ms", "tenant", "project", "format"}));
        if (format != "json" && format != "csv") {
          return InvalidArgument(fmt::format("format: expected json or csv, got \"{}\"", format));
        }
        ReportQuery q;
        TIDAL_RETURN_IF_ERROR(ParamInt(req, "from_ms", &q.from_ms, 0, INT64_MAX));
        TIDAL_RETURN_IF_ERROR(ParamInt(req, "to_ms", &q.to_ms, 0, INT64_MAX));
        q.tenant = req.param("tenant");
        q.project = req.param("project");
        return cp->Report(*who, q);
      }();
    }
    if (out.ok() && format == "csv") {
      res.status = 200;
      res.set_content(ReportToCsv(*out), "text/csv");
    } else {
      Reply(res, out);
    }
    Finish("/v1/reports", "GET", start, admission, res);
  });

  // Agent endpoints. The control plane checks who may call them (the
  // bootstrap token only registers; a node credential only touches its own
  // node) and audits refusals.
  add("POST", "/v1/agent/register", route("/v1/agent/register", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_ASSIGN_OR_RETURN(json body, ParseBody(req, limit));
    return cp.RegisterNode(p, body);
  }));
  add("POST", "/v1/agent/nodes/{node}/heartbeat", route("/v1/agent/nodes/{node}/heartbeat", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    json body = json::object();
    if (!req.body.empty()) {
      TIDAL_ASSIGN_OR_RETURN(body, ParseBody(req, limit));
    }
    return cp.Heartbeat(p, req.path_params[0], body);
  }));
  // With wait_ms, a long-poll (server/node_pods_watch.h): answered when the
  // node's pods differ from `version`, or after wait_ms; it holds no HTTP
  // thread meanwhile.
  async_handlers["GET /v1/agent/nodes/{node}/pods"] = async_route(
      "/v1/agent/nodes/{node}/pods", [=, this](const Req& req, const Principal& p, Admission&, const Finisher& finish) {
        int64_t wait_ms = 0;
        Status params = OnlyParams(req, {"version", "wait_ms"});
        if (params.ok()) params = ParamInt(req, "wait_ms", &wait_ms, 0, 60'000);
        const std::string version = req.param("version");
        if (params.ok() && version.size() > protocol::kMaxVersionLength) {
          params = InvalidArgument(fmt::format("version: longer than {} characters", protocol::kMaxVersionLength));
        }
        if (!params.ok()) return finish(params, 200);
        if (wait_ms == 0) return finish(Encoded(leader_->NodePods(p, req.path_params[0])), 200);
        leader_->WatchNodePods(p, req.path_params[0], version, std::chrono::milliseconds(wait_ms),
                          [finish](StatusOr<json> out) { finish(Encoded(out), 200); });
      });
  add("POST", "/v1/agent/nodes/{node}/pods/status", route("/v1/agent/nodes/{node}/pods/status", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_ASSIGN_OR_RETURN(json body, ParseBody(req, limit));
    return cp.PodStatus(p, req.path_params[0], body);
  }));
  add("POST", "/v1/agent/nodes/{node}/pods/logs", route("/v1/agent/nodes/{node}/pods/logs", [=, this](const Req& req, const Principal& p, ControlPlane& cp, int*) -> StatusOr<json> {
    TIDAL_ASSIGN_OR_RETURN(json body, ParseBody(req, limit));
    return cp.PodLogs(p, req.path_params[0], body);
  }));

  // The dashboard: every other GET outside /v1 is a file of the bundle. It
  // needs no token (it is the same for everyone); the data it shows comes
  // from /v1 with the token the user logs in with.
  // Every handler goes in at its table row's pattern; a row without a
  // handler, or a handler without a row, is a programming error the first
  // server start (and every test) catches.
  for (const ApiRoute& r : ApiRoutes()) {
    const std::string key = std::string(r.method) + " " + r.name;
    if (auto async = async_handlers.find(key); async != async_handlers.end()) {
      svr_->RouteAsync(r.method, r.name, std::move(async->second));
      async_handlers.erase(async);
      continue;
    }
    auto it = handlers.find(key);
    if (it == handlers.end()) {
      std::fprintf(stderr, "tidal: route %s %s has no handler\n", r.method, r.name);
      std::abort();
    }
    svr_->Route(r.method, r.name, std::move(it->second));
    handlers.erase(it);
  }
  if (!handlers.empty() || !async_handlers.empty()) {
    std::fprintf(stderr, "tidal: handler %s has no row in ApiRoutes()\n",
                 (handlers.empty() ? async_handlers.begin()->first : handlers.begin()->first).c_str());
    std::abort();
  }
  svr_->Fallback([this](const Req& req, Res& res) {
    if (req.method == "GET") return ServeStatic(req.path, res);
    res.status = 404;
    res.set_content(ErrorBody(NotFound(fmt::format("no route for {} {}", req.method, req.path))), "application/json");
  });
}

void HttpApi::ServeStatic(const std::string& path, HttpResponse& res) const {
  if (path == "/v1" || path.starts_with("/v1/")) {
    res.status = 404;
    res.set_content(ErrorBody(NotFound(fmt::format("no route for GET {}", path))), "application/json");
    return;
  }
  auto file = ResolveStaticFile(config_.web_dir, path);
  if (!file.ok()) {
    const bool index = path == "/" || path == "/index.html";
    if (index && file.status().code() == StatusCode::kNotFound) {
      // Never a crash or a bare 404 for a user who has not built web/ yet.
      res.status = 200;
      res.set_content(MissingBundlePage(config_.web_dir), "text/html; charset=utf-8");
      return;
    }
    res.status = HttpStatusFor(file.status().code());
    res.set_content(ErrorBody(file.status()), "application/json");
    return;
  }
  std::ifstream in(file->path, std::ios::binary);
  std::ostringstream body;
  body << in.rdbuf();
  if (!in) {
    res.status = 500;
    res.set_content(ErrorBody(Internal(fmt::format("path: cannot read {}", path))), "application/json");
    return;
  }
  // index.html names the bundle; a stale cached copy would pin an old one.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(body.str(), file->content_type);
}

}  // namespace tidal::server
