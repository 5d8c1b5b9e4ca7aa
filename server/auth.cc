#include "server/auth.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

namespace tidal::server {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kUser: return "user";
    case Role::kAdmin: return "admin";
    case Role::kAgent: return "agent";
    case Role::kNode: return "node";
  }
  return "unknown";
}

StatusOr<Role> ParseRole(std::string_view name) {
  if (name == "user") return Role::kUser;
  if (name == "admin") return Role::kAdmin;
  if (name == "agent") return Role::kAgent;
  return InvalidArgument(fmt::format("role: expected user, admin or agent, got \"{}\"", name));
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(length * 2, '0');
  for (unsigned int i = 0; i < length; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return hex;
}

std::string NewNodeCredential() {
  unsigned char bytes[32];
  // Without randomness there is no safe credential to hand out; the OS
  // CSPRNG failing is not an input error a caller could fix.
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::abort();
  std::string hex;
  hex.reserve(2 * sizeof(bytes));
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

Status Authenticator::AddToken(const std::string& sha256_hex, Principal principal) {
  std::string digest = sha256_hex;
  std::transform(digest.begin(), digest.end(), digest.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (digest.size() != 64 ||
      !std::all_of(digest.begin(), digest.end(), [](unsigned char c) { return std::isxdigit(c); })) {
    return InvalidArgument(fmt::format("tokens[{}].sha256: expected 64 hex digits", principal.name));
  }
  if (principal.role == Role::kUser && principal.tenant.empty()) {
    return InvalidArgument(fmt::format("tokens[{}].tenant: a user token needs a tenant", principal.name));
  }
  if (!by_digest_.emplace(digest, std::move(principal)).second) {
    return AlreadyExists("tokens: the same token is declared twice");
  }
  return Status::Ok();
}

StatusOr<std::string> BearerTokenDigest(std::string_view header) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.empty()) return Unauthenticated("missing Authorization: Bearer <token> header");
  if (header.substr(0, kPrefix.size()) != kPrefix || header.size() == kPrefix.size()) {
    return Unauthenticated("Authorization header: expected \"Bearer <token>\"");
  }
  return Sha256Hex(header.substr(kPrefix.size()));
}

StatusOr<Principal> Authenticator::Authenticate(const std::string& token_sha256_hex) const {
  auto it = by_digest_.find(token_sha256_hex);
  if (it == by_digest_.end()) return Unauthenticated("unknown token");
  return it->second;
}

Status CheckTenantAccess(const Principal& p, std::string_view tenant) {
  if (p.role == Role::kAdmin) return Status::Ok();
  if (p.role == Role::kUser && p.tenant == tenant) return Status::Ok();
  return PermissionDenied(fmt::format("{} \"{}\" may not access tenant \"{}\"", RoleName(p.role),
                                      p.name, tenant));
}

Status CheckNodeAccess(const Principal& p, std::string_view node) {
  if (p.role == Role::kAdmin) return Status::Ok();
  if (p.role == Role::kNode && p.node == node) return Status::Ok();
  if (p.role == Role::kAgent) {
    return PermissionDenied(fmt::format(
        "agent token \"{}\" is a bootstrap token: it may only register; use the node credential "
        "the registration returned", p.name));
  }
  return PermissionDenied(fmt::format("{} \"{}\" may not access node \"{}\"", RoleName(p.role), p.name, node));
}

Status RequireRole(const Principal& p, std::initializer_list<Role> roles) {
  for (Role r : roles) {
    if (p.role == r) return Status::Ok();
  }
  std::string allowed;
  for (Role r : roles) allowed += (allowed.empty() ? "" : "/") + std::string(RoleName(r));
  return PermissionDenied(fmt::format("role {} may not call this endpoint (needs {})",
                                      RoleName(p.role), allowed));
}

}  // namespace tidal::server
