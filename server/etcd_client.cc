#include "server/etcd_client.h"

#include <httplib.h>

#include <array>

#include <fmt/format.h>

namespace tidal::server {

using nlohmann::json;

namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kBase64[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    for (int s : {18, 12, 6}) out += kBase64[(v >> s) & 63];
    out += '=';
  }
  return out;
}

StatusOr<std::string> Unbase64(std::string_view in) {
  static const auto kTable = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[uint8_t(kBase64[i])] = int8_t(i);
    return t;
  }();
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int8_t v = kTable[uint8_t(c)];
    if (v < 0) return Internal("etcd: a reply carries bytes that are not base64");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// The gateway writes int64 fields as strings, and leaves out zeros.
int64_t Int(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_string()) return std::strtoll(it->get<std::string>().c_str(), nullptr, 10);
  if (it->is_number_integer()) return it->get<int64_t>();
  return 0;
}

StatusOr<std::vector<EtcdKeyValue>> Kvs(const json& j) {
  std::vector<EtcdKeyValue> out;
  auto it = j.find("kvs");
  if (it == j.end()) return out;
  if (!it->is_array()) return Internal("etcd: a range reply's kvs is not a list");
  for (const json& kv : *it) {
    EtcdKeyValue e;
    TIDAL_ASSIGN_OR_RETURN(e.key, Unbase64(kv.value("key", "")));
    TIDAL_ASSIGN_OR_RETURN(e.value, Unbase64(kv.value("value", "")));
    e.create_revision = Int(kv, "create_revision");
    e.mod_revision = Int(kv, "mod_revision");
    e.lease = Int(kv, "lease");
    out.push_back(std::move(e));
  }
  return out;
}

json OpJson(const EtcdOp& op) {
  switch (op.kind) {
    case EtcdOp::Kind::kPut: {
      json put = {{"key", Base64(op.key)}, {"value", Base64(op.value)}};
      if (op.lease != 0) put["lease"] = std::to_string(op.lease);
      return {{"request_put", put}};
    }
    case EtcdOp::Kind::kDeleteRange: {
      json del = {{"key", Base64(op.key)}};
      if (!op.range_end.empty()) del["range_end"] = Base64(op.range_end);
      return {{"request_delete_range", del}};
    }
    case EtcdOp::Kind::kRange: {
      json range = {{"key", Base64(op.key)}};
      if (!op.range_end.empty()) range["range_end"] = Base64(op.range_end);
      return {{"request_range", range}};
    }
  }
  return json::object();
}

}  // namespace

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xFF) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

struct EtcdClient::Conn {
  explicit Conn(const std::string& url) : client(url) {}
  httplib::Client client;
};

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

EtcdClient::~EtcdClient() = default;

StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(std::vector<std::string> endpoints,
                                                         std::chrono::milliseconds timeout) {
  if (endpoints.empty()) return InvalidArgument("etcd: no endpoints");
  for (const std::string& e : endpoints) {
    if (!e.starts_with("http://")) {
      return InvalidArgument(fmt::format("etcd endpoint '{}': expected http://HOST:PORT", e));
    }
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(endpoints), timeout));
}

StatusOr<json> EtcdClient::Call(const char* path, const json& body) {
  std::lock_guard lock(mu_);
  const std::string text = body.dump();
  std::string failures;
  for (size_t tried = 0; tried < endpoints_.size(); ++tried) {
    if (!conn_) {
      conn_ = std::make_unique<Conn>(endpoints_[current_]);
      const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(timeout_).count();
      conn_->client.set_connection_timeout(0, usec);
      conn_->client.set_read_timeout(0, usec);
      conn_->client.set_write_timeout(0, usec);
      conn_->client.set_keep_alive(true);
      conn_->client.set_tcp_nodelay(true);
    }
    auto res = conn_->client.Post(path, text, "application/json");
    std::string failure;
    if (!res) {
      failure = httplib::to_string(res.error());
    } else {
      json reply = json::parse(res->body, nullptr, false);
      if (res->status == 200 && reply.is_object()) return reply;
      const std::string message =
          reply.is_object() ? reply.value("message", res->body) : res->body.substr(0, 200);
      const int64_t code = reply.is_object() ? Int(reply, "code") : 0;
      // gRPC Unavailable (14) or DeadlineExceeded (4): this member has no
      // quorum or is overloaded; another may answer. Anything else is the
      // request's own fault and the same everywhere.
      if (res->status < 500 && code != 14 && code != 4) {
        if (code == 5) return NotFound(fmt::format("etcd {}: {}", path, message));
        return Internal(fmt::format("etcd {}: {} (HTTP {})", path, message, res->status));
      }
      failure = fmt::format("{} (HTTP {})", message, res->status);
    }
    failures += fmt::format("{}{}: {}", failures.empty() ? "" : "; ", endpoints_[current_], failure);
    conn_.reset();
    current_ = (current_ + 1) % endpoints_.size();
  }
  return Unavailable(fmt::format("etcd: no member answered {} ({})", path, failures));
}

