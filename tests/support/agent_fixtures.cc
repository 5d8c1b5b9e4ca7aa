#include "tests/support/agent_fixtures.h"

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>

namespace tidal::testing {

std::filesystem::path FreshTempDir(const std::string& prefix, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              (prefix + "_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

std::vector<ProcessInfo> LiveProcesses() {
  std::vector<ProcessInfo> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const std::string stat = ReadWholeFile(entry.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    ProcessInfo p;
    p.pid = std::stoi(name);
    std::istringstream args(ReadWholeFile(entry.path() / "cmdline"));
    for (std::string arg; std::getline(args, arg, '\0');) p.argv.push_back(arg);
    p.cwd = std::filesystem::read_symlink(entry.path() / "cwd", ec).string();
    found.push_back(std::move(p));
  }
  return found;
}

}  // namespace tidal::testing
