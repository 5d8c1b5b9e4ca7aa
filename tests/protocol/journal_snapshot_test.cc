// The journal snapshot codec is lossless: a state with running, terminating
// (with every notice field set) and shrinking work, accrued project spend
// and registrations encodes to text that decodes and restores to the same
// state: it re-encodes to the same text, and the restored state then goes on
// exactly as the original (the same edit applies alike, spend accrues to the
// same bits). A torn, garbled or foreign snapshot is refused, naming why.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/colocation/colocation_controller.h"
#include "protocol/journal_snapshot.h"
#include "tests/support/cluster_builder.h"

namespace tidal::protocol {
namespace {

using namespace tidal::state;
using testing::GpuRange;

Time T(int seconds) { return TimeFromMillis(1'764'489'600'000 + seconds * 1000LL); }

class JournalSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = testing::SimpleCluster(2, 2);  // 4 nodes x 8 GPUs, queue 0
    Project p;
    p.id = ProjectId(0);
    p.name = "research";
    p.tenant = "lab";
    p.tier = "standard";
    p.default_queue = QueueId(0);
    p.used_gpu_hours = 1.0 / 3.0;  // not a round number: spend must keep every bit
    base_.projects = {p};
    base_.cluster.nodes[3].health = Health::kNotReady;
    base_.cluster.nodes[2].failed_gpus = 0b1000'0000;
    base_.cluster.nodes[2].health = Health::kDegraded;
    base_.cluster.nodes[1].cordoned = true;
    base_.cluster.nodes[0].labels = {{"fabric", "ib"}};
  }

  Snapshot base_;
  const std::vector<bool> registered_ = {true, false, true};
};

TEST_F(JournalSnapshotTest, RoundTripRestoresTheSameState) {
  State s(base_.cluster, base_.queues, base_.projects);
  s.AdvanceTo(T(0));
  for (uint64_t id = 1; id <= 3; ++id) {
    Workload w = testing::Job(id, QueueId(0), 1, 4, hours(1), 500, T(0));
    w.project = ProjectId(0);
    w.tenant = "lab";
    ASSERT_TRUE(s.Apply(SubmitEdit{w}).ok());
  }
  Workload pending = testing::Job(9, QueueId(0), 1, 2, hours(1), 100, T(1));
  pending.project = ProjectId(0);
  ASSERT_TRUE(s.Apply(SubmitEdit{pending}).ok());
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 4)}}, false}).ok());
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(2), {{NodeId(0), GpuRange(4, 4)}}, true}).ok());
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(3), {{NodeId(2), GpuRange(0, 4)}}, false}).ok());
  s.AdvanceTo(T(77));
  ASSERT_TRUE(s.Apply(NoticeEdit{WorkloadId(2), WorkloadId(9), PreemptCause::kReclaim, T(107), 123.25, false}).ok());
  ASSERT_TRUE(s.Apply(CheckpointEdit{WorkloadId(1), T(60)}).ok());
  s.AdvanceTo(T(91));
  ASSERT_NE(s.stop(WorkloadId(2)), nullptr);

  const std::string text = JournalSnapshotToText(SnapshotOf(1234, s, registered_));
  auto decoded = JournalSnapshotFromText(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->seq, 1234);
  EXPECT_EQ(decoded->registered, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(JournalSnapshotToText(*decoded), text);  // canonical

  auto restored = RestoreState(*decoded, base_.cluster, base_.queues, base_.projects);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  ASSERT_TRUE(restored->CheckInvariants().ok());
  EXPECT_EQ(JournalSnapshotToText(SnapshotOf(1234, *restored, registered_)), text);
  const StopNotice* stop = restored->stop(WorkloadId(2));
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->cause, PreemptCause::kReclaim);
  EXPECT_EQ(stop->preemptor, WorkloadId(9));
  EXPECT_EQ(stop->notice_time, T(77));
  EXPECT_EQ(stop->grace_deadline, T(107));
  EXPECT_EQ(stop->lost_gpu_seconds, 123.25);
  EXPECT_FALSE(stop->requeue);

  // Both go on alike: spend accrues to the same bits, an edit applies alike.
  State& r = *restored;
  for (State* st : {&s, &r}) {
    st->AdvanceTo(T(3001));
    ASSERT_TRUE(st->Apply(RequeueEdit{WorkloadId(2)}).ok());
    st->AdvanceTo(T(7777));
  }
  EXPECT_EQ(r.snapshot().projects[0].used_gpu_hours, s.snapshot().projects[0].used_gpu_hours);
  EXPECT_EQ(JournalSnapshotToText(SnapshotOf(5, r, registered_)), JournalSnapshotToText(SnapshotOf(5, s, registered_)));
}

