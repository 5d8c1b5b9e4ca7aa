// Placement and churn with real agents (issue #12's side-by-side with
// Slurm): starts a real `tidal server` and N real `tidal agent` processes
// (fake GPUs) on loopback, at the server's and the agents' default timings
// (5 s heartbeats, 30 s leases), then:
//   1. times until every agent has registered;
//   2. submits a burst of jobs from 16 client threads, then again as one
//      batch (POST /v1/workloads:batch), Slurm harness mix
//      (1/2/4/8 GPUs on one node; 16/32 GPUs as 2/4 whole nodes; weights
//      40/25/15/12/5/3, seeded), and times, from the first submit, until
//      every job is placed (the server's first_start_ms) and until every
//      pod runs (launch_ms in the agents' pods.json);
//   3. cancels them, then submits a churn of jobs that run `sleep D` and
//      times until the last is placed, against the ideal fill (their
//      GPU-seconds over the cluster's GPUs).
//
//   build/bench/agent_burst_benchmark [--tidal build/tidal] [--agents 256] [--gpus 8]
//       [--jobs 400] [--churn-jobs 1000] [--churn-s 8] [--seed 1] [--work-dir DIR]
//       [--nodes-dir DIR] [--nodes-nice N]
//
// --nodes-dir and --nodes-nice give the simulated nodes what separate
// machines would have: their agents' directories on another filesystem (a
// tmpfs such as /dev/shm: the pods' files then share no ext4 journal with
// the server's fdatasync), and agents and pods at a lower CPU priority than
// the server and the clients. Without them all run as equals on one machine.
//
// (Not a Google Benchmark: the thing measured is other processes.)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "agent/local_cluster.h"
#include "core/common/percentile.h"
#include "protocol/workload_batch.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Job {
  int gpus_per_pod;
  int pods;
};

std::vector<Job> Mix(int count, int gpus_per_node, uint64_t seed) {
  const std::vector<Job> shapes = {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {gpus_per_node, 2}, {gpus_per_node, 4}};
  std::discrete_distribution<int> pick({40, 25, 15, 12, 5, 3});
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < count; ++i) jobs.push_back(shapes[pick(rng)]);
  return jobs;
}

json Body(const std::string& name, const Job& j, const std::string& seconds) {
  return {{"name", name},        {"kind", "training"},      {"project", "llm"},
          {"replicas", j.pods},  {"gpus_per_replica", j.gpus_per_pod},
          {"command", {"/bin/sleep", seconds}}};
}

