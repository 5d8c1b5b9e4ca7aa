// Serving the web dashboard's bundle (web/dist, built by `npm run build` in
// web/) from `tidal server` at `/`. Paths are resolved lexically under the
// bundle's folder and then checked against its real path, so neither `..`,
// an encoded `%2e%2e`, a backslash nor a symlink leads outside it.
#ifndef TIDAL_SERVER_STATIC_FILES_H_
#define TIDAL_SERVER_STATIC_FILES_H_

#include <string>
#include <string_view>

#include "core/common/status.h"

namespace tidal::server {

struct StaticFile {
  std::string path;          // the file on disk
  std::string content_type;  // e.g. "text/html; charset=utf-8"
};

// The file that answers the (already percent-decoded) URL path `url_path`
// under `web_dir`: "/" and "" are index.html. InvalidArgument for a path
// that tries to leave `web_dir` (a `..` segment, a backslash, a NUL, a
// symlink out), NotFound when there is no such regular file.
StatusOr<StaticFile> ResolveStaticFile(const std::string& web_dir, std::string_view url_path);

// Content type by file extension; application/octet-stream when unknown.
std::string ContentTypeFor(std::string_view path);

// Where the bundle is when neither --web-dir nor the config's web_dir says:
// the first of <ancestor>/web/dist (an ancestor of the executable's folder,
// i.e. the source tree `build/...` lives in) and <exe dir>/../share/tidal/web
// that has an index.html; "" when none does.
std::string DefaultWebDir(const std::string& executable_path);

// The page `/` answers when there is no bundle: how to build it.
std::string MissingBundlePage(const std::string& web_dir);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_STATIC_FILES_H_
