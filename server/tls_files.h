// The server's TLS certificate and key (server config tls_cert_file /
// tls_key_file): checked before the server binds, so that a typo or a key
// from another certificate stops it with a message naming the file instead
// of a listener that fails every handshake.
#ifndef TIDAL_SERVER_TLS_FILES_H_
#define TIDAL_SERVER_TLS_FILES_H_

#include <string>

#include "core/common/status.h"

namespace tidal::server {

// Ok when `cert_file` holds a PEM certificate, `key_file` a PEM private key,
// and the key is the certificate's. Errors name the config field and file.
Status CheckTlsFiles(const std::string& cert_file, const std::string& key_file);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_TLS_FILES_H_
