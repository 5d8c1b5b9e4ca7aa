// How a client finds the leader of a replicated control plane (issue #13,
// docs/operations.md "High availability").
//
// Only the leader of several `tidal server` replicas serves the API. Every
// other replica answers each /v1 request with HTTP 503 and a NotLeaderReply:
// the error code "not_leader" and, when it knows one, the leader's URL (also
// in the `Tidal-Leader` header). Agents and the CLI take a list of server
// URLs (`--server http://a:8080,http://b:8080`): they go to the hinted
// leader, else try the next URL of their list.
#ifndef TIDAL_PROTOCOL_LEADER_REDIRECT_H_
#define TIDAL_PROTOCOL_LEADER_REDIRECT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"

namespace tidal::protocol {

inline constexpr const char* kLeaderHeader = "Tidal-Leader";
// Reads from followers. A client that accepts a read that may be a little
// stale sends `Tidal-Consistency: stale`; a follower then answers the reads
// of committed state from its copy of the store (the others still go to
// the leader), saying so in `Tidal-Replica: follower` and how old its copy
// may be in `Tidal-Stale-Ms`. Without the header, every replica but the
// leader answers not_leader, so a client reads its own writes.
inline constexpr const char* kConsistencyHeader = "Tidal-Consistency";
inline constexpr const char* kConsistencyStale = "stale";
inline constexpr const char* kReplicaHeader = "Tidal-Replica";
inline constexpr const char* kStaleMsHeader = "Tidal-Stale-Ms";
inline constexpr const char* kNotLeaderCode = "not_leader";
// More replicas than this in one --server list is a typo or an attack.
inline constexpr size_t kMaxServerUrls = 16;

struct NotLeaderReply {
  std::string message;     // for people: which replica this is, who leads
  std::string leader_url;  // "" while no replica leads (an election)
  bool operator==(const NotLeaderReply&) const = default;
};

nlohmann::json NotLeaderReplyToJson(const NotLeaderReply& reply);
// nullopt when `j` is some other reply (any other error, or a success): a
// client then handles it as it would without HA. A leader URL that is not
// http(s):// is dropped, so a confused replica cannot send clients anywhere
// else.
std::optional<NotLeaderReply> NotLeaderReplyFromJson(const nlohmann::json& j);

// "http://a:8080,http://b:8080" -> its URLs, in order, each http:// or
// https:// with a host, trailing '/' removed, duplicates dropped. `flag`
// names the option in errors.
StatusOr<std::vector<std::string>> ParseServerList(std::string_view list, std::string_view flag);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_LEADER_REDIRECT_H_
