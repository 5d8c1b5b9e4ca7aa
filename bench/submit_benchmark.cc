// Durable submit throughput and latency of `tidal server`: starts the server
// (Release build recommended) on a free loopback port with a temp SQLite
// store, then N client threads, each on one keep-alive connection, submit
// workloads for D seconds. Every 201 reply means the submit is on disk. Prints
// throughput, latency percentiles and the mean group-commit size.
//
//   build/bench/submit_benchmark [--tidal build/tidal] [--clients 64] [--seconds 10]
//                                [--interval-ms 1000 | --server-defaults 1]
//                                [--idle N] [--slowloris N] [--store etcd://...] [--batch N]
//                                [--listers N] [--rate R]
//
// --store etcd://H:P,...?prefix=/P runs the server as the one replica on an
// etcd cluster (a prefix of its own per run: the store must be empty); a
// 201 then means the submit is in etcd, on a majority of its members.
//
// --interval-ms sets both schedule_interval_ms and min_pass_gap_ms (a pass
// at most once a second by default); --server-defaults 1 leaves them and
// http_threads at the server's own defaults (1 s timer, passes >= 50 ms
// apart, 64 threads), the configuration a deployment starts with.
//
// --batch N (N > 1) sends each request as POST /v1/workloads:batch of N
// workloads (as `tidal submit -f` sends a list); latencies are per request,
// the rate is in workloads.
// --idle N holds N more connections open without a byte sent; --slowloris N
// holds N connections that send a request header one byte a second (and
// reconnect when the server closes them): the submits' latency with them
// shows whether idle or hostile connections cost the server's clients.
// --listers N runs N more clients that list the tenant's 10,000 newest
// workloads (GET /v1/workloads?limit=10000) back to back, as dashboards
// polling a deep queue would: the submits' latency with them shows what
// large reads cost writers.
//
// --rate R sends R requests a second in all, open loop: client t sends its
// k-th request at (k x clients + t) / R seconds and its latency counts from
// then, so a stall that holds every client's request shows as the wait of
// every request due during it (a closed loop shows it only in its maximum:
// its clients stop sending while they wait). Without --rate each client
// sends its next request when the last is answered.
//
// (Not a Google Benchmark: the thing measured is another process.)
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/agent_bench_util.h"
#include "core/common/percentile.h"
#include "protocol/node_registration.h"
#include "protocol/workload_batch.h"