TEST_F(JournalSnapshotTest, ShrinkingPodsAndTheirDeadlineSurvive) {
  State s(base_.cluster, base_.queues, base_.projects);
  Workload w = testing::Job(5, QueueId(0), 2, 4, hours(1), 500, T(0));
  w.project = ProjectId(0);
  w.min_pods = 1;
  w.max_pods = 2;
  ASSERT_TRUE(s.Apply(SubmitEdit{w}).ok());
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(5), {{NodeId(0), GpuRange(0, 4)}, {NodeId(0), GpuRange(4, 4)}}, false}).ok());
  ASSERT_TRUE(s.Apply(ShrinkEdit{WorkloadId(5), {{NodeId(0), GpuRange(4, 4)}}, WorkloadId(), T(40)}).ok());
  ASSERT_EQ(s.leaving_deadline(WorkloadId(5)), T(40));
  auto decoded = JournalSnapshotFromText(JournalSnapshotToText(SnapshotOf(9, s, {})));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  auto restored = RestoreState(*decoded, base_.cluster, base_.queues, base_.projects);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->leaving_deadline(WorkloadId(5)), T(40));
  ASSERT_EQ(restored->allocation(WorkloadId(5))->leaving.size(), 1u);
}

// A service's ready replicas and its pending scale-up (the Lifecycle's
// scale-up timer reads them) survive, so a replay from the snapshot judges
// the scale-up as the server did.
TEST_F(JournalSnapshotTest, ReadyReplicasAndAPendingScaleUpSurvive) {
  State s(base_.cluster, base_.queues, base_.projects);
  s.AdvanceTo(T(0));
  Workload w = testing::Job(6, QueueId(0), 2, 1, Duration(0), 500, T(0));
  w.kind = WorkloadKind::kInference;
  w.project = ProjectId(0);
  ASSERT_TRUE(s.Apply(SubmitEdit{w}).ok());
  const PodPlacement a{NodeId(0), GpuRange(0, 1)}, b{NodeId(0), GpuRange(1, 1)};
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(6), {a, b}, false}).ok());
  ASSERT_TRUE(s.Apply(ReplicaReadyEdit{WorkloadId(6), b}).ok());
  s.AdvanceTo(T(30));
  ASSERT_TRUE(s.Apply(SetTargetEdit{WorkloadId(6), 4}).ok());  // a scale-up from 2 to 4 at T(30)
  const std::string text = JournalSnapshotToText(SnapshotOf(9, s, {}));
  auto decoded = JournalSnapshotFromText(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(JournalSnapshotToText(*decoded), text);  // canonical
  auto restored = RestoreState(*decoded, base_.cluster, base_.queues, base_.projects);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->ready_replicas(WorkloadId(6)), 1);
  EXPECT_EQ(restored->snapshot().allocations[0].pods, (std::vector<PodPlacement>{a, b}));
  const PendingScaleUp* su = restored->scale_up(WorkloadId(6));
  ASSERT_NE(su, nullptr);
  EXPECT_EQ(su->from, 2);
  EXPECT_EQ(su->to, 4);
  EXPECT_EQ(su->requested_at, T(30));
  EXPECT_EQ(su->ready_at, kInfiniteFuture);
  // Written before the two were kept (no "ready", no "scale_ups"): still
  // read, with none.
  nlohmann::json old = nlohmann::json::parse(text);
  old.erase("scale_ups");
  old["allocations"][0].erase("ready");
  auto legacy = JournalSnapshotFromJson(old);
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_TRUE(legacy->scale_ups.empty());
  EXPECT_TRUE(legacy->allocation_extras[0].ready.empty());
}

