#include "agent/stop_signals.h"

#include <signal.h>

namespace tidal::agent {
namespace {

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop = true; }

}  // namespace

const std::atomic<bool>& InstallStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return g_stop;
}

}  // namespace tidal::agent
