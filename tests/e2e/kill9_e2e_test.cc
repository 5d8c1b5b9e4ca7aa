// kill -9 loop (issue #11): the real server is SIGKILLed at random moments,
// N times, while clients submit and real agents (fake GPUs) run short jobs,
// and restarted on the same store each time. Nothing acknowledged may be
// lost, nothing submitted may exist twice, and no GPU may be held by two
// live pods at once. TIDAL_KILL9_ROUNDS raises N for a longer run
// (docs/RELIABILITY.md has the figures).
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <random>

#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

int Rounds() {
  const char* n = std::getenv("TIDAL_KILL9_ROUNDS");
  return n && std::atoi(n) >= 20 ? std::atoi(n) : 20;
}

TEST_F(E2eTest, KillNineLoopLosesNoAcknowledgedSubmitAndBindsNoGpuTwice) {
  StartCluster(Nodes({"training", "training"}, 4), [](agent::LocalClusterOptions& o) {
    // A server down for a restart must not cost the nodes their lease.
    o.node_lease_s = 10;
  });
  const std::string url = cluster_->url();
  const std::string token = cluster_->admin_token();
  const std::string trainer = Examples() + "/trainer";

  // Each submit has its own idempotency key and name. One that got no reply
  // (the server died mid-request) is retried with the same key until
  // acknowledged: the retry must find the first one, not add a second.
  struct Acked {
    std::string name;
    uint64_t id;
  };
  std::mutex mu;
  std::vector<Acked> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> retries{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < 2; ++t) {
    submitters.emplace_back([&, t] {
      httplib::Client client(url);
      client.set_connection_timeout(2, 0);
      client.set_read_timeout(10, 0);
      for (int i = 0; !stop; ++i) {
        const std::string name = fmt::format("k9-{}-{}", t, i);
        const json body = {{"name", name}, {"kind", "training"}, {"project", "llm"},
                           {"gpus_per_replica", 1 + i % 2}, {"replicas", 1},
                           {"command", {trainer, "--steps", "3", "--step-ms", "20"}}};
        while (true) {
          auto res = client.Post("/v1/workloads",
                                 {{"Authorization", "Bearer " + token}, {"Idempotency-Key", name}},
                                 body.dump(), "application/json");
          if (res && (res->status == 201 || res->status == 200)) {
            const json j = json::parse(res->body, nullptr, false);
            std::lock_guard lock(mu);
            acked.push_back({name, j.value("id", uint64_t{0})});
            break;
          }
          if (res && res->status < 500 && res->status != 429) {
            ADD_FAILURE() << name << ": HTTP " << res->status << " " << res->body;
            return;
          }
          if (stop) return;  // never acknowledged: neither counted nor checked
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        // Pacing, not synchronization: about 10 submits/s per thread keeps
        // the run (and the drain after it) within CTest's budget.
        std::this_thread::sleep_for(std::chrono::milliseconds(80));
      }
    });
  }

  // An ASSERT below returns early: the submitters must stop and be joined
  // first (a joinable std::thread's destructor aborts).
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{stop, submitters};
  std::vector<std::string> twice;
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay_ms(100, 600);
  const int rounds = Rounds();
  for (int round = 0; round < rounds; ++round) {
    // The random moment is the point of the test, not a synchronization.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms(rng));
    while (std::chrono::steady_clock::now() < until) {
      for (auto& s : DoublyBound(Pods())) twice.push_back(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    cluster_->KillServer(SIGKILL);
    Status restarted = cluster_->RestartServer();
    ASSERT_TRUE(restarted.ok()) << "round " << round << ": " << restarted.message();
  }
  stop = true;
  for (auto& t : submitters) t.join();

  // Every acknowledged submit exists under its id and name, and runs to the
  // end once the kills stop.
  std::vector<Acked> done;
  {
    std::lock_guard lock(mu);
    done = acked;
  }
  ASSERT_GT(done.size(), 20u) << "too little load to mean anything";
  int missing = 0;
  for (const Acked& a : done) {
    const json w = Workload(a.id);
    if (w.value("name", "") != a.name) {
      ++missing;
      ADD_FAILURE() << "acknowledged " << a.name << " as " << a.id << ", now " << w.dump();
    }
  }
  EXPECT_TRUE(WaitFor([&] {
    for (auto& s : DoublyBound(Pods())) twice.push_back(s);
    auto list = cluster_->Get("/v1/workloads?limit=10000");
    if (!list.ok()) return false;
    for (const json& w : (*list)["workloads"]) {
      if (w["state"] != "succeeded") return false;
    }
    return true;
  }, 60)) << [&] {
    auto pending = cluster_->Get("/v1/workloads?state=pending");
    return pending.ok() ? pending->dump() : pending.status().message();
  }();

  // No name exists twice: a retried submit found its first copy.
  auto list = cluster_->Get("/v1/workloads?limit=10000");
  ASSERT_TRUE(list.ok()) << list.status().message();
  std::map<std::string, int> copies;
  for (const json& w : (*list)["workloads"]) ++copies[w["name"].get<std::string>()];
  int duplicates = 0;
  for (const auto& [name, n] : copies) {
    if (n > 1) {
      duplicates += n - 1;
      ADD_FAILURE() << name << " exists " << n << " times";
    }
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(duplicates, 0);
  EXPECT_TRUE(twice.empty()) << twice.size() << " double bindings, first: " << twice.front();
  // The figures docs/RELIABILITY.md quotes.
  std::printf("kill9: %d kills, %zu acknowledged submits (%d retried requests), %zu workloads, "
              "missing %d, duplicates %d, GPUs bound twice %zu\n",
              rounds, done.size(), retries.load(), copies.size(), missing, duplicates, twice.size());
}

}  // namespace
}  // namespace tidal::e2e
