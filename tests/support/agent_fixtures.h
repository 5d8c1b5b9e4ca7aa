// Helpers shared by the agent tests (tests/agent): a fresh temp dir per test,
// whole-file reads, and polling a condition with a deadline (processes run
// asynchronously, so tests wait for what they check).
#ifndef TIDAL_TESTS_SUPPORT_AGENT_FIXTURES_H_
#define TIDAL_TESTS_SUPPORT_AGENT_FIXTURES_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tidal::testing {

// TMPDIR/<prefix>_<name>_<pid>, emptied and created.
std::filesystem::path FreshTempDir(const std::string& prefix, const std::string& name);
// The file's contents; "" when it cannot be read.
std::string ReadWholeFile(const std::filesystem::path& path);
// Polls `cond` every 10 ms until it holds or `timeout` passes; returns it.
bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout);

struct ProcessInfo {
  int pid = 0;
  std::vector<std::string> argv;
  std::string cwd;  // "" when not readable
};
// Every process in /proc that is not a zombie (tests check that what they
// started is gone, or was not started twice).
std::vector<ProcessInfo> LiveProcesses();

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_AGENT_FIXTURES_H_
