// The dashboard's files: what `tidal server` serves at `/` and what it
// refuses (paths that try to leave the bundle, however they are spelled).
#include "server/static_files.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/agent_fixtures.h"
#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

namespace fs = std::filesystem;
using server::ResolveStaticFile;

// A bundle dir with index.html and assets/app.js, and a secret next to it
// that no request may reach.
fs::path MakeBundle(const std::string& name) {
  const fs::path dir = FreshTempDir("tidal_static", name);
  fs::create_directories(dir / "dist" / "assets");
  std::ofstream(dir / "dist" / "index.html") << "<!doctype html><title>Tidal</title>";
  std::ofstream(dir / "dist" / "assets" / "app.js") << "console.log('tidal');";
  std::ofstream(dir / "secret.txt") << "top secret";
  return dir;
}

// One request with the path sent exactly as given (an HTTP client library
// would normalize `..` away before it reached the server). Returns the
// status line's code and the body in `body`.
int RawGet(int port, const std::string& raw_path, std::string* body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return 0;
  }
  const std::string req = "GET " + raw_path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return 0;
  }
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t sp = reply.find(' ');
  if (sp == std::string::npos) return 0;
  const size_t head_end = reply.find("\r\n\r\n");
  if (body) *body = head_end == std::string::npos ? "" : reply.substr(head_end + 4);
  return std::stoi(reply.substr(sp + 1, 3));
}

TEST(StaticFiles, RootIsIndexAndTypesFollowTheExtension) {
  const fs::path dir = MakeBundle("root");
  auto index = ResolveStaticFile((dir / "dist").string(), "/");
  ASSERT_TRUE(index.ok()) << index.status().message();
  EXPECT_EQ(fs::path(index->path).filename(), "index.html");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  auto js = ResolveStaticFile((dir / "dist").string(), "/assets/app.js");
  ASSERT_TRUE(js.ok()) << js.status().message();
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(server::ContentTypeFor("a/b.css"), "text/css; charset=utf-8");
  EXPECT_EQ(server::ContentTypeFor("noext"), "application/octet-stream");
  fs::remove_all(dir);
}

TEST(StaticFiles, RefusesEveryWayOut) {
  const fs::path dir = MakeBundle("refuse");
  const std::string web = (dir / "dist").string();
  for (const char* p : {"/../secret.txt", "/assets/../../secret.txt", "/..", "/./index.html",
                        "/assets\\..\\..\\secret.txt"}) {
    auto r = ResolveStaticFile(web, p);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << p;
  }
  // A symlink inside the bundle that points out of it.
  fs::create_symlink(dir / "secret.txt", dir / "dist" / "leak.txt");
  EXPECT_EQ(ResolveStaticFile(web, "/leak.txt").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveStaticFile(web, "/nope.js").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ResolveStaticFile("", "/").status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(StaticFiles, DefaultWebDirIsTheSourceTreeAboveTheBinary) {
  const fs::path dir = MakeBundle("default");
  fs::rename(dir / "dist", dir / "web-dist-tmp");
  fs::create_directories(dir / "web");
  fs::rename(dir / "web-dist-tmp", dir / "web" / "dist");
  fs::create_directories(dir / "build" / "dev");
  EXPECT_EQ(server::DefaultWebDir((dir / "build" / "dev" / "tidal").string()), (dir / "web" / "dist").string());
  fs::remove_all(dir / "web");
  EXPECT_EQ(server::DefaultWebDir((dir / "build" / "dev" / "tidal").string()), "");
  fs::remove_all(dir);
}

TEST(StaticFiles, ServerServesTheBundleAndRefusesHostilePaths) {
  const fs::path dir = MakeBundle("server");
  ServerProcess s(DefaultServerConfig("web_dir: " + (dir / "dist").string() + "\n"));
  ASSERT_TRUE(s.running());
  std::string body;
  EXPECT_EQ(RawGet(s.port(), "/", &body), 200);
  EXPECT_EQ(body, "<!doctype html><title>Tidal</title>");
  EXPECT_EQ(RawGet(s.port(), "/assets/app.js", &body), 200);
  EXPECT_EQ(body, "console.log('tidal');");
  // However `..` is spelled, nothing outside dist/ comes back.
  for (const char* p : {"/../secret.txt", "/../../etc/passwd", "/%2e%2e/secret.txt", "/%2E%2E/%2E%2E/etc/passwd",
                        "/assets/%2e%2e/%2e%2e/secret.txt", "/..%2fsecret.txt", "/assets%5c..%5c..%5csecret.txt"}) {
    const int code = RawGet(s.port(), p, &body);
    EXPECT_TRUE(code == 400 || code == 404) << p << " got " << code << ": " << body;
    EXPECT_EQ(body.find("top secret"), std::string::npos) << p;
    EXPECT_EQ(body.find("root:"), std::string::npos) << p;
  }
  // The API keeps its JSON 404 for unknown /v1 routes.
  EXPECT_EQ(RawGet(s.port(), "/v1/nope", &body), 404);
  EXPECT_NE(body.find("\"not_found\""), std::string::npos) << body;
  fs::remove_all(dir);
}

TEST(StaticFiles, WithoutABundleRootSaysHowToBuildIt) {
  const fs::path dir = MakeBundle("missing");
  fs::remove_all(dir / "dist");
  ServerProcess s(DefaultServerConfig("web_dir: " + (dir / "dist").string() + "\n"));
  ASSERT_TRUE(s.running());
  std::string body;
  EXPECT_EQ(RawGet(s.port(), "/", &body), 200);
  EXPECT_NE(body.find("npm run build"), std::string::npos) << body;
  EXPECT_EQ(s.Get("/healthz", "").status, 200);  // still serving
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tidal::testing
