// In-process unit tests of the server's pieces: token hashing and checks,
// the store's group commit and recovery, the metrics text, report arithmetic,
// and strict submit parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "server/auth.h"
#include "server/metrics.h"
#include "server/process_collector.h"
#include "server/report.h"
#include "server/store.h"
#include "server/workload_codec.h"

namespace tidal::server {
namespace {

TEST(Auth, Sha256MatchesTheStandardVector) {
  // FIPS 180-2 test vector for "abc".
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Auth, TokensAreKnownOnlyByDigest) {
  Authenticator auth;
  ASSERT_TRUE(auth.AddToken(Sha256Hex("s3cret"), {"alice", Role::kUser, "research"}).ok());
  // A request's token is hashed once (BearerTokenDigest); the configured
  // tokens and the nodes' credentials are both looked up by that digest.
  auto header = [&](std::string_view value) -> StatusOr<Principal> {
    TIDAL_ASSIGN_OR_RETURN(const std::string digest, BearerTokenDigest(value));
    return auth.Authenticate(digest);
  };
  auto ok = header("Bearer s3cret");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->name, "alice");
  EXPECT_EQ(*BearerTokenDigest("Bearer s3cret"), Sha256Hex("s3cret"));
  EXPECT_EQ(header("Bearer wrong").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(header("").status().message(), "missing Authorization: Bearer <token> header");
  EXPECT_EQ(header("Basic s3cret").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(header("Bearer ").status().code(), StatusCode::kUnauthenticated);
  // A user token without a tenant, or a malformed digest, is refused.
  EXPECT_FALSE(auth.AddToken(Sha256Hex("x"), {"bob", Role::kUser, ""}).ok());
  EXPECT_FALSE(auth.AddToken("abc", {"carol", Role::kAdmin, ""}).ok());
}

TEST(Auth, TenantAndRoleChecks) {
  const Principal user{"alice", Role::kUser, "research"};
  const Principal admin{"root", Role::kAdmin, ""};
  const Principal agent{"node", Role::kAgent, ""};
  EXPECT_TRUE(CheckTenantAccess(user, "research").ok());
  EXPECT_EQ(CheckTenantAccess(user, "ads").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(CheckTenantAccess(admin, "ads").ok());
  EXPECT_EQ(CheckTenantAccess(agent, "research").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(RequireRole(user, {Role::kAdmin}).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(RequireRole(agent, {Role::kAgent, Role::kAdmin}).ok());
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tidal-store-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string url() const { return "sqlite:" + dir_ + "/t.db"; }
  std::string dir_;
};

TEST_F(StoreTest, ConcurrentMutationsCommitInOrderAndSurviveReopen) {
  {
    auto store = OpenStore(url());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          const uint64_t id = t * 100 + i + 1;
          Mutation m;
          m.workloads.emplace_back(id, "{\"v\":" + std::to_string(id) + "}");
          m.idempotency.push_back({"k" + std::to_string(id), id});
          const uint64_t seq = (*store)->Enqueue(std::move(m));
          ASSERT_TRUE((*store)->WaitDurable(seq).ok());
        }
      });
    }
    for (auto& th : threads) th.join();
    // 400 mutations; concurrent waiters share transactions.
    EXPECT_EQ((*store)->committed_mutations(), 400u);
    EXPECT_LE((*store)->commits(), 400u);
  }
  auto reopened = OpenStore(url());
  ASSERT_TRUE(reopened.ok());
  auto rec = (*reopened)->Load();
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->workloads.size(), 400u);
  EXPECT_EQ(rec->idempotency.size(), 400u);
  EXPECT_EQ(rec->workloads.front().first, 1u);
  EXPECT_EQ(rec->workloads.front().second, "{\"v\":1}");
}

TEST_F(StoreTest, AuditIsAppendOnlyAndQueryable) {
  auto store = OpenStore(url());
  ASSERT_TRUE(store.ok());
  Mutation m;
  m.audit.push_back({1, 1000, "alice", "admit", 7, "research", "vision", "{}"});
  m.audit.push_back({2, 2000, "scheduler", "place", 7, "research", "vision", "{\"wait_s\":1}"});
  m.audit.push_back({3, 3000, "bob", "admit", 8, "ads", "ads-ranking", "{}"});
  ASSERT_TRUE((*store)->WaitDurable((*store)->Enqueue(std::move(m))).ok());
  AuditQuery q;
  q.workload = 7;
  auto rows = (*store)->QueryAudit(q);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].action, "place");
  AuditQuery by_tenant;
  by_tenant.tenant = "ads";
  EXPECT_EQ((*store)->QueryAudit(by_tenant)->size(), 1u);
  AuditQuery range;
  range.from_ms = 1500;
  range.to_ms = 2500;
  EXPECT_EQ((*store)->QueryAudit(range)->size(), 1u);
  EXPECT_EQ((*store)->Load()->last_audit_seq, 3);
}

