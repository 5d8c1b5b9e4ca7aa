// Journal snapshots and compaction: the figures in docs/PERFORMANCE.md
// ("Journal snapshots and compaction"). A real ControlPlane on SQLite, on a
// manual clock, runs a long history with a small live state: N rounds of a
// submit, a cancel of the job submitted three rounds before, a heartbeat
// from every node and a pass. Once without compaction and once with a
// snapshot every 1,000 records; then a restart on the store (Recover) and a
// full `sim replay` of what the store keeps (sim::ReplayStore). Prints the
// journal's rows, the store's size and both times.
//
//   build/dev/bench/compaction_benchmark [--rounds 3000] [--testdata tests/server/testdata]
//
// --testdata: the cluster.yaml and policy.yaml the server runs under (the
// tests' 12-node cluster). Run from the repository root.
//
// (Not a Google Benchmark: each figure is one run of a whole history.)
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "core/common/time.h"
#include "protocol/node_registration.h"
#include "server/control_plane.h"
#include "server/server_config.h"
#include "server/store.h"
#include "sim/journal_replay.h"

namespace {

using tidal::Status;
using tidal::StatusOr;
using tidal::server::ControlPlane;
using tidal::server::Principal;
using tidal::server::Role;

const Principal kAdmin{"admin", Role::kAdmin, ""};
const Principal kAlice{"alice", Role::kUser, "research"};
const Principal kAgent{"node-agent", Role::kAgent, ""};

int Fail(const Status& s) {
  std::fprintf(stderr, "compaction_benchmark: %s\n", s.ToString().c_str());
  return 1;
}

StatusOr<std::unique_ptr<ControlPlane>> Open(const tidal::server::ServerConfig& config,
                                             const tidal::ManualClock& clock) {
  auto store = tidal::server::OpenStore(config.store);
  if (!store.ok()) return store.status();
  auto cp = std::make_unique<ControlPlane>(config, std::move(store).value(), clock);
  TIDAL_RETURN_IF_ERROR(cp->Recover());
  return cp;
}

// The long history: every node registered, then `rounds` rounds.
Status Work(ControlPlane& cp, const tidal::server::ServerConfig& config, tidal::ManualClock& clock, int rounds) {
  for (const tidal::Node& node : config.catalog.cluster.nodes) {
    tidal::protocol::NodeRegistration reg;
    reg.name = node.name;
    TIDAL_RETURN_IF_ERROR(cp.RegisterNode(kAgent, tidal::protocol::NodeRegistrationToJson(reg)).status());
  }
  std::vector<uint64_t> ids;
  for (int i = 0; i < rounds; ++i) {
    auto r = cp.Submit(kAlice, tidal::server::SubmitRequest{{nlohmann::json{
                                   {"name", "m" + std::to_string(i)}, {"project", "vision"}, {"gpus_per_replica", 1 + i % 8}}}});
    if (!r.ok()) return r.status();
    ids.push_back(r->ids[0]);
    if (ids.size() > 3) TIDAL_RETURN_IF_ERROR(cp.Cancel(kAdmin, ids[ids.size() - 4]).status());
    clock.Advance(tidal::seconds(2));
    for (const tidal::Node& node : config.catalog.cluster.nodes) {  // the leases stay fresh
      const Principal agent{"agent:" + node.name, Role::kNode, "", node.name};
      TIDAL_RETURN_IF_ERROR(cp.Heartbeat(agent, node.name, nlohmann::json::object()).status());
    }
    cp.RunPass();
  }
  return Status::Ok();
}

// The rows the store's journal keeps.
StatusOr<int64_t> JournalRows(tidal::server::Store& store) {
  int64_t rows = 0;
  int64_t after = 0;
  while (true) {
    auto page = store.ReadJournal(after, 10000);
    if (!page.ok()) return page.status();
    if (page->empty()) return rows;
    rows += static_cast<int64_t>(page->size());
    after = page->back().seq;
  }
}

// What `tidal sim replay` does: the store's meta configuration, then the
// journal from its latest snapshot.
StatusOr<tidal::sim::ReplayReport> Replay(tidal::server::Store& store) {
  auto cluster_text = store.ReadMeta(tidal::server::kMetaCluster);
  if (!cluster_text.ok()) return cluster_text.status();
  auto policy_text = store.ReadMeta(tidal::server::kMetaPolicy);
  if (!policy_text.ok()) return policy_text.status();
  if (!cluster_text->has_value() || !policy_text->has_value()) {
    return tidal::Internal("the store has no meta cluster or policy");
  }
  auto cluster = tidal::sim::ParseClusterText(**cluster_text, "meta cluster");
  if (!cluster.ok()) return cluster.status();
  auto policy = tidal::sim::ParsePolicyText(**policy_text, "meta policy");
  if (!policy.ok()) return policy.status();
  tidal::sim::JournalReplay replay(*cluster, *policy);
  TIDAL_RETURN_IF_ERROR(tidal::sim::ReplayStore(store, *cluster, replay));
  return replay.Finish();
}

uintmax_t SizeOr0(const std::string& path) {
  return std::filesystem::exists(path) ? std::filesystem::file_size(path) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3000;
  std::string testdata = "tests/server/testdata";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (a == "--testdata") testdata = argv[i + 1];
  }
  for (int64_t every : {int64_t{100'000'000}, int64_t{1'000}}) {
    char tmpl[] = "/tmp/tidal-compaction-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Fail(tidal::Internal("mkdtemp failed"));
    const std::string dir = tmpl;
    const std::string db = dir + "/tidal.db";
    auto config = tidal::server::ParseServerConfig(
        "cluster_file: cluster.yaml\npolicy_file: policy.yaml\nstore: sqlite:" + db +
            "\nsnapshot_every_records: " + std::to_string(every) + "\n",
        "bench.yaml", testdata);
    if (!config.ok()) return Fail(config.status());
    tidal::ManualClock clock;
    clock.Set(tidal::TimeFromMillis(1'764'000'000'000));
    {
      auto cp = Open(*config, clock);
      if (!cp.ok()) return Fail(cp.status());
      if (Status s = Work(**cp, *config, clock, rounds); !s.ok()) return Fail(s);
    }  // closes the store: every write is on disk
    const auto t0 = std::chrono::steady_clock::now();
    {
      auto cp = Open(*config, clock);
      if (!cp.ok()) return Fail(cp.status());
    }
    const double restart_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto store = tidal::server::OpenStore(config->store);
    if (!store.ok()) return Fail(store.status());
    auto rows = JournalRows(**store);
    if (!rows.ok()) return Fail(rows.status());
    const auto t1 = std::chrono::steady_clock::now();
    auto report = Replay(**store);
    if (!report.ok()) return Fail(report.status());
    const double replay_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    store->reset();
    const uintmax_t bytes = SizeOr0(db) + SizeOr0(db + "-wal");
    std::printf("snapshot_every_records=%lld rounds=%d: journal rows %lld, store %.1f MiB, restart %.3f s, "
                "replay %.3f s (from seq %lld, %zu differences)\n",
                static_cast<long long>(every), rounds, static_cast<long long>(*rows), bytes / 1048576.0, restart_s,
                replay_s, static_cast<long long>(report->snapshot_seq), report->differences.size());
    std::filesystem::remove_all(dir);
  }
  return 0;
}
