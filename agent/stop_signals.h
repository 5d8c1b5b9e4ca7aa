// SIGINT/SIGTERM as a flag for a long-running command's loop (`tidal agent`,
// `tidal up`): the handler only sets it; the loop stops and cleans up.
#ifndef TIDAL_AGENT_STOP_SIGNALS_H_
#define TIDAL_AGENT_STOP_SIGNALS_H_

#include <atomic>

namespace tidal::agent {

// Installs the handlers (and ignores SIGPIPE: a peer that closed a socket
// is an error return, not a death); returns the flag they set.
const std::atomic<bool>& InstallStopSignals();

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_STOP_SIGNALS_H_