// The text is written without building the whole tree (the server's
// snapshot thread), and is byte for byte the tree's dump: running,
// terminating, shrinking and pending work, names that need escaping, every
// small list filled.
TEST_F(JournalSnapshotTest, TextIsTheTreeDumpByteForByte) {
  State s(base_.cluster, base_.queues, base_.projects);
  s.AdvanceTo(T(0));
  const std::vector<std::string> names = {"plain", "qu\"ote\\slash", "tab\tnewline\n", "\u00e9t\u00e9-\u4e2d"};
  for (uint64_t id = 1; id <= 4; ++id) {
    Workload w = testing::Job(id, QueueId(0), 2, 2, hours(1), 100 * static_cast<int>(id), T(0));
    w.project = ProjectId(0);
    w.name = names[id - 1];
    w.tenant = "lab";
    w.min_pods = 1;
    w.max_pods = 2;
    w.constraints.node_selector = {{"fabric", "ib"}};
    w.constraints.tolerations = {{"dedicated", "x"}};
    w.constraints.preferred_gpu_models = {"H100"};
    w.priority.derivation = {"tier gold: 1000", "budget \u00d70.5"};
    w.inference.replica_capacity_rps = 12.5;
    ASSERT_TRUE(s.Apply(SubmitEdit{w}).ok());
  }
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 2)}, {NodeId(0), GpuRange(2, 2)}}, false}).ok());
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(2), {{NodeId(2), GpuRange(0, 2)}, {NodeId(2), GpuRange(2, 2)}}, true}).ok());
  s.AdvanceTo(T(50));
  ASSERT_TRUE(s.Apply(ShrinkEdit{WorkloadId(1), {{NodeId(0), GpuRange(2, 2)}}, WorkloadId(), T(80)}).ok());
  ASSERT_TRUE(s.Apply(NoticeEdit{WorkloadId(2), WorkloadId(3), PreemptCause::kReclaim, T(90), 1.0 / 3.0, true}).ok());
  const JournalSnapshot snapshot = SnapshotOf(77, s, registered_);
  ASSERT_EQ(snapshot.workloads.size(), 4u);
  ASSERT_EQ(snapshot.allocations.size(), 2u);
  EXPECT_EQ(JournalSnapshotToText(snapshot), JournalSnapshotToJson(snapshot).dump());
  EXPECT_EQ(JournalSnapshotToText(JournalSnapshot{}), JournalSnapshotToJson(JournalSnapshot{}).dump());
}

// Issue #9: the co-location controller's memory rides in the snapshot and
// comes back equal, every double to the bit: a controller that observed a
// day and a half of load (profiles folded, a level moved, an open cell, the
// last hour), scaled a service up and lent nodes. A restored controller then
// forecasts and plans as the original. A series whose profile does not fit
// the forecaster's buckets is refused on restore, and a garbled figure names
// its field.
TEST_F(JournalSnapshotTest, TheColocationControllersMemoryRoundTrips) {
  PolicyConfig policy;
  ColocationController controller(policy);
  const WorkloadId chat(5);
  for (int minute = 0; minute < 36 * 60; minute += 3) {
    const double rps = 20 + 60 * ((minute / 60) % 24 == 12) + 0.1 * (minute % 7) / 3.0;
    controller.ObserveLoad(chat, T(minute * 60), rps);
  }
  ColocationMemory memory = controller.memory();
  ASSERT_EQ(memory.load.size(), 1u);
  ASSERT_GT(memory.load.at(chat).cell_count, 0) << "the open cell is part of the memory";
  ASSERT_FALSE(memory.load.at(chat).issued.empty()) << "the short forecasts still to score are too";
  memory.load.at(chat).margin = 1.5;  // as if the load had just outrun the forecast
  memory.scaling[chat] = ServiceScaling{7, T(60), {{T(0), 5}, {T(30), 7}}};
  memory.lent = {false, true, true, false};
  memory.needed_at = {std::nullopt, T(10), std::nullopt, T(20)};
  memory.last_prepare = T(36 * 3600);
  memory.noticed[{WorkloadId(9), NodeId(1)}] = T(36 * 3600 + 30);
  memory.known_services = {chat};
  ASSERT_TRUE(controller.Restore(memory).ok());

  State s(base_.cluster, base_.queues, base_.projects);
  JournalSnapshot snapshot = SnapshotOf(4, s, registered_);
  snapshot.colocation = controller.memory();
  const std::string text = JournalSnapshotToText(snapshot);
  EXPECT_EQ(text, JournalSnapshotToJson(snapshot).dump());
  auto decoded = JournalSnapshotFromText(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_TRUE(decoded->colocation.has_value());
  EXPECT_TRUE(*decoded->colocation == memory);
  ColocationController restored(policy);
  ASSERT_TRUE(restored.Restore(*decoded->colocation).ok());
  const Time noon = T(48 * 3600 - 30 * 60);
  EXPECT_EQ(restored.forecaster().PeakForecast(chat, noon, noon + hours(1)),
            controller.forecaster().PeakForecast(chat, noon, noon + hours(1)));
  EXPECT_EQ(restored.forecaster().Band(chat, T(0), noon), controller.forecaster().Band(chat, T(0), noon));
  EXPECT_EQ(restored.forecaster().Margin(chat), 1.5);

  // A snapshot written before the learned margin (no `issued`, no `margin`)
  // restores a margin of 1 that learns afresh.
  auto old_json = JournalSnapshotToJson(snapshot);
  old_json["colocation"]["load"][0].erase("issued");
  old_json["colocation"]["load"][0].erase("margin");
  const std::string old_text = old_json.dump();
  auto old_decoded = JournalSnapshotFromText(old_text);
  ASSERT_TRUE(old_decoded.ok()) << old_decoded.status().ToString();
  EXPECT_TRUE(old_decoded->colocation->load.at(chat).issued.empty());
  EXPECT_EQ(old_decoded->colocation->load.at(chat).margin, 1.0);

  // A profile cut short would be read past its end: refused, nothing changed.
  ColocationMemory cut = memory;
  cut.load.at(chat).profile.pop_back();
  ColocationController fresh(policy);
  const Status refused = fresh.Restore(cut);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("one entry per bucket"), std::string::npos) << refused.message();
  EXPECT_TRUE(fresh.memory() == ColocationMemory{});

  std::string bad = text;
  const size_t at = bad.find("\"level\":");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 8, "\"level\":\"high\",\"x\":");
  auto garbled = JournalSnapshotFromText(bad);
  ASSERT_FALSE(garbled.ok());
  EXPECT_NE(garbled.status().message().find("colocation.load[0]"), std::string::npos) << garbled.status().message();
}

