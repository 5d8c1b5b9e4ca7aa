// `tidal sim replay` end to end: a journal written the way the server writes
// it (tests/support/journal_driver.h: every pass step and its markers, world
// edits between steps, each request's records in one store mutation) into a
// real SQLite store replays with zero differences; one tampered or dropped
// engine edit is reported. The scenario has gangs, a priority preemption, an
// inference load surge that returns loaned nodes, a GPU fault and a lost
// node.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/policy_loader.h"
#include "server/store.h"
#include "sim/journal_replay.h"
#include "tests/support/journal_driver.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

using state::EditOrigin;

// Grace 30 s and no minimum runtime, so that a preemption happens within the
// scenario's minutes; co-location reactive, so that a surge returns loans at
// once.
constexpr const char* kPolicyYaml = R"(
templates:
  - name: default
    kinds: []
    tenants: []
    tiers:
      critical: {base: 1000, preemptibility: never, requires_approval: true}
      standard: {base: 500, preemptibility: preemptible}
      experiment: {base: 100, preemptibility: reclaimable}
    fallback_tier: standard
preemption:
  default_grace_s: 30
  min_runtime_s: 0
  min_priority_gap: 1
colocation:
  mode: reactive
  headroom: 0.2
  scale_down_delay_s: 600
backfill: true
)";

Time T(int seconds) { return TimeFromMillis(1'764'489'600'000 + seconds * 1000LL); }

Workload Submitted(uint64_t id, const std::string& name, const config::ClusterConfig& c, const std::string& project,
                   WorkloadKind kind, int pods, int gpus_per_pod, int priority, PreemptibilityClass preemptibility,
                   Time submit) {
  Workload w;
  w.id = WorkloadId(id);
  w.name = name;
  const Project* p = c.FindProject(project);
  EXPECT_NE(p, nullptr) << project;
  w.project = p->id;
  w.tenant = p->tenant;
  w.queue = p->default_queue;
  w.kind = kind;
  w.state = WorkloadState::kPending;
  w.pods = pods;
  w.min_pods = kind == WorkloadKind::kInference ? 1 : pods;
  w.max_pods = kind == WorkloadKind::kInference ? 3 : pods;
  w.gpus_per_pod = gpus_per_pod;
  w.preemptible = preemptibility != PreemptibilityClass::kNever;
  w.expected_duration = hours(2);
  w.submit_time = submit;
  w.training.checkpoint_interval = minutes(10);
  w.inference.replica_capacity_rps = 100;
  w.inference.target_p99 = milliseconds(500);
  w.inference.cold_start = seconds(20);
  w.priority.value = priority;
  w.priority.preemptibility = preemptibility;
  w.priority.template_name = "default";
  w.priority.derivation = {"tier: base " + std::to_string(priority)};
  return w;
}

class JournalReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeScratchDir("journal-replay");
    cluster_yaml_ = testing::SmallClusterYaml(1, 2, 2);  // inf-0 | shr-0 shr-1 | trn-0 trn-1
    auto cluster = ParseClusterText(cluster_yaml_, "cluster");
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = *cluster;
    ASSERT_EQ(cluster_.cluster.nodes.size(), 5u);
    const std::vector<std::string> pools = {"inference-reserved", "shared", "shared", "training", "training"};
    for (size_t n = 0; n < pools.size(); ++n) {
      ASSERT_EQ(cluster_.cluster.pools[cluster_.cluster.nodes[n].pool.value()].name, pools[n]) << n;
    }
    auto policy = ParsePolicyText(kPolicyYaml, "policy");
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    policy_ = *policy;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string store_path() const { return dir_ + "/tidal.db"; }

  // The scenario, journaled into the store request by request.
  void WriteJournal() {
    auto opened = server::OpenStore("sqlite:" + store_path());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<server::Store> store = std::move(*opened);
    // As a server starts: no node is ready until its agent registers.
    testing::JournalDriver d(
        state::State(state::ClusterAwaitingAgents(cluster_.cluster), cluster_.queues, cluster_.projects), policy_);
    uint64_t last = 0;
    bool first = true;
    const auto commit = [&] {
      server::Mutation m;
      m.journal = d.TakeNew();
      if (first) {
        // The server writes the configuration with its first mutation.
        m.meta = {{server::kMetaCluster, cluster_yaml_}, {server::kMetaPolicy, kPolicyYaml}};
        first = false;
      }
      if (!m.empty()) last = store->Enqueue(std::move(m));
    };
    const auto world = [&](Time at, const state::Edit& e) {
      EXPECT_TRUE(d.World(at, e).ok()) << state::EditName(e);
      commit();
    };
    // Nodes in file order: inf 0 | shr 1, 2 | trn 3, 4 (checked in SetUp).
    const auto node = [](uint32_t index) { return NodeId(index); };
    const WorkloadId chat(1), big(2), low(3), urgent(4);
    for (const Node& n : cluster_.cluster.nodes) {
      Node ready = n;
      ready.health = Health::kHealthy;
      world(T(0), state::RegisterNodeEdit{ready, cluster_.cluster.zones, cluster_.cluster.racks});
    }

    world(T(0), state::SubmitEdit{Submitted(1, "chat", cluster_, "online", WorkloadKind::kInference, 1, 8, 1500,
                                            PreemptibilityClass::kNever, T(0))});
    world(T(0), state::SubmitEdit{Submitted(2, "big", cluster_, "research", WorkloadKind::kTraining, 2, 8, 500,
                                            PreemptibilityClass::kPreemptible, T(0))});
    world(T(5), state::SubmitEdit{Submitted(3, "low", cluster_, "research", WorkloadKind::kTraining, 2, 8, 100,
                                            PreemptibilityClass::kReclaimable, T(5))});
    std::map<std::pair<uint32_t, GpuMask>, Time> placed_at;
    std::set<std::pair<uint32_t, GpuMask>> reported;
    for (int t = 10; t <= 1200; t += 10) {
      if (t == 300) {
        world(T(t), state::SubmitEdit{Submitted(4, "urgent", cluster_, "research", WorkloadKind::kTraining, 2, 8,
                                                900, PreemptibilityClass::kPreemptible, T(t))});
      }
      // A GPU fault on the shared node the surge's replicas use: the
      // lifecycle drains it at the next tick (a replica leaves, lifecycle
      // edits rerun and compared by the replay).
      if (t == 700) world(T(t), state::GpuFaultEdit{node(1), 0b1});
      if (t == 770) {
        // A lost node: its agent's last lease holds through 795 s; the
        // lifecycle declares it lost at the pass of 800 s and requeues what
        // ran there (lifecycle edits, rerun and compared by the replay).
        world(T(t), state::LeaseEdit{node(3), T(t) + seconds(25)});
      }
      // Load: low until the surge at 600 s (3 replicas' worth).
      const double rps = t < 600 ? 40 : 280;
      d.Pass(T(t), {{chat, rps}}, [&](protocol::PassPhase after) {
        // An API request between the engine's snapshot and its apply: the
        // replay must apply it at the same point.
        if (after == protocol::PassPhase::kEngineSnapshot && t == 400) {
          EXPECT_TRUE(d.World(T(t), state::CordonEdit{node(2), true}).ok());
        }
      });
      commit();
      // Each of chat's replicas reports ready 30 s after it was placed, as
      // an agent's pod "ready" event does (world edits): the surge's
      // scale-up is judged from them by the lifecycle at a later tick.
      if (const Allocation* a = d.state().allocation(chat)) {
        for (const PodPlacement& p : a->pods) {
          auto [it, fresh] = placed_at.try_emplace(std::make_pair(p.node.value(), p.gpus), T(t));
          if (!fresh && T(t) - it->second >= seconds(30) && reported.insert(it->first).second) {
            world(T(t), state::ReplicaReadyEdit{chat, p, true});
          }
        }
      }
    }
    (void)big;
    (void)low;
    (void)urgent;
    ASSERT_TRUE(store->WaitDurable(last).ok());
    testing::ExpectServerJournalOrder(d.records());
    records_ = static_cast<int64_t>(d.records().size());
    for (const std::string& r : d.records()) {
      if (r.find("\"origin\":\"lifecycle\"") == std::string::npos) continue;
      if (r.find("\"health\":\"not_ready\"") != std::string::npos) ++nodes_lost_;
      if (r.find("\"cause\":\"node_lost\"") != std::string::npos) ++node_lost_requeues_;
      if (r.find("\"edit\":\"scale_up_end\"") != std::string::npos) ++scale_ups_ended_;
      if (r.find("\"edit\":\"shrink\"") != std::string::npos) ++drains_;  // the lifecycle shrinks only to drain
    }
    placements_ = d.placements();
    notices_ = d.notices();
    lends_ = d.lends();
    returns_ = d.returns();
  }
  int nodes_lost_ = 0;
  int node_lost_requeues_ = 0;
  int scale_ups_ended_ = 0;
  int drains_ = 0;

  // What `tidal sim replay` does, in process.
  ReplayReport Replay() {
    auto opened = server::OpenStore("sqlite:" + store_path());
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return {};
    server::Store& store = **opened;
    auto cluster_text = store.ReadMeta(server::kMetaCluster);
    auto policy_text = store.ReadMeta(server::kMetaPolicy);
    EXPECT_TRUE(cluster_text.ok() && cluster_text->has_value());
    EXPECT_TRUE(policy_text.ok() && policy_text->has_value());
    auto cluster = ParseClusterText(**cluster_text, "meta cluster");
    auto policy = ParsePolicyText(**policy_text, "meta policy");
    EXPECT_TRUE(cluster.ok() && policy.ok());
    JournalReplay replay(*cluster, *policy);
    // Small pages: the replay reads across page ends.
    Status s = ReplayStore(store, *cluster, replay, /*page_rows=*/100);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return replay.Finish();
  }

  void ExecOnStore(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(store_path().c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    EXPECT_EQ(sqlite3_changes(db), 1) << sql;
    sqlite3_free(err);
    sqlite3_close(db);
  }

  // Runs build/tidal; exit code and output. Skips when it is not built.
  std::pair<int, std::string> RunTidal(const std::string& args) {
    const char* bin = std::getenv("TIDAL_BINARY_DIR");
    const std::string tidal = std::string(bin != nullptr ? bin : ".") + "/tidal";
    if (!std::filesystem::exists(tidal)) return {-2, tidal + " is not built"};
    FILE* pipe = ::popen((tidal + " " + args + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return {-1, "popen failed"};
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }

  std::string dir_;
  std::string cluster_yaml_;
  config::ClusterConfig cluster_;
  PolicyConfig policy_;
  int64_t records_ = 0;
  int placements_ = 0, notices_ = 0, lends_ = 0, returns_ = 0;
};

TEST_F(JournalReplayTest, AServerStyleJournalReplaysWithoutDifferences) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal());
  // The scenario exercised what it claims to.
  EXPECT_GE(placements_, 3);
  EXPECT_GE(notices_, 1);
  EXPECT_GE(lends_, 1);
  EXPECT_GE(returns_, 1);
  EXPECT_EQ(nodes_lost_, 1);
  EXPECT_GE(node_lost_requeues_, 1);
  EXPECT_GE(scale_ups_ended_, 1);  // the surge's scale-up, judged by the lifecycle
  EXPECT_GE(drains_, 1);  // the GPU fault's node drained by the lifecycle

  const ReplayReport report = Replay();
  EXPECT_EQ(report.records, records_);
  EXPECT_EQ(report.passes, 120);  // one every 10 s from 10 s to 1200 s
  EXPECT_GT(report.compared, 0);
  EXPECT_TRUE(report.refused.empty()) << report.refused.front();
  for (const ReplayDifference& d : report.differences) ADD_FAILURE() << d.ToString();
  EXPECT_EQ(report.journal.placements, placements_);
  EXPECT_EQ(report.replay.placements, placements_);

  auto [rc, out] = RunTidal("sim replay --store sqlite:" + store_path());
  if (rc == -2) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("identical"), std::string::npos) << out;
  EXPECT_NE(out.find("passes replayed: 120"), std::string::npos) << out;
}

