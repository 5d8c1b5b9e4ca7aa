#include "server/tls_files.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/core.h>

namespace tidal::server {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// OpenSSL's reason for the last failure, e.g. "no start line" for a file
// that is not PEM.
std::string OpenSslReason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "not PEM";
  const char* reason = ERR_reason_error_string(e);
  return reason ? reason : "not PEM";
}

StatusOr<std::unique_ptr<FILE, FileCloser>> Open(const char* field, const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "r"));
  if (!f) return InvalidArgument(fmt::format("{}: cannot read '{}': {}", field, path, std::strerror(errno)));
  return f;
}

}  // namespace

Status CheckTlsFiles(const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgument(cert_file.empty() ? "tls_cert_file: required with tls_key_file"
                                             : "tls_key_file: required with tls_cert_file");
  }
  if (cert_file.empty()) return Status::Ok();
  ERR_clear_error();
  TIDAL_ASSIGN_OR_RETURN(auto cert_in, Open("tls_cert_file", cert_file));
  std::unique_ptr<X509, X509Free> cert(PEM_read_X509(cert_in.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return InvalidArgument(fmt::format("tls_cert_file: '{}' holds no PEM certificate ({})", cert_file,
                                       OpenSslReason()));
  }
  TIDAL_ASSIGN_OR_RETURN(auto key_in, Open("tls_key_file", key_file));
  // No passphrase callback: an encrypted key cannot be used unattended.
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_PrivateKey(key_in.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!key) {
    return InvalidArgument(fmt::format("tls_key_file: '{}' holds no unencrypted PEM private key ({})",
                                       key_file, OpenSslReason()));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument(fmt::format("tls_key_file: '{}' is not the key of the certificate in '{}'",
                                       key_file, cert_file));
  }
  return Status::Ok();
}

}  // namespace tidal::server
