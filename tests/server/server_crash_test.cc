// Durability: kill -9 the server during a burst of submits, restart it, and
// check that every acknowledged workload is there exactly once; retrying the
// unacknowledged ones with their Idempotency-Key applies each at most once.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/support/server_fixture.h"

namespace tidal::testing {
namespace {

using nlohmann::json;

TEST(ServerCrash, AcknowledgedSubmitsSurviveKill9WithoutDuplicates) {
  ServerProcess s;
  std::map<std::string, uint64_t> acked;  // name -> id
  std::set<std::string> unacked;
  int next = 0;
  for (int round = 0; round < 3; ++round) {
    std::mutex mu;
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < 8; ++t) {
      clients.emplace_back([&, t] {
        while (!stop) {
          std::string name;
          {
            std::lock_guard lock(mu);
            name = "w" + std::to_string(next++);
          }
          const json body = {{"name", name}, {"project", "sandbox"}, {"gpus_per_replica", 1}};
          HttpReply r = s.Post("/v1/workloads", kResearchToken, body.dump(), {{"Idempotency-Key", name}});
          std::lock_guard lock(mu);
          if (r.status == 201) {
            acked[name] = r.json()["id"].get<uint64_t>();
          } else {
            unacked.insert(name);  // no reply: it may or may not have applied
          }
        }
      });
      (void)t;
    }
    // Kill once a hundred and fifty submits were acknowledged in this round.
    const size_t target = acked.size() + 150;
    for (int i = 0; i < 400; ++i) {
      {
        std::lock_guard lock(mu);
        if (acked.size() >= target) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    s.Kill(SIGKILL);
    stop = true;
    for (auto& c : clients) c.join();
    ASSERT_TRUE(s.Start()) << "restart " << round;
  }
  ASSERT_GE(acked.size(), 450u);
  // Every acknowledged workload is back, under its id.
  json all = s.Get("/v1/workloads?limit=10000", kAdminToken).json();
  std::map<std::string, int> count;
  std::map<std::string, uint64_t> ids;
  for (const json& w : all["workloads"]) {
    ++count[w["name"]];
    ids[w["name"]] = w["id"];
  }
  for (const auto& [name, id] : acked) {
    EXPECT_EQ(count[name], 1) << name;
    EXPECT_EQ(ids[name], id) << name;
  }
  for (const auto& [name, n] : count) EXPECT_EQ(n, 1) << "duplicate " << name;
  // Retrying an unacknowledged submit with its key applies it at most once.
  for (const std::string& name : unacked) {
    if (acked.count(name)) continue;
    const json body = {{"name", name}, {"project", "sandbox"}, {"gpus_per_replica", 1}};
    HttpReply r = s.Post("/v1/workloads", kResearchToken, body.dump(), {{"Idempotency-Key", name}});
    EXPECT_TRUE(r.status == 201 || r.status == 200) << r.body;
  }
  json after = s.Get("/v1/workloads?limit=10000", kAdminToken).json();
  std::map<std::string, int> count_after;
  for (const json& w : after["workloads"]) ++count_after[w["name"]];
  for (const std::string& name : unacked) EXPECT_EQ(count_after[name], 1) << name;
}

}  // namespace
}  // namespace tidal::testing
