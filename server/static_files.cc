#include "server/static_files.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace tidal::server {

namespace fs = std::filesystem;

namespace {

bool IsRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// True when `inner` is `outer` or below it (both canonical).
bool IsUnder(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (*o == "" && std::next(o) == outer.end()) break;  // trailing slash
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

std::string ContentTypeFor(std::string_view path) {
  const size_t dot = path.rfind('.');
  const std::string_view ext = dot == std::string_view::npos ? std::string_view() : path.substr(dot);
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".txt") return "text/plain; charset=utf-8";
  if (ext == ".woff2") return "font/woff2";
  return "application/octet-stream";
}

StatusOr<StaticFile> ResolveStaticFile(const std::string& web_dir, std::string_view url_path) {
  if (web_dir.empty()) return NotFound("web_dir: no dashboard bundle configured");
  std::string rel(url_path);
  if (rel.find('\0') != std::string::npos || rel.find('\\') != std::string::npos) {
    return InvalidArgument("path: contains a NUL or a backslash");
  }
  // Split on '/' and refuse any "." or ".." segment outright: a request
  // that needs them is not one the dashboard makes.
  std::string clean;
  size_t start = 0;
  while (start <= rel.size()) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos) slash = rel.size();
    const std::string_view seg(rel.data() + start, slash - start);
    if (seg == "." || seg == "..") return InvalidArgument("path: '.' and '..' segments are not served");
    if (!seg.empty()) {
      if (!clean.empty()) clean += '/';
      clean += seg;
    }
    start = slash + 1;
  }
  if (clean.empty()) clean = "index.html";
  std::error_code ec;
  const fs::path root = fs::canonical(web_dir, ec);
  if (ec) return NotFound(fmt::format("web_dir: {} does not exist", web_dir));
  const fs::path candidate = root / clean;
  if (!IsRegularFile(candidate)) return NotFound(fmt::format("path: /{} is not in the bundle", clean));
  // A symlink inside the bundle must not lead out of it.
  const fs::path real = fs::canonical(candidate, ec);
  if (ec || !IsUnder(real, root)) return InvalidArgument("path: leads outside the bundle");
  return StaticFile{real.string(), ContentTypeFor(real.string())};
}

std::string DefaultWebDir(const std::string& executable_path) {
  if (executable_path.empty()) return "";
  const fs::path exe_dir = fs::path(executable_path).parent_path();
  for (fs::path p = exe_dir; !p.empty(); p = p.parent_path()) {
    if (IsRegularFile(p / "web" / "dist" / "index.html")) return (p / "web" / "dist").string();
    if (p == p.root_path()) break;
  }
  const fs::path installed = exe_dir / ".." / "share" / "tidal" / "web";
  if (IsRegularFile(installed / "index.html")) return installed.lexically_normal().string();
  return "";
}

std::string MissingBundlePage(const std::string& web_dir) {
  std::string dir;
  for (char c : web_dir) {
    if (c == '<') dir += "&lt;";
    else if (c == '>') dir += "&gt;";
    else if (c == '&') dir += "&amp;";
    else dir += c;
  }
  const std::string where =
      web_dir.empty() ? std::string("no bundle was found next to the tidal binary")
                      : fmt::format("there is no index.html in {}", dir);
  return fmt::format(
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>Tidal</title></head><body>"
      "<h1>Tidal dashboard not built</h1><p>The API is up (under <code>/v1</code>), but {}.</p>"
      "<p>Build the dashboard and restart the server:</p>"
      "<pre>cd web &amp;&amp; npm ci &amp;&amp; npm run build</pre>"
      "<p>or point the server at a built bundle with <code>tidal server --web-dir DIR</code> "
      "(or <code>web_dir:</code> in the server config).</p></body></html>\n",
      where);
}

}  // namespace tidal::server
