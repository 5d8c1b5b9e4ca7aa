// `tidal server`: the control plane (docs/operations.md).
#include <signal.h>

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/command_registry.h"
#include "server/control_plane.h"
#include "server/etcd_store.h"
#include "server/follower_reads.h"
#include "server/leader_election.h"
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
  std::string advertise;
};

// Binds, trying again for up to 5 s: a replica takes over its own port
// from its follower server, or from its killed predecessor, whose sockets
// the kernel may not have released yet.
StatusOr<int> BindRetrying(const std::function<StatusOr<int>()>& bind) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    StatusOr<int> port = bind();
    if (port.ok() || std::chrono::steady_clock::now() > end) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// How one term of leadership ended.
enum class Term { kSignalled, kDeposed, kFailed };

// Leads on `port` with `store` until a signal, or until the replica finds
// itself deposed (a write failed its fence, or the lease could not be
// renewed for a whole TTL: etcd lost quorum, or cut this replica off).
Term Lead(const server::ServerConfig& config, std::unique_ptr<server::EtcdStore> store,
          server::LeaderElection& election, const std::string& host, int port, const std::string& advertise,
          const sigset_t& signals) {
  const auto elected = std::chrono::steady_clock::now();
  if (Status s = store->StartWriting(election.fence_revision()); !s.ok()) {
    std::cerr << "tidal server: elected, but cannot take over the store: " << s.message() << "\n";
    (void)election.Resign();
    return Term::kDeposed;  // follow again: another replica may do better
  }
  std::atomic<bool> deposed{false};
  server::HttpApi* api_ptr = nullptr;
  std::mutex api_mu;
  auto step_down = [&] {
    deposed = true;
    std::lock_guard lock(api_mu);
    if (api_ptr) api_ptr->Stop();
  };
  store->OnDeposed(step_down);
  server::SystemClock clock;
  server::ControlPlane cp(config, std::move(store), clock);
  if (Status s = cp.Recover(); !s.ok()) {
    std::cerr << "tidal server: recovery failed: " << s.message() << "\n";
    (void)election.Resign();
    return Term::kFailed;
  }
  server::HttpApi api(cp, cp.config().auth, cp.config());
  if (auto bound = BindRetrying([&] { return api.Bind(host, port); }); !bound.ok()) {
    std::cerr << "tidal server: " << bound.status().message() << "\n";
    (void)election.Resign();
    return Term::kFailed;
  }
  {
    std::lock_guard lock(api_mu);
    api_ptr = &api;
    if (deposed) api.Stop();
  }
  cp.StartLoop();
  std::printf("tidal server: leading as %s (fence revision %ld; took over in %.0f ms)\n", advertise.c_str(),
              static_cast<long>(election.fence_revision()),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - elected).count());
  std::fflush(stdout);
  // Renew the lease every TTL/4; a leader that cannot for a whole TTL may
  // have been replaced, and stops (its writes would fail their fence anyway).
  std::atomic<bool> stopping{false};
  std::thread renewer([&] {
    auto last_renewed = std::chrono::steady_clock::now();
    const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(election.ttl()) / 4;
    while (!stopping) {
      std::this_thread::sleep_for(period);
      // Counted from when the renewal was sent: etcd restarts the TTL when
      // it gets the request, not when the reply comes back.
      const auto sent = std::chrono::steady_clock::now();
      auto ttl = election.Renew();
      if (ttl.ok() && *ttl > 0) {
        last_renewed = sent;
      } else if ((ttl.ok() && *ttl == 0) || std::chrono::steady_clock::now() - last_renewed > election.ttl()) {
        std::fprintf(stderr, "tidal server: lost the leadership (%s); following again\n",
                     ttl.ok() ? "the lease is gone" : ttl.status().message().c_str());
        step_down();
        return;
      }
    }
  });
  std::atomic<bool> signalled{false};
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!deposed) signalled = true;
    api.Stop();
  });
  api.Serve();
  stopping = true;
  cp.StopLoop();
  renewer.join();
  // Wake the stopper if Serve() ended on its own (deposed).
  if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (signalled) {
    // A clean stop hands over at once instead of after the lease's TTL.
    (void)election.Resign();
    std::printf("tidal server: stopped leading (store %s)\n", config.store.c_str());
    return Term::kSignalled;
  }
  return Term::kDeposed;
}

