// A client of etcd's v3 API through its JSON gateway (POST /v3/kv/range,
// /v3/kv/txn, /v3/lease/...), over the HTTP client the agent and CLI
// already link. Why the gateway and not gRPC: docs/ARCHITECTURE.md
// ("Replicated store").
//
// Only what the etcd store and the leader election use: ranges, fenced
// transactions, leases and compaction. Keys and values are bytes (the
// gateway carries them base64-encoded); revisions are int64.
//
// A call goes to the member that answered last; a member that does not
// answer, or answers with a server error (it lost quorum, it is stopping),
// is skipped for the next, each member at most once per call. So losing
// one member of three costs one failed connection, not an error.
//
// Thread-safe: calls are serialized on one connection per client; a part
// that must not wait behind another (the lease keep-alive behind a large
// write) has a client of its own.
#ifndef TIDAL_SERVER_ETCD_CLIENT_H_
#define TIDAL_SERVER_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"

namespace tidal::server {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  bool more = false;      // the limit cut the range short
  int64_t revision = 0;   // the store's revision the range was read at
};

// One comparison of a transaction. Only the kinds the store uses: a key's
// create revision (0 = the key does not exist).
struct EtcdCompare {
  std::string key;
  int64_t create_revision = 0;
};

struct EtcdOp {
  enum class Kind { kPut, kDeleteRange, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  std::string range_end;  // kDeleteRange, kRange: "" = just `key`
  int64_t lease = 0;      // kPut: 0 = none
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0) {
    return {Kind::kPut, std::move(key), std::move(value), "", lease};
  }
  static EtcdOp DeleteRange(std::string key, std::string range_end) {
    return {Kind::kDeleteRange, std::move(key), "", std::move(range_end), 0};
  }
  static EtcdOp Get(std::string key) { return {Kind::kRange, std::move(key), "", "", 0}; }
};

struct EtcdTxnResult {
  bool succeeded = false;
  int64_t revision = 0;  // the revision after the transaction
  // One per kRange op of the branch that ran, in order.
  std::vector<std::vector<EtcdKeyValue>> ranges;
};

class EtcdClient {
 public:
  // `endpoints`: "http://host:port", at least one. `timeout` bounds each
  // request to one member.
  static StatusOr<std::unique_ptr<EtcdClient>> Create(std::vector<std::string> endpoints,
                                                      std::chrono::milliseconds timeout);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Keys in [key, range_end) ("" = just `key`), in key order; `limit` 0 =
  // all. Linearizable.
  StatusOr<EtcdRange> Range(const std::string& key, const std::string& range_end, int64_t limit = 0);
  // If every comparison holds, runs `success`, else `failure`.
  StatusOr<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                              const std::vector<EtcdOp>& failure);
  StatusOr<int64_t> LeaseGrant(std::chrono::seconds ttl);
  // The lease's remaining TTL in seconds; 0 when it is gone (expired or
  // revoked): whatever it held is deleted.
  StatusOr<int64_t> LeaseKeepAlive(int64_t lease);
  Status LeaseRevoke(int64_t lease);
  // Drops the history before `revision` (values still current stay).
  Status Compact(int64_t revision);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  struct Conn;
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout);
  StatusOr<nlohmann::json> Call(const char* path, const nlohmann::json& body);

  const std::vector<std::string> endpoints_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  size_t current_ = 0;  // the member that answered last
  std::unique_ptr<Conn> conn_;
};

// The key just past every key that starts with `prefix` (etcd's range end
// for a prefix).
std::string PrefixEnd(std::string_view prefix);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_ETCD_CLIENT_H_