TEST(Store, RejectsUnknownUrls) {
  EXPECT_EQ(OpenStore("etcd://x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("sqlite:").status().code(), StatusCode::kInvalidArgument);
}

TEST(Metrics, RendersCountersAndCumulativeHistograms) {
  Metrics m;
  m.DefineCounter("tidal_x_total", "X.");
  m.DefineHistogram("tidal_y_seconds", "Y.", {1, 5});
  m.Inc("tidal_x_total", {{"queue", "a"}}, 2);
  m.Observe("tidal_y_seconds", {}, 0.5);
  m.Observe("tidal_y_seconds", {}, 3);
  m.Observe("tidal_y_seconds", {}, 10);
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE tidal_x_total counter\ntidal_x_total{queue=\"a\"} 2\n"), std::string::npos) << text;
  // Buckets are cumulative: <=1: 1, <=5: 2, +Inf: 3; sum 0.5 + 3 + 10 = 13.5.
  EXPECT_NE(text.find("tidal_y_seconds_bucket{le=\"1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_y_seconds_bucket{le=\"5\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_y_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_y_seconds_sum 13.5\n"), std::string::npos) << text;
  EXPECT_EQ(FormatLabels({{"k", "a\"b"}}), "{k=\"a\\\"b\"}");
}

// A series declared up front is exported at 0 before its first event, so
// that Prometheus' increase() sees the event (a series born at 1 shows none).
TEST(Metrics, DeclaredSeriesAreExportedAtZero) {
  Metrics m;
  m.DefineCounter("tidal_x_total", "X.", {{{"result", "ok"}}, {{"result", "failed"}}});
  m.DefineCounter("tidal_lost_total", "L.", {{}});
  m.DefineCounter("tidal_by_node_total", "N.");
  m.DefineHistogram("tidal_y_seconds", "Y.", {1}, {{}});
  m.Zero("tidal_by_node_total", {{"node", "n1"}});
  m.Zero("tidal_by_node_total", {{"node", "n1"}});  // twice: still one series
  const std::string text = m.Render();
  EXPECT_NE(text.find("tidal_x_total{result=\"failed\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_x_total{result=\"ok\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_lost_total 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_by_node_total{node=\"n1\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_y_seconds_count 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_build_info{"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_open_fds gauge"), std::string::npos) << text;
  m.Inc("tidal_by_node_total", {{"node", "n1"}});
  EXPECT_NE(m.Render().find("tidal_by_node_total{node=\"n1\"} 1\n"), std::string::npos);
}

// A figure that does not exist (NaN) is no sample; counters keep their type.
TEST(Metrics, GaugeWriterLeavesOutNaNAndTypesCounters) {
  GaugeWriter g;
  g.Family("tidal_p99_seconds", "P.");
  g.Family("tidal_commits_total", "C.", prometheus::MetricType::Counter);
  g.Sample("tidal_p99_seconds", {{"workload", "idle"}}, NAN);
  g.Sample("tidal_p99_seconds", {{"workload", "busy"}}, 0.25);
  g.Sample("tidal_commits_total", {}, 7);
  const std::string text = g.Render();
  EXPECT_EQ(text.find("idle"), std::string::npos) << text;
  EXPECT_NE(text.find("tidal_p99_seconds{workload=\"busy\"} 0.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE tidal_commits_total counter\ntidal_commits_total 7\n"), std::string::npos) << text;
}

TEST(ProcessCollector, ParsesProcStat) {
  // A command name with a space and a ')' in it; utime 250 + stime 50 ticks
  // at 100 a second = 3 s; started 1000 ticks = 10 s after a boot at
  // 1,700,000,000; 4096 resident pages of 4 KiB = 16 MiB.
  const std::string stat =
      "1234 (tidal s)rv) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 12 0 1000 "
      "1073741824 4096 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
  const auto s = ParseProcStat(stat, 100, 1.7e9, 4096);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 3);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1.7e9 + 10);
  EXPECT_DOUBLE_EQ(s->resident_memory_bytes, 16.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(s->virtual_memory_bytes, 1073741824);
  EXPECT_FALSE(ParseProcStat("garbage", 100, 0, 4096).has_value());
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 2", 100, 0, 4096).has_value());
  // The collector reads this process: it has run and holds memory.
  std::string names;
  for (const auto& f : ProcessCollector().Collect()) names += f.name + " ";
  EXPECT_NE(names.find("process_start_time_seconds"), std::string::npos) << names;
  EXPECT_NE(names.find("process_max_fds"), std::string::npos) << names;
}

TEST(Report, PercentileInterpolates) {
  // Sorted {1, 2, 3, 4}: p50 rank 1.5 -> 2.5; p100 -> 4; p0 -> 1.
  // Nearest rank, as the simulator's summary: p50 of 4 values is the
  // ceil(0.5 x 4) = 2nd smallest, a value that occurred.
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0.50), 2);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 1.00), 4);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.99), 0);
}