StatusOr<EtcdRange> EtcdClient::Range(const std::string& key, const std::string& range_end, int64_t limit) {
  json body = {{"key", Base64(key)}};
  if (!range_end.empty()) body["range_end"] = Base64(range_end);
  if (limit > 0) body["limit"] = std::to_string(limit);
  TIDAL_ASSIGN_OR_RETURN(json reply, Call("/v3/kv/range", body));
  EtcdRange out;
  TIDAL_ASSIGN_OR_RETURN(out.kvs, Kvs(reply));
  out.more = reply.value("more", false);
  if (auto h = reply.find("header"); h != reply.end()) out.revision = Int(*h, "revision");
  return out;
}

StatusOr<EtcdTxnResult> EtcdClient::Txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                                        const std::vector<EtcdOp>& failure) {
  json body = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const EtcdCompare& c : compares) {
    body["compare"].push_back({{"key", Base64(c.key)},
                               {"target", "CREATE"},
                               {"result", "EQUAL"},
                               {"create_revision", std::to_string(c.create_revision)}});
  }
  for (const EtcdOp& op : success) body["success"].push_back(OpJson(op));
  for (const EtcdOp& op : failure) body["failure"].push_back(OpJson(op));
  TIDAL_ASSIGN_OR_RETURN(json reply, Call("/v3/kv/txn", body));
  EtcdTxnResult out;
  out.succeeded = reply.value("succeeded", false);
  if (auto h = reply.find("header"); h != reply.end()) out.revision = Int(*h, "revision");
  if (auto responses = reply.find("responses"); responses != reply.end() && responses->is_array()) {
    for (const json& r : *responses) {
      if (auto range = r.find("response_range"); range != r.end()) {
        TIDAL_ASSIGN_OR_RETURN(auto kvs, Kvs(*range));
        out.ranges.push_back(std::move(kvs));
      }
    }
  }
  return out;
}

StatusOr<int64_t> EtcdClient::LeaseGrant(std::chrono::seconds ttl) {
  TIDAL_ASSIGN_OR_RETURN(json reply, Call("/v3/lease/grant", {{"TTL", std::to_string(ttl.count())}}));
  const int64_t id = Int(reply, "ID");
  if (id == 0) return Internal(fmt::format("etcd: lease grant: {}", reply.value("error", "no lease ID")));
  return id;
}

StatusOr<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease) {
  TIDAL_ASSIGN_OR_RETURN(json reply, Call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}));
  // A stream of one result; a lease that is gone comes back without a TTL.
  auto result = reply.find("result");
  if (result == reply.end() || !result->is_object()) return int64_t{0};
  return std::max<int64_t>(0, Int(*result, "TTL"));
}

Status EtcdClient::LeaseRevoke(int64_t lease) {
  auto reply = Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
  if (!reply.ok() && reply.status().code() != StatusCode::kNotFound) return reply.status();
  return Status::Ok();
}

Status EtcdClient::Compact(int64_t revision) {
  auto reply = Call("/v3/kv/compaction", {{"revision", std::to_string(revision)}});
  // Compacting to a revision already compacted is not an error worth
  // stopping for: the history is short either way.
  if (!reply.ok() && reply.status().message().find("compacted") == std::string::npos) return reply.status();
  return Status::Ok();
}

}  // namespace tidal::server
