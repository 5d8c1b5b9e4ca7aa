#include "sim/report_bundle.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace tidal::sim {
namespace {
namespace fs = std::filesystem;

bool IsRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}
}  // namespace

std::string FindReportBundle(const std::string& web_dir, const std::string& executable_path) {
  if (!web_dir.empty()) {
    const fs::path p = fs::path(web_dir) / "report.js";
    return IsRegularFile(p) ? p.string() : "";
  }
  if (executable_path.empty()) return "";
  const fs::path exe_dir = fs::path(executable_path).parent_path();
  for (fs::path p = exe_dir; !p.empty(); p = p.parent_path()) {
    if (IsRegularFile(p / "web" / "dist" / "report.js")) return (p / "web" / "dist" / "report.js").string();
    if (p == p.root_path()) break;
  }
  const fs::path installed = exe_dir / ".." / "share" / "tidal" / "web" / "report.js";
  if (IsRegularFile(installed)) return installed.lexically_normal().string();
  return "";
}

StatusOr<std::string> LoadReportBundle(const std::string& web_dir, const std::string& executable_path,
                                       std::string* note) {
  const std::string path = FindReportBundle(web_dir, executable_path);
  if (path.empty()) {
    if (!web_dir.empty())
      return InvalidArgument(fmt::format("--web-dir {}: no report.js there (build it: cd web && npm ci && "
                                         "npm run build)",
                                         web_dir));
    if (note != nullptr)
      *note = "note: no web/dist/report.js next to the tidal binary (cd web && npm ci && npm run build); "
              "the HTML reports have the plain SVG charts";
    return std::string();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable(fmt::format("{}: cannot read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) return Unavailable(fmt::format("{}: empty", path));
  return ss.str();
}

}  // namespace tidal::sim