TEST(Report, OverlapCountsOnlyTheRange) {
  // Run [1000, 5000) ms on 2 GPUs, range [2000, 10000): 3 s x 2 = 6 GPU-s.
  EXPECT_DOUBLE_EQ(OverlapGpuSeconds(1000, 5000, 2, 2000, 10000), 6);
  EXPECT_DOUBLE_EQ(OverlapGpuSeconds(1000, 5000, 2, 6000, 10000), 0);
}

// One project "p" of tenant "t" with default queue "q".
Catalog OneProjectCatalog() {
  Catalog c;
  c.queues.push_back(Queue{});
  c.queues[0].id = QueueId(0);
  c.queues[0].name = "q";
  c.projects.push_back(Project{ProjectId(0), "p", "t", "standard", QueueId(0)});
  c.Index();
  return c;
}

TEST(SubmitParsing, DefaultsAndBounds) {
  const Catalog cat = OneProjectCatalog();
  const Time now = TimeFromMillis(1'000'000);
  auto spec = ParseSubmit({{"name", "x"}, {"gpus_per_replica", 8}, {"replicas", 4}}, cat, "p", now);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->record.w.kind, WorkloadKind::kTraining);  // the server's default kind
  EXPECT_EQ(spec->record.w.min_pods, 4);  // training: rigid gang
  EXPECT_EQ(spec->record.w.max_pods, 4);
  EXPECT_EQ(spec->record.w.tenant, "t");  // from the project
  auto inf = ParseSubmit({{"name", "s"}, {"kind", "inference"}, {"replicas", 3}, {"replica_capacity_rps", 10}},
                         cat, "p", now);
  ASSERT_TRUE(inf.ok()) << inf.status().ToString();
  EXPECT_EQ(inf->record.w.min_pods, 1);  // inference: replicas are independent
  // min_replicas alone sets the starting size.
  auto min_only = ParseSubmit({{"name", "e"}, {"min_replicas", 2}, {"max_replicas", 6}}, cat, "p", now);
  ASSERT_TRUE(min_only.ok()) << min_only.status().ToString();
  EXPECT_EQ(min_only->record.w.pods, 2);
  // deadline_s counts from the submission: 1,000 s + 600 s.
  auto batch = ParseSubmit({{"name", "b"}, {"kind", "batch_inference"}, {"deadline_s", 600}}, cat, "p", now);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(ToMillis(batch->record.w.batch.deadline), 1'600'000);
  // Under 10 minutes away it is a priority lever, not a deadline.
  auto soon = ParseSubmit({{"name", "b"}, {"kind", "batch_inference"}, {"deadline_s", 599}}, cat, "p", now);
  EXPECT_EQ(soon.status().message().rfind("deadline_s: expected at least 600 s", 0), 0u) << soon.status().message();
  auto big = ParseSubmit({{"name", "x"}, {"gpus_per_replica", 64}, {"replicas", 65}}, cat, "p", now);
  ASSERT_FALSE(big.ok());
  // 65 x 64 = 4160 GPUs > 4096.
  EXPECT_EQ(big.status().message().rfind("replicas:", 0), 0u) << big.status().message();
  auto prio = ParseSubmit({{"name", "x"}, {"priority", 1}}, cat, "p", now);
  EXPECT_EQ(prio.status().message().rfind("priority:", 0), 0u);
  auto at = ParseSubmit({{"name", "x"}, {"submit_at_s", 5}}, cat, "p", now);
  EXPECT_EQ(at.status().message().rfind("submit_at_s:", 0), 0u) << at.status().message();
  // Readiness port 0: no fixed port (the agent picks one); 65536 is refused.
  auto port0 = ParseSubmit({{"name", "s"}, {"kind", "inference"}, {"replica_capacity_rps", 5},
                            {"readiness", {{"port", 0}, {"path", "/ready"}}}}, cat, "p", now);
  ASSERT_TRUE(port0.ok()) << port0.status().ToString();
  EXPECT_EQ(port0->record.run.readiness->port, 0);
  auto bad_port = ParseSubmit({{"name", "s"}, {"readiness", {{"port", 65536}}}}, cat, "p", now);
  EXPECT_EQ(bad_port.status().message().rfind("readiness.port:", 0), 0u) << bad_port.status().message();
  EXPECT_EQ(MaskToIndices(0b1011), (std::vector<int>{0, 1, 3}));
}

