// A load tool: N simulated node agents (default 10,000) register with one
// real `tidal server` and heartbeat every --interval-s (default 10 s) with
// 8 GPUs' health and utilization each, spread evenly over the interval, for
// --seconds. Reports the heartbeat rate achieved, reply latency percentiles,
// errors, and the server's CPU and memory.
//
//   build/bench/agent_heartbeat_benchmark [--agents 10000] [--interval-s 10]
//       [--seconds 60] [--threads 32] [--submit-clients 0] [--server-defaults 0]
//       [--pods-by-watch 1]
//
// Each simulated agent heartbeats on a keep-alive connection of its own, as a
// real agent does: 10,000 agents hold 10,000 connections. --submit-clients N
// also runs N clients submitting 1-GPU jobs (each on one keep-alive
// connection) for the same window, so the heartbeat and submit figures come
// from one server under both loads. --server-defaults 1 keeps the server's
// own pass timing (else passes are at least 2 s apart). --pods-by-watch 1
// (the default) heartbeats as a real agent whose pod watch answers (the
// reply is the lease alone); 0 asks for the node's pods in each reply, as an
// agent without the watch does. The tool parks no watches itself.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "bench/agent_bench_util.h"
#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "core/common/percentile.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace tidal::bench;
using Clock = std::chrono::steady_clock;

namespace {

json Registration(int i) {
  json gpus = json::array();
  for (int g = 0; g < 8; ++g) {
    gpus.push_back({{"index", g}, {"uuid", fmt::format("GPU-sim-{}-{}", i, g)}, {"healthy", true}});
  }
  return {{"name", fmt::format("sim-{:05d}", i)}, {"gpu_model", "H100-80GB"},
          {"gpu_memory_gib", 80}, {"driver_version", "sim"}, {"gpus", gpus},
          {"nvlink_domains", {{0, 1, 2, 3}, {4, 5, 6, 7}}}};
}

std::string HeartbeatBody(int i, bool pods_by_watch) {
  tidal::protocol::Heartbeat heartbeat;
  for (int g = 0; g < 8; ++g) {
    heartbeat.gpus.push_back({g, true, 0, 0, ((i + g) % 10) / 10.0, 40.0});
  }
  heartbeat.pods_by_watch = pods_by_watch;
  return tidal::protocol::HeartbeatToJson(heartbeat).dump();
}

}  // namespace