TEST_F(JournalReplayTest, ATamperedEngineEditIsReported) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal());
  // The first engine placement claims borrowed capacity it did not borrow
  // (or the reverse): one field of one edit.
  ExecOnStore(
      "UPDATE journal SET entry = CASE WHEN instr(entry, '\"borrowed\":false') > 0 "
      "THEN replace(entry, '\"borrowed\":false', '\"borrowed\":true') "
      "ELSE replace(entry, '\"borrowed\":true', '\"borrowed\":false') END "
      "WHERE seq = (SELECT MIN(seq) FROM journal WHERE entry LIKE '%\"edit\":\"place\"%' "
      "AND entry LIKE '%\"origin\":\"engine\"%')");
  const ReplayReport report = Replay();
  ASSERT_FALSE(report.differences.empty());
  const ReplayDifference& d = report.differences.front();
  EXPECT_EQ(d.phase, "engine_apply");
  EXPECT_NE(d.journaled.find("\"edit\":\"place\""), std::string::npos) << d.ToString();
  EXPECT_NE(d.replayed.find("\"edit\":\"place\""), std::string::npos) << d.ToString();
  EXPECT_NE(d.journaled, d.replayed);

  auto [rc, out] = RunTidal("sim replay --store sqlite:" + store_path());
  if (rc == -2) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("engine_apply: journaled"), std::string::npos) << out;
}

TEST_F(JournalReplayTest, ADroppedEngineEditIsReported) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal());
  ExecOnStore(
      "DELETE FROM journal WHERE seq = (SELECT MAX(seq) FROM journal "
      "WHERE entry LIKE '%\"origin\":\"engine\"%')");
  const ReplayReport report = Replay();
  ASSERT_FALSE(report.differences.empty());
  const ReplayDifference& d = report.differences.front();
  EXPECT_EQ(d.phase, "engine_apply");
  EXPECT_EQ(d.journaled, "") << d.ToString();
  EXPECT_NE(d.replayed, "");
}

TEST_F(JournalReplayTest, UsageErrorsExitTwo) {
  auto [rc, out] = RunTidal("sim replay --store sqlite:" + dir_ + "/missing.db");
  if (rc == -2) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--store"), std::string::npos) << out;
  auto [rc2, out2] = RunTidal("sim replay");
  EXPECT_EQ(rc2, 2) << out2;
}

TEST_F(JournalReplayTest, ADifferentPolicyIsAWhatIf) {
  ASSERT_NO_FATAL_FAILURE(WriteJournal());
  const std::string policy = testing::WriteScratchFile(
      dir_, "static.yaml", std::string(kPolicyYaml).replace(std::string(kPolicyYaml).find("reactive"), 8, "static"));
  auto [rc, out] = RunTidal("sim replay --store sqlite:" + store_path() + " --policy " + policy);
  if (rc == -2) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("what-if"), std::string::npos) << out;
  EXPECT_NE(out.find("placements"), std::string::npos) << out;
  EXPECT_NE(out.find("loans"), std::string::npos) << out;
}

}  // namespace
}  // namespace tidal::sim