TEST(RecordCodec, StoredFormIsCompactAndRoundTrips) {
  const Catalog cat = OneProjectCatalog();
  auto spec = ParseSubmit({{"name", "x"}, {"kind", "training"}, {"checkpoint_interval_s", 600},
                           {"deadline_s", 1000}, {"labels", {{"k", "v"}}}},
                          cat, "p", TimeFromMillis(5000));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  WorkloadRecord r = spec->record;
  r.w.id = WorkloadId(7);
  r.attempt = 3;
  r.w.top_tier_approved = true;
  r.w.requeues = 2;
  r.w.submit_time = TimeFromMillis(9000);  // a requeue moves the submit time
  nlohmann::json stored = RecordToStoredJson(r, cat);
  // Defaults are left out of the stored form but kept in the API form.
  EXPECT_FALSE(stored.contains("env"));
  EXPECT_FALSE(stored.contains("runs"));
  EXPECT_FALSE(stored.contains("wait"));
  EXPECT_TRUE(RecordToJson(r, cat, /*wait=*/nullptr).contains("env"));
  EXPECT_TRUE(RecordToJson(r, cat, /*wait=*/nullptr)["wait"].is_null());
  const WaitDecision wait{WorkloadId(7), ReasonCode::kQuota, "quota: over the guarantee", std::nullopt};
  EXPECT_EQ(RecordToJson(r, cat, &wait)["wait"]["detail"], "quota: over the guarantee");
  auto back = RecordFromJson(stored, cat);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->w.id, WorkloadId(7));
  EXPECT_EQ(back->attempt, 3);
  EXPECT_TRUE(back->w.top_tier_approved);
  EXPECT_EQ(back->w.requeues, 2);
  EXPECT_EQ(back->run.labels.at("k"), "v");
  EXPECT_EQ(ToSeconds(back->w.training.checkpoint_interval), 600);
  // The deadline stays absolute (5 s + 1000 s), not relative to the new submit time.
  EXPECT_EQ(ToMillis(back->w.batch.deadline), 1'005'000);
}