int main(int argc, char** argv) {
  int agents = 10000, threads = 32, submit_clients = 0;
  bool server_defaults = false;
  bool pods_by_watch = true;
  double interval_s = 10, seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--agents") agents = std::atoi(argv[i + 1]);
    else if (arg == "--interval-s") interval_s = std::atof(argv[i + 1]);
    else if (arg == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (arg == "--threads") threads = std::atoi(argv[i + 1]);
    else if (arg == "--submit-clients") submit_clients = std::atoi(argv[i + 1]);
    else if (arg == "--server-defaults") server_defaults = std::atoi(argv[i + 1]) != 0;
    else if (arg == "--pods-by-watch") pods_by_watch = std::atoi(argv[i + 1]) != 0;
  }
  const std::string tidal = (BuildDir() / "tidal").string();
  if (access(tidal.c_str(), X_OK) != 0) {
    std::cerr << "agent_heartbeat_benchmark: build the tidal target first\n";
    return 2;
  }
  // A long lease: the tool measures heartbeat cost, not lost-node handling.
  // The fleet is declared in the cluster file, as a real cluster's would be.
  // Scheduling passes every 2 s at most, as on a busy production server (a
  // pass per registration would measure the engine, not the agent path).
  auto started = StartBenchServer(
      tidal, "tidal_heartbeat_bench", 3600, interval_s,
      server_defaults ? "" : "schedule_interval_ms: 2000\nmin_pass_gap_ms: 2000\n",
      "pools: [training]\n" +
          fmt::format("nodes:\n  - {{name: \"sim-{{i:5}}\", start: 0, count: {}, gpus: 8, "
                      "gpu_model: H100-80GB, gpu_memory_gib: 80, nvlink: 2x4}}\n", agents) +
          fmt::format("queues:\n  - {{name: research, guaranteed_gpus: {}}}\n", agents * 8) +
          "projects:\n  - {name: llm, tenant: research, tier: standard, queue: research}\n");
  if (!started) return 1;
  const fs::path dir = started->dir;
  const pid_t server = started->pid;
  const int port = started->port;

  // Register every agent (as a fleet does at start), in parallel.
  std::atomic<int> next{0}, reg_errors{0};
  std::mutex err_mu;
  std::string first_error;
  auto note_error = [&](const httplib::Result& res) {
    std::lock_guard lock(err_mu);
    if (first_error.empty()) {
      first_error = res ? fmt::format("{} {}", res->status, res->body)
                        : httplib::to_string(res.error());
    }
  };
  // Each node's own credential, as its registration returned it: the
  // bootstrap token may only register, as for a real agent.
  std::vector<std::string> credentials(agents);
  const auto reg_start = Clock::now();
  {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        httplib::Client c("127.0.0.1", port);
        c.set_keep_alive(true);
        c.set_read_timeout(60, 0);
        c.set_default_headers({{"Authorization", "Bearer agent-token"}});
        for (int i = next++; i < agents; i = next++) {
          auto res = c.Post("/v1/agent/register", Registration(i).dump(), "application/json");
          if (!res || res->status != 200) {
            ++reg_errors;
            note_error(res);
          } else if (auto reply = tidal::protocol::RegistrationReplyFromJson(
                         json::parse(res->body, nullptr, /*allow_exceptions=*/false));
                     reply.ok()) {
            credentials[i] = reply->credential;
          }
          const int done = i + 1;
          if (done % 1000 == 0) {
            fmt::print(stderr, "  registered {} in {:.1f} s\n", done,
                       std::chrono::duration<double>(Clock::now() - reg_start).count());
          }
        }
      });
    }
    for (auto& t : pool) t.join();
  }
  const double reg_s = std::chrono::duration<double>(Clock::now() - reg_start).count();

  // Heartbeats: agent i is due at phase (i / agents) * interval, then every
  // interval; each thread serves a slice of the agents in due order.
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::atomic<long> sent{0}, errors{0}, late{0};
  const double cpu0 = CpuSeconds(server);
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  // One connection per agent; each agent's client is used by one thread.
  std::vector<std::unique_ptr<httplib::Client>> agent_clients(agents);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<double> mine;
      for (long round = 0;; ++round) {
        for (int i = t; i < agents; i += threads) {
          const double due_s = round * interval_s + interval_s * i / agents;
          if (due_s >= seconds) goto done;
          const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(due_s));
          if (Clock::now() > due + std::chrono::seconds(1)) ++late;
          std::this_thread::sleep_until(due);
          if (!agent_clients[i]) {
            agent_clients[i] = std::make_unique<httplib::Client>("127.0.0.1", port);
            agent_clients[i]->set_keep_alive(true);
            agent_clients[i]->set_tcp_nodelay(true);
            agent_clients[i]->set_read_timeout(60, 0);
          }
          httplib::Client& c = *agent_clients[i];
          const auto t0 = Clock::now();
          auto res = c.Post(fmt::format("/v1/agent/nodes/sim-{:05d}/heartbeat", i).c_str(),
                            httplib::Headers{{"Authorization", "Bearer " + credentials[i]}}, HeartbeatBody(i, pods_by_watch),
                            "application/json");
          mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          ++sent;
          if (!res || res->status != 200) {
            ++errors;
            note_error(res);
          }
        }
      }
    done:
      std::lock_guard lock(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  // Submits meanwhile, for the same window.
  std::vector<double> submit_ms;
  std::atomic<long> submit_errors{0};
  for (int t = 0; t < submit_clients; ++t) {
    pool.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);
      const httplib::Headers auth = {{"Authorization", "Bearer admin-token"}};
      std::vector<double> mine;
      for (long n = 0; Clock::now() < start + std::chrono::duration<double>(seconds); ++n) {
        const std::string body =
            fmt::format(R"({{"name":"s{}-{}","project":"llm","gpus_per_replica":1}})", t, n);
        const auto t0 = Clock::now();
        auto res = c.Post("/v1/workloads", auth, body, "application/json");
        if (res && res->status == 201) {
          mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        } else {
          ++submit_errors;
        }
      }
      std::lock_guard lock(mu);
      submit_ms.insert(submit_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : pool) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu1 = CpuSeconds(server);
  const long rss = StatusKib(server, "VmRSS");
  // Each journal snapshot's copy holds the state lock: every request waits.
  const double snapshots = Scrape(port, "tidal_journal_snapshot_copy_seconds_count");
  const double copy_ms = snapshots > 0 ? 1000 * Scrape(port, "tidal_journal_snapshot_copy_seconds_sum") / snapshots : 0;
  // So does each scheduling pass (until durable: the lock is released before).
  const double passes = Scrape(port, "tidal_scheduling_pass_seconds_count");
  const double pass_ms = passes > 0 ? 1000 * Scrape(port, "tidal_scheduling_pass_seconds_sum") / passes : 0;
  Stop(server);
  fmt::print("heartbeat load: {} agents, one heartbeat each per {} s, {:.0f} s\n", agents,
             interval_s, wall);
  fmt::print("  registration: {} agents in {:.1f} s ({:.0f}/s), {} errors\n", agents, reg_s,
             agents / reg_s, reg_errors.load());
  fmt::print("  heartbeats: {} sent = {:.0f}/s (target {:.0f}/s), {} errors, {} sent > 1 s late\n",
             sent.load(), sent.load() / wall, agents / interval_s, errors.load(), late.load());
  fmt::print("  latency ms: p50 {:.1f}  p99 {:.1f}  max {:.1f}\n", tidal::Percentile(latencies_ms, 0.5),
             tidal::Percentile(latencies_ms, 0.99), tidal::Percentile(latencies_ms, 1.0));
  fmt::print("  server: {:.1f}% of one core, RSS {:.0f} MiB\n", 100 * (cpu1 - cpu0) / wall,
             rss / 1024.0);
  if (submit_clients > 0) {
    fmt::print("  submits: {} clients, {} durable = {:.0f}/s, {} errors; latency ms p50 {:.1f}  p99 {:.1f}  max {:.1f}\n",
               submit_clients, submit_ms.size(), submit_ms.size() / wall, submit_errors.load(),
               tidal::Percentile(submit_ms, 0.5), tidal::Percentile(submit_ms, 0.99),
               tidal::Percentile(submit_ms, 1.0));
  }
  fmt::print("  journal snapshots: {:.0f}, copy mean {:.1f} ms (under the state lock)\n", snapshots, copy_ms);
  fmt::print("  scheduling passes: {:.0f}, mean {:.1f} ms (under the state lock, then until durable)\n", passes, pass_ms);
  if (!first_error.empty()) fmt::print("  first error: {}\n", first_error.substr(0, 300));
  fmt::print("  CPU model: {}\n", CpuModel());
  fs::remove_all(dir);
  return 0;
}
