// `tidal server`: the control plane (docs/operations.md).
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "cli/command_registry.h"
#include "server/control_plane.h"
#include "server/http_api.h"
#include "server/server_config.h"
#include "server/static_files.h"
#include "server/store.h"
#include "server/tls_files.h"
#include "server/system_clock.h"

namespace tidal::cli {
namespace {

struct ServerFlags {
  std::string config;
  std::string store;
  std::string listen;
  std::string web_dir;
  std::string tls_cert_file;
  std::string tls_key_file;
};

int RunServer(const ServerFlags& flags) {
  auto config = server::LoadServerConfig(flags.config);
  if (!config.ok()) {
    std::cerr << "tidal server: " << config.status().message() << "\n";
    return 2;
  }
  if (!flags.store.empty()) config->store = flags.store;
  if (!flags.listen.empty()) config->listen = flags.listen;
  if (!flags.web_dir.empty()) config->web_dir = flags.web_dir;
  if (!flags.tls_cert_file.empty()) config->tls_cert_file = flags.tls_cert_file;
  if (!flags.tls_key_file.empty()) config->tls_key_file = flags.tls_key_file;
  if (Status tls = server::CheckTlsFiles(config->tls_cert_file, config->tls_key_file); !tls.ok()) {
    std::cerr << "tidal server: " << tls.message() << "\n";
    return 2;
  }
  if (config->web_dir.empty()) {
    std::error_code ec;
    config->web_dir = server::DefaultWebDir(std::filesystem::read_symlink("/proc/self/exe", ec).string());
  }
  auto listen = server::ParseListen(config->listen);
  if (!listen.ok()) {
    std::cerr << "tidal server: " << listen.status().message() << "\n";
    return 2;
  }
  if (config->auth.empty()) {
    std::cerr << "tidal server: warning: no tokens configured; every /v1 request will get 401\n";
  }
  // Signals go to one thread that stops the server; block them everywhere
  // else before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto store = server::OpenStore(config->store);
  if (!store.ok()) {
    std::cerr << "tidal server: " << store.status().message() << "\n";
    return 2;
  }
  server::SystemClock clock;
  const server::ServerConfig cfg = *config;
  server::ControlPlane cp(std::move(config).value(), std::move(store).value(), clock);
  if (Status s = cp.Recover(); !s.ok()) {
    std::cerr << "tidal server: recovery failed: " << s.message() << "\n";
    return 1;
  }
  server::HttpApi api(cp, cp.config().auth, cp.config());
  auto port = api.Bind(listen->first, listen->second);
  if (!port.ok()) {
    std::cerr << "tidal server: " << port.status().message() << "\n";
    return 1;
  }
  cp.StartLoop();
  const char* scheme = cfg.tls_cert_file.empty() ? "http" : "https";
  std::printf("tidal server listening on %s://%s:%d (store %s)\n", scheme, listen->first.c_str(), *port,
              cfg.store.c_str());
  std::printf("tidal server: dashboard at %s://%s:%d/ (%s)\n", scheme, listen->first.c_str(), *port,
              cfg.web_dir.empty() ? "not built: cd web && npm ci && npm run build" : cfg.web_dir.c_str());
  std::fflush(stdout);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    api.Stop();
  });
  api.Serve();
  cp.StopLoop();
  // Wake the stopper if Serve() ended on its own.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  return 0;
}

RegisterCommand reg([](CLI::App& root) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = root.add_subcommand("server", "Run the control plane (HTTP API under /v1)");
  cmd->add_option("--config", flags->config, "Server config file (YAML); default: embedded example cluster");
  cmd->add_option("--store", flags->store, "Store URL, sqlite:PATH (default sqlite:tidal.db)");
  cmd->add_option("--listen", flags->listen, "HOST:PORT to listen on (port 0 = any free port)");
  cmd->add_option("--web-dir", flags->web_dir,
                  "The dashboard bundle to serve at / (default: web/dist of the source tree the "
                  "binary was built in, or ../share/tidal/web next to it)");
  cmd->add_option("--tls-cert", flags->tls_cert_file,
                  "PEM certificate: serve HTTPS only (overrides tls_cert_file; needs --tls-key)");
  cmd->add_option("--tls-key", flags->tls_key_file,
                  "PEM private key of --tls-cert (overrides tls_key_file)");
  cmd->callback([flags] { ExitCode() = RunServer(*flags); });
});

}  // namespace
}  // namespace tidal::cli