namespace {

using tidal::bench::Scrape;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Idle and slowloris connections until `stop`: returns how many times the
// server closed a slowloris connection (its header deadline).
long HoldHostileConnections(int port, int idle, int slowloris, const std::atomic<bool>& stop) {
  std::vector<int> idle_fds;
  for (int i = 0; i < idle; ++i) idle_fds.push_back(Connect(port));
  const std::string header = "POST /v1/workloads HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer bench-token\r\n";
  std::vector<std::pair<int, size_t>> slow;  // fd, bytes sent
  for (int i = 0; i < slowloris; ++i) slow.push_back({Connect(port), 0});
  long closed = 0;
  while (!stop) {
    for (auto& [fd, sent] : slow) {
      if (fd < 0 || send(fd, header.data() + sent % header.size(), 1, MSG_NOSIGNAL) != 1) {
        if (fd >= 0) {
          close(fd);
          ++closed;
        }
        fd = Connect(port);
        sent = 0;
        continue;
      }
      ++sent;
    }
    for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int fd : idle_fds) close(fd);
  for (auto& [fd, sent] : slow) close(fd);
  return closed;
}

// A client of the bench tenant on one keep-alive connection, Nagle off.
httplib::Client BenchClient(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  c.set_default_headers({{"Authorization", "Bearer bench-token"}});
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tidal = "build/tidal";
  int clients = 64;
  double seconds = 10;
  int interval_ms = 1000;  // scheduling loop timer (and minimum gap)
  bool server_defaults = false;
  int idle = 0, slowloris = 0, batch = 1, listers = 0;
  double rate = 0;  // requests a second, open loop; 0 = closed loop
  std::string store;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tidal") tidal = argv[i + 1];
    if (a == "--clients") clients = std::atoi(argv[i + 1]);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    if (a == "--interval-ms") interval_ms = std::atoi(argv[i + 1]);
    if (a == "--server-defaults") server_defaults = std::atoi(argv[i + 1]) != 0;
    if (a == "--idle") idle = std::atoi(argv[i + 1]);
    if (a == "--slowloris") slowloris = std::atoi(argv[i + 1]);
    if (a == "--store") store = argv[i + 1];
    if (a == "--batch") batch = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--listers") listers = std::atoi(argv[i + 1]);
    if (a == "--rate") rate = std::atof(argv[i + 1]);
  }
  char tmpl[] = "/tmp/tidal-submit-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream config(dir + "/server.yaml");
  config << "store: '" << (store.empty() ? "sqlite:" + dir + "/tidal.db" : store) << "'\n";
  if (!server_defaults) {
    config << "schedule_interval_ms: " << interval_ms << "\nmin_pass_gap_ms: " << interval_ms
           << "\nhttp_threads: " << clients + 8 << "\n";
  }
  config << "tokens:\n  - {name: bench, role: user, tenant: research, token: bench-token}\n"
         << "  - {name: agents, role: agent, token: bench-agent-token}\n";
  config.close();  // on disk before the server reads it
  int out[2];
  if (pipe(out) != 0) return 1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(tidal.c_str(), tidal.c_str(), "server", "--config", (dir + "/server.yaml").c_str(),
          "--listen", "127.0.0.1:0", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string line;
  char ch;
  while (read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  const size_t at = line.find("127.0.0.1:");
  if (at == std::string::npos) {
    std::fprintf(stderr, "server did not start: %s\n", line.c_str());
    return 1;
  }
  const int port = std::atoi(line.c_str() + at + 10);
  // A replica on etcd follows until it wins the election.
  for (int i = 0; i < 300; ++i) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/readyz");
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Every node registers, as its agent would (an unregistered node is not
  // ready and takes no work), so passes place work as in production.
  {
    httplib::Client c("127.0.0.1", port);
    auto nodes = c.Get("/v1/nodes", {{"Authorization", "Bearer bench-token"}});
    if (!nodes || nodes->status != 200) {
      std::fprintf(stderr, "GET /v1/nodes failed\n");
      return 1;
    }
    const nlohmann::json list = nlohmann::json::parse(nodes->body);
    for (const nlohmann::json& n : list["nodes"]) {
      tidal::protocol::NodeRegistration reg;
      reg.name = n["name"].get<std::string>();
      auto r = c.Post("/v1/agent/register", {{"Authorization", "Bearer bench-agent-token"}},
                      tidal::protocol::NodeRegistrationToJson(reg).dump(), "application/json");
      if (!r || r->status != 200) {
        std::fprintf(stderr, "registering %s failed\n", reg.name.c_str());
        return 1;
      }
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::atomic<long> errors{0};
  std::vector<std::vector<double>> latencies(clients);
  std::vector<std::thread> threads;
  std::chrono::steady_clock::time_point measured_from;  // set before `go`
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client c = BenchClient(port);
      long n = 0;  // workloads named
      long k = 0;  // requests sent
      // Warm-up: open the keep-alive connection before the clock starts.
      for (int i = 0; i < 50; ++i) {
        if (c.Get("/healthz")) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ++ready;
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      while (!stop) {
        // Sandbox (experiment tier) jobs of 1 GPU: admission, priority, store.
        auto workload = [&] {
          return nlohmann::json{{"name", "b" + std::to_string(t) + "-" + std::to_string(n++)},
                                {"project", "sandbox"}, {"gpus_per_replica", 1}};
        };
        std::string body;
        if (batch == 1) {
          body = workload().dump();
        } else {
          tidal::protocol::WorkloadBatch b;
          for (int i = 0; i < batch; ++i) b.workloads.push_back(workload());
          body = tidal::protocol::WorkloadBatchToJson(b).dump();
        }
        auto s = std::chrono::steady_clock::now();
        if (rate > 0) {  // open loop: due at its slot, timed from it
          const double due_s = static_cast<double>(k++ * clients + t) / rate;
          s = measured_from + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(due_s));
          std::this_thread::sleep_until(s);
          if (stop) break;
        }
        auto r = c.Post(batch == 1 ? "/v1/workloads" : std::string(tidal::protocol::kWorkloadBatchPath), body,
                        "application/json");
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
        if (!r || r->status != 201) {
          if (++errors <= 3) {
            std::fprintf(stderr, "error: %s\n", r ? (std::to_string(r->status) + " " + r->body).c_str()
                                                   : httplib::to_string(r.error()).c_str());
          }
          continue;
        }
        latencies[t].push_back(ms);
      }
    });
  }
  while (ready < clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  long slowloris_closed = 0;
  std::thread hostile([&] { slowloris_closed = HoldHostileConnections(port, idle, slowloris, stop); });
  std::vector<std::vector<double>> list_ms(listers);
  std::vector<std::thread> lister_threads;
  for (int l = 0; l < listers; ++l) {
    lister_threads.emplace_back([&, l] {
      httplib::Client c = BenchClient(port);
      while (!stop) {
        const auto s = std::chrono::steady_clock::now();
        auto r = c.Get("/v1/workloads?limit=10000");
        if (r && r->status == 200) {
          list_ms[l].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
        }
      }
    });
  }
  measured_from = std::chrono::steady_clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads) th.join();
  for (auto& th : lister_threads) th.join();
  hostile.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - measured_from).count();
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  const double commits = Scrape(port, "tidal_store_commits_total");
  const double mutations = Scrape(port, "tidal_store_committed_mutations_total");
  std::printf("clients %d, %.1f s: %zu durable submits, %.0f/s, errors %ld\n", clients, elapsed,
              all.size(), all.size() / elapsed, errors.load());
  if (batch > 1) {
    std::printf("batches of %d: %zu durable workloads, %.0f/s\n", batch, all.size() * batch,
                all.size() * batch / elapsed);
  }
  if (rate > 0) std::printf("open loop: %.0f requests/s due\n", rate);
  std::printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n", tidal::Percentile(all, 0.50),
              tidal::Percentile(all, 0.90), tidal::Percentile(all, 0.99), tidal::Percentile(all, 0.999),
              tidal::Percentile(all, 1.0));
  std::printf("group commit: %.0f transactions, %.1f changes each\n", commits,
              commits > 0 ? mutations / commits : 0);
  const double passes = Scrape(port, "tidal_scheduling_pass_seconds_count");
  std::printf("scheduling passes: %.0f, mean %.1f ms\n", passes,
              passes > 0 ? 1000 * Scrape(port, "tidal_scheduling_pass_seconds_sum") / passes : 0);
  const double snapshots = Scrape(port, "tidal_journal_snapshot_encode_seconds_count");
  std::printf("journal snapshots: %.0f, copy mean %.1f ms (under the state lock), encode mean %.1f ms (off it)\n",
              snapshots, snapshots > 0 ? 1000 * Scrape(port, "tidal_journal_snapshot_copy_seconds_sum") / snapshots : 0,
              snapshots > 0 ? 1000 * Scrape(port, "tidal_journal_snapshot_encode_seconds_sum") / snapshots : 0);
  if (listers > 0) {
    std::vector<double> lists;
    for (auto& v : list_ms) lists.insert(lists.end(), v.begin(), v.end());
    std::printf("listers %d: %zu lists of up to 10,000 workloads, p50 %.1f ms\n", listers, lists.size(),
                tidal::Percentile(lists, 0.50));
  }
  if (idle + slowloris > 0) {
    std::printf("hostile connections: %d idle, %d slowloris (closed by the server %ld times)\n", idle, slowloris,
                slowloris_closed);
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
