// An example inference replica: a small HTTP server whose latency grows with
// its load, as a model server's does when requests queue for the GPU.
//
//   GET /infer   one request; takes base_ms / (1 - rho) with rho = recent
//                req/s over --capacity-rps (capped at 0.95)
//   GET /ready   503 while the "model" loads (--load-ms), then 200
//   GET /load    {"rps", "p95_ms", "p99_ms", "inflight"} over the last 5 s
//
//   server [--port P (default $PORT)] [--load-ms MS] [--base-ms MS]
//          [--capacity-rps R]
// SIGTERM stops it cleanly (exit 0).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace {

using Clock = std::chrono::steady_clock;

class LoadWindow {
 public:
  void Add(Clock::time_point t, double latency_ms) {
    std::lock_guard lock(mu_);
    samples_.push_back({t, latency_ms});
    Trim(t);
  }
  double Rps(Clock::time_point now) {
    std::lock_guard lock(mu_);
    Trim(now);
    return static_cast<double>(samples_.size()) / kWindowS;
  }
  nlohmann::json Report(Clock::time_point now, int inflight) {
    std::lock_guard lock(mu_);
    Trim(now);
    std::vector<double> lat;
    for (const auto& s : samples_) lat.push_back(s.latency_ms);
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double p) {
      if (lat.empty()) return 0.0;
      return lat[std::min(lat.size() - 1, static_cast<size_t>(p * static_cast<double>(lat.size())))];
    };
    return {{"rps", static_cast<double>(lat.size()) / kWindowS},
            {"p95_ms", pct(0.95)},
            {"p99_ms", pct(0.99)},
            {"inflight", inflight}};
  }

 private:
  static constexpr double kWindowS = 5.0;
  struct Sample {
    Clock::time_point t;
    double latency_ms;
  };
  void Trim(Clock::time_point now) {
    while (!samples_.empty() &&
           now - samples_.front().t > std::chrono::duration<double>(kWindowS)) {
      samples_.pop_front();
    }
  }
  std::mutex mu_;
  std::deque<Sample> samples_;
};

httplib::Server* g_server = nullptr;
void OnTerm(int) {
  if (g_server) g_server->stop();
}

}  // namespace

int main(int argc, char** argv) {
  int port = std::getenv("PORT") ? std::atoi(std::getenv("PORT")) : 8000;
  long load_ms = 2000;
  double base_ms = 20, capacity_rps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--port") port = std::atoi(argv[i + 1]);
    else if (arg == "--load-ms") load_ms = std::atol(argv[i + 1]);
    else if (arg == "--base-ms") base_ms = std::atof(argv[i + 1]);
    else if (arg == "--capacity-rps") capacity_rps = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "server: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (port <= 0 || capacity_rps <= 0) {
    std::fprintf(stderr, "server: --port (or $PORT) and --capacity-rps must be > 0\n");
    return 2;
  }
  const auto started = Clock::now();
  LoadWindow window;
  std::atomic<int> inflight{0};
  httplib::Server server;
  g_server = &server;
  server.Get("/ready", [&](const httplib::Request&, httplib::Response& res) {
    const bool loaded = Clock::now() - started >= std::chrono::milliseconds(load_ms);
    res.status = loaded ? 200 : 503;
    res.set_content(loaded ? "ready\n" : "loading\n", "text/plain");
  });
  server.Get("/infer", [&](const httplib::Request&, httplib::Response& res) {
    const auto t0 = Clock::now();
    ++inflight;
    const double rho = std::min(0.95, window.Rps(t0) / capacity_rps);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(base_ms / (1.0 - rho)));
    --inflight;
    const auto t1 = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    window.Add(t1, ms);
    res.set_content(nlohmann::json{{"latency_ms", ms}}.dump(), "application/json");
  });
  server.Get("/load", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(window.Report(Clock::now(), inflight.load()).dump(), "application/json");
  });
  signal(SIGTERM, OnTerm);
  signal(SIGINT, OnTerm);
  std::printf("server: listening on 127.0.0.1:%d, ready in %ld ms, capacity %.1f req/s\n", port,
              load_ms, capacity_rps);
  std::fflush(stdout);
  if (!server.listen("127.0.0.1", port)) {
    std::fprintf(stderr, "server: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  std::printf("server: stopped\n");
  return 0;
}