// `tidal server --store etcd://...`: one replica of several (issue #13,
// docs/operations.md "High availability"). Follows (serves only redirects,
// keeps a warm copy of the store) until it wins the election, then leads on
// the same address until a signal. A replica deposed while leading (etcd
// lost quorum, or a partition cut it off) follows again, so the replicas
// elect a leader by themselves once etcd answers.
int RunReplica(const server::ServerConfig& config, const std::pair<std::string, int>& listen,
               const std::string& advertise_flag, sigset_t signals) {
  auto url = server::ParseEtcdStoreUrl(config.store);
  if (!url.ok()) {
    std::cerr << "tidal server: " << url.status().message() << "\n";
    return 2;
  }
  if (!config.tls_cert_file.empty()) {
    std::cerr << "tidal server: TLS with --store etcd:// is not supported yet; put a TLS proxy in front\n";
    return 2;
  }
  auto election_client = server::EtcdClient::Create(url->endpoints, std::chrono::milliseconds(1000));
  if (!election_client.ok()) {
    std::cerr << "tidal server: " << election_client.status().message() << "\n";
    return 2;
  }
  // What the follower tells clients: the leader, or why there is none.
  std::mutex view_mu;
  server::FollowerView view;
  server::LeaderElection* election_ptr = nullptr;
  auto current_view = [&] {
    std::lock_guard lock(view_mu);
    server::FollowerView v = view;
    if (v.problem.empty() && election_ptr) v.leader_url = election_ptr->leader_url();
    return v;
  };
  std::unique_ptr<server::LeaderElection> election;
  std::string advertise = advertise_flag;
  int port = listen.second;
  const timespec kPoll = {0, 100'000'000};
  server::SystemClock clock;
  while (true) {
    // The API: reads of this replica's copy (server/follower_reads.h), the
    // way to the leader for the rest, and why there is none meanwhile.
    auto reads = std::make_unique<server::FollowerReads>(config, clock, current_view);
    auto api = std::make_unique<server::HttpApi>(*reads, config.auth, config);
    auto bound = BindRetrying([&] { return api->Bind(listen.first, port); });
    if (!bound.ok()) {
      std::cerr << "tidal server: " << bound.status().message() << "\n";
      return 1;
    }
    if (!election) {
      port = *bound;
      if (advertise.empty()) {
        std::string host = listen.first;
        if (host.empty() || host == "0.0.0.0") {
          char name[256] = {};
          gethostname(name, sizeof(name) - 1);
          host = name;
        }
        advertise = fmt::format("http://{}:{}", host, port);
      }
      election = std::make_unique<server::LeaderElection>(std::move(election_client).value(),
                                                          server::EtcdStore::LeaderKey(*url), advertise);
      std::lock_guard lock(view_mu);
      election_ptr = election.get();
      std::printf("tidal server listening on http://%s:%d (store %s, following until elected; advertised as %s)\n",
                  listen.first.c_str(), port, config.store.c_str(), advertise.c_str());
      std::fflush(stdout);
    }
    std::thread api_thread([&] { api->Serve(); });
    // Follow: open the store (a fresh local copy, caught up), look for the
    // leader key every 100 ms (the wait for a signal is the pause), and keep
    // the copy warm meanwhile.
    std::unique_ptr<server::EtcdStore> store;
    std::string last_problem;
    bool signalled = false;
    while (true) {
      if (sigtimedwait(&signals, nullptr, &kPoll) > 0) {
        signalled = true;
        break;
      }
      Status problem = Status::Ok();
      if (!store) {
        auto opened = server::EtcdStore::Open(*url);
        if (opened.ok()) {
          store = std::move(opened).value();
        } else {
          problem = opened.status();
        }
      }
      if (store) {
        auto won = election->TryAcquire();
        if (won.ok() && *won) break;
        problem = won.ok() ? store->CatchUp() : won.status();
        if (problem.ok()) reads->CopyCaughtUp(*store);
      }
      if (!problem.ok() && problem.message() != last_problem) {
        std::fprintf(stderr, "tidal server: following: %s\n", problem.message().c_str());
      }
      last_problem = problem.ok() ? "" : problem.message();
      std::lock_guard lock(view_mu);
      view.problem = last_problem;
    }
    // The port goes to the leader's API, and the views read the copy, which
    // the leader takes over: both go first.
    api->Stop();
    api_thread.join();
    api.reset();
    reads.reset();
    if (signalled) return 0;
    {
      std::lock_guard lock(view_mu);
      view.problem.clear();
    }
    switch (Lead(config, std::move(store), *election, listen.first, port, advertise, signals)) {
      case Term::kSignalled: return 0;
      case Term::kFailed: return 1;
      case Term::kDeposed: break;
    }
  }
}

// Exit codes: 0 stopped by a signal, 1 failed, 2 bad input.
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

  if (config->store.starts_with("etcd://")) {
    return RunReplica(std::move(config).value(), *listen, flags.advertise, signals);
  }
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
  cmd->add_option("--store", flags->store,
                  "Store URL: sqlite:PATH (default sqlite:tidal.db), or etcd://HOST:PORT[,HOST:PORT...]"
                  "[?prefix=/tidal] for one of several replicas, of which the elected one leads");
  cmd->add_option("--advertise", flags->advertise,
                  "With an etcd store: the URL other replicas send clients to when this one leads "
                  "(default http://LISTEN-HOST:PORT)");
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
