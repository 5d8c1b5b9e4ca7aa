// Where `tidal agent` keeps its tokens without leaving them where a
// pod could read them: the bootstrap token from a file only its owner can
// read (--token-file), or
// TIDAL_TOKEN, which is taken out of the process's environment at once
// (/proc/PID/environ shows the environment block the process started with,
// so the bytes are overwritten there, not just unset).
#ifndef TIDAL_AGENT_TOKEN_SOURCE_H_
#define TIDAL_AGENT_TOKEN_SOURCE_H_

#include <optional>
#include <string>

#include "core/common/status.h"

namespace tidal::agent {

// The token in `path`, trailing whitespace dropped. Refuses a file that is
// not a regular file, that its group or others may read or write (like
// ssh's private keys: mode 0600 or 0400), or that is empty.
StatusOr<std::string> ReadTokenFile(const std::string& path);

// Writes `token` to `path` (a temp file renamed over it), mode 0600 from
// the start, so it is never readable by others, even for a moment.
Status WriteTokenFile(const std::string& path, const std::string& token);

// The value of `name` in the environment, or nullopt; the variable is gone
// from the environment (getenv, children, /proc/self/environ) afterwards.
std::optional<std::string> TakeEnvToken(const char* name);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_TOKEN_SOURCE_H_