TEST_F(JournalSnapshotTest, TornGarbledAndForeignSnapshotsAreRefused) {
  State s(base_.cluster, base_.queues, base_.projects);
  Workload w = testing::Job(1, QueueId(0), 1, 4, hours(1), 500, T(0));
  w.project = ProjectId(0);
  ASSERT_TRUE(s.Apply(SubmitEdit{w}).ok());
  ASSERT_TRUE(s.Apply(PlaceEdit{WorkloadId(1), {{NodeId(0), GpuRange(0, 4)}}, false}).ok());
  ASSERT_TRUE(s.Apply(NoticeEdit{WorkloadId(1), WorkloadId(), PreemptCause::kDrain, T(30), 0, true}).ok());
  const std::string text = JournalSnapshotToText(SnapshotOf(3, s, registered_));

  auto torn = JournalSnapshotFromText(text.substr(0, text.size() / 2));
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("not valid JSON"), std::string::npos) << torn.status().message();

  const auto field_error = [&](std::string from, std::string to, const std::string& field) {
    std::string bad = text;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    auto decoded = JournalSnapshotFromText(bad);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(decoded.status().message().rfind("journal snapshot: " + field + ":", 0), 0u)
        << decoded.status().message();
  };
  field_error("\"cause\":\"drain\"", "\"cause\":\"boredom\"", "allocations[0].stop.cause");
  field_error("\"registered\":[0,2]", "\"registered\":[0,7]", "registered[1]");
  field_error("\"record\":\"snapshot\"", "\"record\":\"edit\"", "record");
  field_error("\"seq\":3", "\"seq\":0", "seq");
  field_error("\"cluster_version\"", "\"clusterversion\"", "clusterversion");

  // A snapshot of another cluster does not restore onto this one.
  auto decoded = JournalSnapshotFromText(text);
  ASSERT_TRUE(decoded.ok());
  Cluster smaller = base_.cluster;
  smaller.nodes.pop_back();
  auto restored = RestoreState(*decoded, smaller, base_.queues, base_.projects);
  ASSERT_FALSE(restored.ok());
  EXPECT_NE(restored.status().message().find("4 nodes, the cluster file 3"), std::string::npos)
      << restored.status().message();
}

}  // namespace
}  // namespace tidal::protocol
