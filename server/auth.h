// Bearer-token authentication and role/tenant authorization. Tokens are known
// only by their SHA-256 digest: the config file lists digests (or plain tokens
// that are hashed at load and dropped), so neither memory nor disk holds a
// usable secret.
#ifndef TIDAL_SERVER_AUTH_H_
#define TIDAL_SERVER_AUTH_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/status.h"

namespace tidal::server {

// kAgent: a configured agent token, which is a *bootstrap* token: it may
// only register a node (docs/api.md). kNode: the credential the server
// issued to one node at registration; it may touch only that node's
// objects. Node credentials are not in the config file (ParseRole refuses
// "node"): the control plane issues and stores them.
enum class Role { kUser, kAdmin, kAgent, kNode };
std::string_view RoleName(Role role);
StatusOr<Role> ParseRole(std::string_view name);

struct Principal {
  std::string name;    // who, for the audit log
  Role role = Role::kUser;
  std::string tenant;  // users only
  std::string node;    // node credentials only: the node it was issued to
};

// A fresh node credential: 256 random bits from the OS's CSPRNG, hex.
std::string NewNodeCredential();

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// The digest of the token in an "Authorization: Bearer <token>" value;
// Unauthenticated when the value is missing or malformed. Tokens are known
// only by digest, and a request's is computed once.
StatusOr<std::string> BearerTokenDigest(std::string_view authorization_header);

class Authenticator {
 public:
  // `sha256_hex` is the digest of the token; duplicates are an error.
  Status AddToken(const std::string& sha256_hex, Principal principal);

  // By the token's digest (BearerTokenDigest of the request's
  // Authorization header); Unauthenticated when unknown.
  StatusOr<Principal> Authenticate(const std::string& token_sha256_hex) const;

  bool empty() const { return by_digest_.empty(); }

 private:
  std::map<std::string, Principal> by_digest_;
};

// Role and tenant checks shared by every endpoint.
// A user may touch only objects of its own tenant; admins any; agents none.
Status CheckTenantAccess(const Principal& p, std::string_view tenant);
// Node endpoints: admins any node; a node credential only its own node.
Status CheckNodeAccess(const Principal& p, std::string_view node);
Status RequireRole(const Principal& p, std::initializer_list<Role> roles);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_AUTH_H_