// Submits every body from 16 threads, each on one keep-alive connection
// (as a submitting service would); ids in body order (0 = refused). Each
// accepted submit's latency goes to `latency_ms` (unsorted).
std::vector<uint64_t> SubmitAll(const tidal::agent::LocalCluster& c, const std::vector<json>& bodies,
                                std::vector<double>* latency_ms = nullptr) {
  std::vector<uint64_t> ids(bodies.size(), 0);
  std::vector<double> latencies(bodies.size(), -1);
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      httplib::Client client(c.url());
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      const httplib::Headers auth = {{"Authorization", "Bearer " + c.admin_token()}};
      for (size_t i = next++; i < bodies.size(); i = next++) {
        const auto sent = Clock::now();
        auto r = client.Post("/v1/workloads", auth, bodies[i].dump(), "application/json");
        if (r && r->status == 201) {
          latencies[i] = Since(sent) * 1000;
          ids[i] = json::parse(r->body)["id"].get<uint64_t>();
        } else {
          std::fprintf(stderr, "submit %zu: %s\n", i, r ? r->body.c_str() : "no reply");
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (latency_ms != nullptr) {
    latency_ms->clear();
    for (double l : latencies) {
      if (l >= 0) latency_ms->push_back(l);
    }
  }
  return ids;
}


// Submits every body in one POST /v1/workloads:batch; ids in body order
// (all 0 if it was refused).
std::vector<uint64_t> SubmitBatch(const tidal::agent::LocalCluster& c, const std::vector<json>& bodies) {
  std::vector<uint64_t> ids(bodies.size(), 0);
  auto reply = c.Post(std::string(tidal::protocol::kWorkloadBatchPath), tidal::protocol::WorkloadBatchToJson({bodies}));
  auto batch = reply.ok() ? tidal::protocol::WorkloadBatchFromJson(*reply)
                          : tidal::StatusOr<tidal::protocol::WorkloadBatch>(reply.status());
  if (!batch.ok()) {
    std::fprintf(stderr, "batch: %s\n", batch.status().message().c_str());
    return ids;
  }
  for (size_t i = 0; i < ids.size() && i < batch->workloads.size(); ++i) ids[i] = batch->workloads[i]["id"].get<uint64_t>();
  return ids;
}

// Ids of the listed workloads whose state is one of `states`.
std::set<uint64_t> InStates(const tidal::agent::LocalCluster& c, const std::set<std::string>& states) {
  std::set<uint64_t> out;
  auto list = c.Get("/v1/workloads?limit=10000");
  if (!list.ok()) return out;
  for (const json& w : (*list)["workloads"]) {
    if (states.count(w.value("state", ""))) out.insert(w["id"].get<uint64_t>());
  }
  return out;
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// When the last of `ids` was first bound to GPUs (the server's
// first_start_ms), once every one of them has been; nullopt before.
std::optional<int64_t> LastFirstStartMs(const tidal::agent::LocalCluster& c, const std::set<uint64_t>& ids) {
  auto list = c.Get("/v1/workloads?limit=10000");
  if (!list.ok()) return std::nullopt;
  int64_t last = 0;
  size_t started = 0;
  for (const json& w : (*list)["workloads"]) {
    if (!ids.count(w["id"].get<uint64_t>())) continue;
    const int64_t first_start_ms = w.value("first_start_ms", int64_t{0});
    if (first_start_ms == 0) return std::nullopt;
    last = std::max(last, first_start_ms);
    ++started;
  }
  if (started < ids.size()) return std::nullopt;
  return last;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tidal = "build/tidal";
  int agents = 256, gpus = 8, jobs = 400, churn_jobs = 1000;
  std::string churn_s = "8";
  uint64_t seed = 1;
  std::string work_dir, nodes_dir;
  int nodes_nice = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tidal") tidal = argv[i + 1];
    if (a == "--agents") agents = std::atoi(argv[i + 1]);
    if (a == "--gpus") gpus = std::atoi(argv[i + 1]);
    if (a == "--jobs") jobs = std::atoi(argv[i + 1]);
    if (a == "--churn-jobs") churn_jobs = std::atoi(argv[i + 1]);
    if (a == "--churn-s") churn_s = argv[i + 1];
    if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--work-dir") work_dir = argv[i + 1];
    if (a == "--nodes-dir") nodes_dir = argv[i + 1];
    if (a == "--nodes-nice") nodes_nice = std::atoi(argv[i + 1]);
  }
  if (work_dir.empty()) {
    char tmpl[] = "/tmp/tidal-burst-bench-XXXXXX";
    work_dir = mkdtemp(tmpl);
  }
  tidal::agent::LocalClusterOptions o;
  o.tidal_binary = tidal;
  o.work_dir = work_dir;
  if (!nodes_dir.empty()) {
    char tmpl[] = "tidal-burst-nodes-XXXXXX";
    o.nodes_dir = nodes_dir + "/" + tmpl;
    if (mkdtemp(o.nodes_dir.data()) == nullptr) {
      std::fprintf(stderr, "--nodes-dir %s: cannot make a directory there\n", nodes_dir.c_str());
      return 1;
    }
  }
  o.agent_nice = nodes_nice;
  // The defaults a deployment starts with, not LocalCluster's test timings.
  o.node_lease_s = 30;
  o.heartbeat_interval_s = 5;
  o.agent_sync_ms = 0;
  o.agent_sample_ms = 5000;
  o.agent_tick_ms = 100;
  o.start_timeout = std::chrono::seconds(120);
  for (int i = 0; i < agents; ++i) {
    tidal::agent::LocalNodeOptions n;
    n.name = fmt::format("node-{}", i + 1);
    n.pool = "training";
    n.gpus = gpus;
    n.nvlink = fmt::format("2x{}", gpus / 2);
    o.nodes.push_back(n);
  }
  const auto start = Clock::now();
  auto cluster_or = tidal::agent::LocalCluster::Start(o);
  if (!cluster_or.ok()) {
    std::fprintf(stderr, "%s\n", cluster_or.status().message().c_str());
    return 1;
  }
  auto& cluster = **cluster_or;
  std::printf("%d agents x %d fake GPUs: server up and every agent registered in %.2f s\n", agents, gpus,
              Since(start));
  if (!o.nodes_dir.empty() || nodes_nice != 0) {
    std::printf("nodes: agents and pods at nice %d, their directories under %s\n", nodes_nice,
                o.nodes_dir.empty() ? work_dir.c_str() : o.nodes_dir.c_str());
  }

  // 2. The burst, twice: from 16 clients, then as one batch (as `tidal
  // submit -f` sends a list). Each is cancelled and drained before the next.
  std::vector<Job> mix = Mix(jobs, gpus, seed);
  int pods = 0, demand = 0;
  for (const Job& j : mix) {
    pods += j.pods;
    demand += j.pods * j.gpus_per_pod;
  }
  for (const bool as_batch : {false, true}) {
    std::vector<json> bodies;
    for (int i = 0; i < jobs; ++i) bodies.push_back(Body(fmt::format("burst-{}", i), mix[i], "3600"));
    const auto burst = Clock::now();
    const int64_t burst_ms = WallMs();
    std::vector<double> latency_ms;
    std::vector<uint64_t> ids = as_batch ? SubmitBatch(cluster, bodies) : SubmitAll(cluster, bodies, &latency_ms);
    const double submitted_s = Since(burst);
    // Polled until done; the figures come from the timestamps the server
    // (first_start_ms: when the job was bound) and the agents (launch_ms:
    // when the pod's process started) recorded, not from the poll.
    double placed_s = -1, running_s = -1;
    std::set<uint64_t> burst_ids(ids.begin(), ids.end());
    burst_ids.erase(0);  // refused (said on stderr)
    while (Since(burst) < 300 && (placed_s < 0 || running_s < 0)) {
      if (placed_s < 0) {
        if (auto last = LastFirstStartMs(cluster, burst_ids)) placed_s = (*last - burst_ms) / 1000.0;
      }
      if (placed_s >= 0) {
        int running = 0;
        int64_t last_launch_ms = 0;
        for (const json& p : cluster.LocalPods()) {
          if (p.value("phase", "") != "running" || !burst_ids.count(p.value("workload", uint64_t{0}))) continue;
          ++running;
          last_launch_ms = std::max(last_launch_ms, p.value("launch_ms", int64_t{0}));
        }
        if (running >= pods) running_s = (last_launch_ms - burst_ms) / 1000.0;
      }
      // Each poll reads every agent's pods.json: more often would take the
      // CPU the agents start pods with.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("burst (%s): %d jobs (%d pods, %d GPUs), submitted in %.3f s; all placed %.3f s, all pods "
                "running %.3f s after the first submit\n",
                as_batch ? "one batch" : "16 clients", jobs, pods, demand, submitted_s, placed_s, running_s);
    if (!latency_ms.empty()) {
      std::printf("  submit latency: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", tidal::Percentile(latency_ms, 0.5),
                  tidal::Percentile(latency_ms, 0.99), tidal::Percentile(latency_ms, 1));
    }
    std::fflush(stdout);
    for (uint64_t id : ids) {
      if (id) (void)cluster.Post(fmt::format("/v1/workloads/{}/cancel", id), json::object());
    }
    const auto drain = Clock::now();
    while (Since(drain) < 120 && !InStates(cluster, {"running", "terminating"}).empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // 3. The churn.
  if (churn_jobs > 0) {
    std::vector<Job> churn = Mix(churn_jobs, gpus, seed + 1);
    std::vector<json> churn_bodies;
    double gpu_seconds = 0;
    for (int i = 0; i < churn_jobs; ++i) {
      churn_bodies.push_back(Body(fmt::format("churn-{}", i), churn[i], churn_s));
      gpu_seconds += churn[i].pods * churn[i].gpus_per_pod * std::atof(churn_s.c_str());
    }
    const auto t0 = Clock::now();
    const int64_t t0_ms = WallMs();
    std::vector<uint64_t> churn_ids = SubmitAll(cluster, churn_bodies);
    std::set<uint64_t> mine(churn_ids.begin(), churn_ids.end());
    mine.erase(0);
    double all_placed_s = -1;
    while (Since(t0) < 600 && all_placed_s < 0) {
      if (auto last = LastFirstStartMs(cluster, mine)) all_placed_s = (*last - t0_ms) / 1000.0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double ideal = gpu_seconds / (agents * gpus);
    // Ideal fill: the time to run every job on a perfectly packed cluster,
    // the figure the Slurm harness compares its "all placed" time with.
    std::printf("churn: %d jobs x %s s (%.0f GPU-s; ideal fill %.1f s): all placed in %.2f s (%.2fx ideal)\n",
                churn_jobs, churn_s.c_str(), gpu_seconds, ideal, all_placed_s,
                all_placed_s > 0 ? all_placed_s / ideal : 0);
  }
  cluster.Stop();
  std::filesystem::remove_all(work_dir);
  if (!o.nodes_dir.empty()) std::filesystem::remove_all(o.nodes_dir);
  return 0;
}