// Every field of a record away from its default, doubles with whole values
// (5.0 prints "5.0", an int "5": a field written with the wrong type shows),
// and strings that need escaping.
WorkloadRecord EveryFieldRecord(WorkloadKind kind) {
  WorkloadRecord r;
  Workload& w = r.w;
  w.id = WorkloadId(42);
  w.kind = kind;
  w.name = "n\"ame\xc3\xbc";
  w.tenant = "t";
  w.project = ProjectId(0);
  w.queue = QueueId(0);
  w.state = WorkloadState::kRunning;
  w.gpus_per_pod = 2;
  w.pods = 3;
  w.min_pods = 1;
  w.max_pods = 5;
  w.expected_duration = seconds(3600);
  w.preemptible = true;
  w.submit_time = TimeFromMillis(1'000);
  w.batch.deadline = TimeFromMillis(901'000);
  w.training.checkpoint_interval = seconds(600);
  w.training.checkpoint_on_request = seconds(30);
  w.inference.target_p99 = milliseconds(250);
  w.inference.replica_capacity_rps = 40;
  w.inference.cold_start = seconds(180);
  w.inference.model_size_gib = 14;
  w.inference.model_source = ModelSource::kLocalCache;
  w.debug.max_runtime = seconds(7200);
  w.constraints.required_gpu_models = {"H100"};
  w.constraints.preferred_gpu_models = {"A100", "H100"};
  w.constraints.node_selector = {{"zone", "a"}, {"disk", "nvme"}};
  w.constraints.tolerations = {Taint{"gpu", "reserved"}};
  w.constraints.topology = {TopologyLevel::kNode, true};
  w.priority = Priority{};
  w.priority.value = 700;
  w.priority.template_name = "standard";
  w.priority.derivation = {"tier standard: 500", "deadline: +200"};
  w.priority.resume_bonus = 3;
  w.priority.borrowing_start_delta = -2;
  w.top_tier_approved = true;
  w.requeues = 2;
  w.spare_pods = 1;
  r.run.image = "img:1";
  r.run.dataset = "ds";
  r.run.model_version = "v2";
  r.run.command = {"python", "train.py", "--tab\t"};
  r.run.env = {{"A", "1"}, {"B", "\xc3\xa9"}};
  r.run.labels = {{"team", "nlp"}};
  r.run.readiness = Endpoint{8080, "/ready"};
  r.run.load_endpoint = Endpoint{0, "/load"};
  r.run.budget_gpu_hours = 100;
  r.submitted_by = "user:alice";
  r.request_digest = "fnv1a64:00ff";
  Allocation a;
  a.workload = w.id;
  a.pods = {{NodeId(0), GpuMask{0b0011}}, {NodeId(1), GpuMask{0b1100}}};
  a.leaving = {{NodeId(1), GpuMask{0b1100}}};
  a.start_time = TimeFromMillis(2'000);
  a.last_checkpoint = TimeFromMillis(3'000);
  a.borrowed = true;
  a.terminating = true;
  a.grace_deadline = TimeFromMillis(4'000);
  r.allocation = a;
  r.stop = StopNotice{"priority", 5'000, 6'000, true};
  r.shrink_notice = StopNotice{"shrink", 5'500, 6'500, false};
  r.exited_ranks = {0, 2};
  r.ready_ranks = {1};
  r.pod_started_ms = 2'100;
  r.attempt = 4;
  if (KeepsRanks(kind)) {  // replicas that kept their ranks while others left
    r.pod_ranks = {5, 2};
    r.next_rank = 6;
  }
  r.rejected = RejectDecision{w.id, ReasonCode::kCapacity, "too large"};
  r.runs = {{2'000, 3'000, 6, true, "preempted", "H100-80GB"}, {4'000, 0, 6, false, "", ""}};
  PreemptionRecord p;
  p.time_ms = 5'000;
  p.audit_seq = 17;
  p.cause = "priority";
  p.preemptor = 43;
  p.lost_gpu_seconds = 1200;
  p.recovery_s = 60;
  p.agent_notice_ms = 5'010;
  p.exit_ms = 5'900;
  p.killed_at_deadline = true;
  p.checkpointed_in_time = true;
  p.exited_pods = 3;
  r.preemptions = {p};
  ScaleUp judged{7'000, 2, 4, 7'500, 8'000, 30, true, "capacity", "victims in grace 30 s", true};
  ScaleUp open{9'000, 4, 5, 0, 0, 0, false, "", "", false};
  r.scale_ups = {judged, open};
  r.finish_time_ms = 10'000;
  r.first_start_ms = 2'000;
  r.queued_ms = 1'500;
  r.utilization = 1;
  r.load_rps = 80;
  r.p95_ms = 100;
  r.p99_ms = 200;
  r.slo_samples = 10;
  r.slo_met = 9;
  r.slo_miss_s_by_cause[0] = 30;
  r.slo_miss_s_by_cause[diagnosis::kMissCauseCount - 1] = 2.5;
  r.gang_start_failures = 1;
  return r;
}

// OneProjectCatalog with the nodes EveryFieldRecord's pods are on.
Catalog TwoNodeCatalog() {
  Catalog cat = OneProjectCatalog();
  for (const char* name : {"node-a", "node-b"}) {
    Node n;
    n.id = NodeId(static_cast<NodeId::Rep>(cat.cluster.nodes.size()));
    n.name = name;
    cat.cluster.nodes.push_back(n);
  }
  cat.Index();
  return cat;
}

// A replica's rank is part of its agent's pod key: a restarted server that
// numbered the replicas afresh would have their agents restart them.
TEST(RecordCodec, AServicesReplicasKeepTheirRanksAcrossARestart) {
  const Catalog cat = TwoNodeCatalog();
  const WorkloadRecord service = EveryFieldRecord(WorkloadKind::kInference);
  auto back = RecordFromJson(RecordToStoredJson(service, cat), cat);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pod_ranks, (std::vector<int>{5, 2}));
  EXPECT_EQ(back->next_rank, 6);
  EXPECT_EQ(back->RankOf(1), 2);
  EXPECT_EQ(back->PodOfRank(5), 0u);
  EXPECT_EQ(back->PodOfRank(0), std::nullopt);
  // The leaving pod (node-b's) is written with its rank in the allocation.
  EXPECT_EQ(RecordToStoredJson(service, cat)["allocation"]["leaving"][0]["rank"], 2);

  // Ranks that do not hold together (twice the same; a record written before
  // ranks were kept gives each pod its place) number the pods by place.
  nlohmann::json twice = RecordToStoredJson(service, cat);
  twice["allocation"]["pods"][1]["rank"] = 5;
  back = RecordFromJson(twice, cat);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->pod_ranks.empty());
  EXPECT_EQ(back->RankOf(1), 1);

  // A job's ranks are always its pods' places, whatever a record says.
  WorkloadRecord job = EveryFieldRecord(WorkloadKind::kTraining);
  nlohmann::json stored = RecordToStoredJson(job, cat);
  EXPECT_EQ(stored["allocation"]["pods"][1]["rank"], 1);
  EXPECT_FALSE(stored.contains("next_rank"));
  stored["allocation"]["pods"][0]["rank"] = 9;
  back = RecordFromJson(stored, cat);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->RankOf(0), 0);
}

TEST(RecordCodec, TextIsTheTreesDumpByteForByte) {
  const Catalog cat = TwoNodeCatalog();
  const WaitDecision estimated{WorkloadId(42), ReasonCode::kQuota, "quota: over", TimeFromMillis(60'000)};
  const WaitDecision unknown{WorkloadId(42), ReasonCode::kGang, "gang: 3 of 4", std::nullopt};
  for (WorkloadKind kind : {WorkloadKind::kTraining, WorkloadKind::kInference, WorkloadKind::kBatchInference,
                            WorkloadKind::kDebug}) {
    WorkloadRecord full = EveryFieldRecord(kind);
    // A fresh submit: every server field at its default.
    WorkloadRecord bare;
    bare.w.id = WorkloadId(1);
    bare.w.kind = kind;
    bare.w.name = "b";
    for (const WorkloadRecord* r : {&full, &bare}) {
      SCOPED_TRACE(fmt::format("{} {}", WorkloadKindName(kind), r->w.name));
      EXPECT_EQ(RecordToStoredText(*r, cat), RecordToStoredJson(*r, cat).dump());
      for (const WaitDecision* wait : {static_cast<const WaitDecision*>(nullptr), &estimated, &unknown}) {
        EXPECT_EQ(RecordToText(*r, cat, wait), RecordToJson(*r, cat, wait).dump());
      }
    }
  }
}

TEST_F(StoreTest, ASecondStoreOnTheSamePathIsRefusedWhileTheFirstIsOpen) {
  auto first = OpenStore(url());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = OpenStore(url());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another tidal server"), std::string::npos)
      << second.status().message();
  // Closing the first frees the store.
  first->reset();
  EXPECT_TRUE(OpenStore(url()).ok());
}

}  // namespace
}  // namespace tidal::server
