// The journal codec is lossless: every edit alternative, with every field set
// to something other than its default, and every origin survive encode ->
// text -> decode unchanged. The loop runs over the variant's indices, so a new
// Edit alternative without a sample (and a codec) fails here. Hostile input
// is refused with an error that names the field.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "protocol/journal_record.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;
using namespace tidal::state;

template <typename T>
void ExpectFieldError(const StatusOr<T>& decoded, const std::string& field) {
  ASSERT_FALSE(decoded.ok()) << "expected an error at " << field;
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoded.status().message().rfind(field + ":", 0), 0u) << decoded.status().message();
}

Priority FullPriority() {
  Priority p;
  p.value = 1350;
  p.preemptibility = PreemptibilityClass::kReclaimable;
  p.template_name = "research-default";
  p.derivation = {"tier critical: base 1000", "kind inference: +500", "budget over: -400"};
  p.awaiting_approval = true;
  p.resume_bonus = 75;
  p.borrowing_start_delta = -200;
  return p;
}

// Every field differs from its default, including the profiles of the other
// kinds (a lossy codec that keeps only this kind's would fail).
Workload FullWorkload() {
  Workload w;
  w.id = WorkloadId(42);
  w.name = "llama-serve";
  w.tenant = "research";
  w.project = ProjectId(3);
  w.queue = QueueId(2);
  w.kind = WorkloadKind::kInference;
  w.state = WorkloadState::kAwaitingApproval;
  w.gpus_per_pod = 4;
  w.pods = 3;
  w.min_pods = 2;
  w.max_pods = 6;
  w.preemptible = false;
  w.expected_duration = milliseconds(3'600'001);
  w.submit_time = TimeFromMillis(1'764'489'600'123);
  w.constraints.required_gpu_models = {"H100", "H200"};
  w.constraints.preferred_gpu_models = {"H200"};
  w.constraints.node_selector = {{"zone", "a"}, {"fabric", "ib"}};
  w.constraints.tolerations = {{"dedicated", "ml"}, {"spot", ""}};
  w.constraints.topology = {TopologyLevel::kRack, true};
  w.training.checkpoint_interval = milliseconds(900'007);
  w.training.checkpoint_on_request = milliseconds(30'011);
  w.inference.target_p99 = milliseconds(250);
  w.inference.cold_start = milliseconds(42'500);
  w.inference.replica_capacity_rps = 123.456789012345;
  w.inference.model_size_gib = 140.5;
  w.inference.model_source = ModelSource::kSharedStorage;
  w.batch.deadline = TimeFromMillis(1'764'500'000'001);
  w.debug.max_runtime = milliseconds(7'200'003);
  w.priority = FullPriority();
  w.requeues = 3;
  w.spare_pods = 1;
  return w;
}

void ExpectSamePriority(const Priority& a, const Priority& b) {
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.preemptibility, b.preemptibility);
  EXPECT_EQ(a.template_name, b.template_name);
  EXPECT_EQ(a.derivation, b.derivation);
  EXPECT_EQ(a.awaiting_approval, b.awaiting_approval);
  EXPECT_EQ(a.resume_bonus, b.resume_bonus);
  EXPECT_EQ(a.borrowing_start_delta, b.borrowing_start_delta);
}

void ExpectSameWorkload(const Workload& a, const Workload& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.tenant, b.tenant);
  EXPECT_EQ(a.project, b.project);
  EXPECT_EQ(a.queue, b.queue);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.gpus_per_pod, b.gpus_per_pod);
  EXPECT_EQ(a.pods, b.pods);
  EXPECT_EQ(a.min_pods, b.min_pods);
  EXPECT_EQ(a.max_pods, b.max_pods);
  EXPECT_EQ(a.preemptible, b.preemptible);
  EXPECT_EQ(a.expected_duration, b.expected_duration);
  EXPECT_EQ(a.submit_time, b.submit_time);
  EXPECT_EQ(a.constraints.required_gpu_models, b.constraints.required_gpu_models);
  EXPECT_EQ(a.constraints.preferred_gpu_models, b.constraints.preferred_gpu_models);
  EXPECT_EQ(a.constraints.node_selector, b.constraints.node_selector);
  EXPECT_EQ(a.constraints.tolerations, b.constraints.tolerations);
  EXPECT_EQ(a.constraints.topology.level, b.constraints.topology.level);
  EXPECT_EQ(a.constraints.topology.required, b.constraints.topology.required);
  EXPECT_EQ(a.training.checkpoint_interval, b.training.checkpoint_interval);
  EXPECT_EQ(a.training.checkpoint_on_request, b.training.checkpoint_on_request);
  EXPECT_EQ(a.inference.target_p99, b.inference.target_p99);
  EXPECT_EQ(a.inference.cold_start, b.inference.cold_start);
  EXPECT_EQ(a.inference.replica_capacity_rps, b.inference.replica_capacity_rps);
  EXPECT_EQ(a.inference.model_size_gib, b.inference.model_size_gib);
  EXPECT_EQ(a.inference.model_source, b.inference.model_source);
  EXPECT_EQ(a.batch.deadline, b.batch.deadline);
  EXPECT_EQ(a.debug.max_runtime, b.debug.max_runtime);
  ExpectSamePriority(a.priority, b.priority);
  EXPECT_EQ(a.requeues, b.requeues);
  EXPECT_EQ(a.spare_pods, b.spare_pods);
}

// Field by field, not through the codec: a field the codec drops both ways
// would compare equal as JSON.
void ExpectSameEdit(const Edit& a, const Edit& b) {
  ASSERT_EQ(a.index(), b.index());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, SubmitEdit>) {
          ExpectSameWorkload(x.workload, y.workload);
        } else if constexpr (std::is_same_v<T, ApproveEdit>) {
          EXPECT_EQ(x.workload, y.workload);
        } else if constexpr (std::is_same_v<T, RequeueEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.cause, y.cause);
        } else if constexpr (std::is_same_v<T, SetPriorityEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          ExpectSamePriority(x.priority, y.priority);
        } else if constexpr (std::is_same_v<T, SetTargetEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.pods, y.pods);
          EXPECT_EQ(x.min_pods, y.min_pods);
          EXPECT_EQ(x.max_pods, y.max_pods);
          EXPECT_EQ(x.spare_pods, y.spare_pods);
        } else if constexpr (std::is_same_v<T, PlaceEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.pods, y.pods);
          EXPECT_EQ(x.borrowed, y.borrowed);
        } else if constexpr (std::is_same_v<T, GrowEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.pods, y.pods);
        } else if constexpr (std::is_same_v<T, NoticeEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.preemptor, y.preemptor);
          EXPECT_EQ(x.cause, y.cause);
          EXPECT_EQ(x.grace_deadline, y.grace_deadline);
          EXPECT_EQ(x.lost_gpu_seconds, y.lost_gpu_seconds);
          EXPECT_EQ(x.requeue, y.requeue);
        } else if constexpr (std::is_same_v<T, ShrinkEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.pods, y.pods);
          EXPECT_EQ(x.beneficiary, y.beneficiary);
          EXPECT_EQ(x.grace_deadline, y.grace_deadline);
        } else if constexpr (std::is_same_v<T, PodExitEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.pod, y.pod);
        } else if constexpr (std::is_same_v<T, CheckpointEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.at, y.at);
        } else if constexpr (std::is_same_v<T, ReleaseEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.final_state, y.final_state);
          EXPECT_EQ(x.cause, y.cause);
        } else if constexpr (std::is_same_v<T, LeaseEdit>) {
          EXPECT_EQ(x.node, y.node);
          EXPECT_EQ(x.until, y.until);
        } else if constexpr (std::is_same_v<T, IdleEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.reclaim_at, y.reclaim_at);
        } else if constexpr (std::is_same_v<T, state::ReplicaReadyEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.pod, y.pod);
          EXPECT_EQ(x.ready, y.ready);
        } else if constexpr (std::is_same_v<T, state::ScaleUpEndEdit>) {
          EXPECT_EQ(x.workload, y.workload);
          EXPECT_EQ(x.result, y.result);
          EXPECT_EQ(x.from, y.from);
          EXPECT_EQ(x.to, y.to);
          EXPECT_EQ(x.requested_at, y.requested_at);
          EXPECT_EQ(x.ready_at, y.ready_at);
        } else if constexpr (std::is_same_v<T, LendEdit> || std::is_same_v<T, ReturnEdit>) {
          EXPECT_EQ(x.node, y.node);
        } else if constexpr (std::is_same_v<T, RegisterNodeEdit>) {
          const Node& n = x.node;
          const Node& m = y.node;
          EXPECT_EQ(n.id, m.id);
          EXPECT_EQ(n.name, m.name);
          EXPECT_EQ(n.pool, m.pool);
          EXPECT_EQ(n.rack, m.rack);
          EXPECT_EQ(n.zone, m.zone);
          EXPECT_EQ(n.gpu_model, m.gpu_model);
          EXPECT_EQ(n.gpu_memory_gib, m.gpu_memory_gib);
          EXPECT_EQ(n.gpu_count, m.gpu_count);
          EXPECT_EQ(n.nvlink_domains, m.nvlink_domains);
          EXPECT_EQ(n.mig_capable, m.mig_capable);
          EXPECT_EQ(n.driver_version, m.driver_version);
          EXPECT_EQ(n.network.nic_gbps, m.network.nic_gbps);
          EXPECT_EQ(n.network.rdma, m.network.rdma);
          EXPECT_EQ(n.health, m.health);
          EXPECT_EQ(n.failed_gpus, m.failed_gpus);
          EXPECT_EQ(n.cordoned, m.cordoned);
          EXPECT_EQ(n.labels, m.labels);
          EXPECT_EQ(n.taints, m.taints);
          ASSERT_EQ(x.zones.size(), y.zones.size());
          for (size_t i = 0; i < x.zones.size(); ++i) {
            EXPECT_EQ(x.zones[i].id, y.zones[i].id);
            EXPECT_EQ(x.zones[i].name, y.zones[i].name);
          }
          ASSERT_EQ(x.racks.size(), y.racks.size());
          for (size_t i = 0; i < x.racks.size(); ++i) {
            EXPECT_EQ(x.racks[i].id, y.racks[i].id);
            EXPECT_EQ(x.racks[i].name, y.racks[i].name);
            EXPECT_EQ(x.racks[i].zone, y.racks[i].zone);
          }
        } else if constexpr (std::is_same_v<T, NodeHealthEdit>) {
          EXPECT_EQ(x.node, y.node);
          EXPECT_EQ(x.health, y.health);
        } else if constexpr (std::is_same_v<T, GpuFaultEdit>) {
          EXPECT_EQ(x.node, y.node);
          EXPECT_EQ(x.gpus, y.gpus);
        } else if constexpr (std::is_same_v<T, CordonEdit>) {
          EXPECT_EQ(x.node, y.node);
          EXPECT_EQ(x.cordoned, y.cordoned);
        } else {
          static_assert(sizeof(T) == 0, "ExpectSameEdit: a new Edit alternative needs a comparison");
        }
      },
      a);
}

const std::vector<PodPlacement> kPods = {{NodeId(7), 0b1010'0000'0000'0001}, {NodeId(0), 0xFFFF'FFFF'FFFF'FFFFull}};

RegisterNodeEdit SampleRegisterNode() {
  RegisterNodeEdit e;
  Node& n = e.node;
  n.id = NodeId(3);
  n.name = "gpu-17.rack-b";
  n.pool = PoolId(2);
  n.rack = RackId(1);
  n.zone = ZoneId(0);
  n.gpu_model = "H200-SXM-141GB";
  n.gpu_memory_gib = 141;
  n.gpu_count = 8;
  n.nvlink_domains = {0x0F, 0xF0};
  n.mig_capable = true;
  n.driver_version = "550.54.15";
  n.network = {400.5, true};
  n.health = Health::kDegraded;
  n.failed_gpus = 0b0100'0000;
  n.cordoned = true;
  n.labels = {{"tidal.io/pool", "shared"}, {"topology", "nvl4"}};
  n.taints = {{"dedicated", "inference"}};
  e.zones = {{ZoneId(0), "az-1"}};
  e.racks = {{RackId(0), "rack-a", ZoneId(0)}, {RackId(1), "rack-b", ZoneId(0)}};
  return e;
}

// A sample of alternative `index`, every field off its default; nullopt when
// the alternative has none yet (the test then fails).
std::optional<Edit> SampleEdit(size_t index) {
  const WorkloadId w(9'007'199'254'740'993ull);  // beyond a double's exact integers
  switch (index) {
    case 0: return SubmitEdit{FullWorkload()};
    case 1: return ApproveEdit{w};
    case 2: return SetPriorityEdit{w, FullPriority()};
    case 3: return SetTargetEdit{w, 5, 2, 9, 3};
    case 4: return PlaceEdit{w, kPods, true};
    case 5: return GrowEdit{w, kPods};
    case 6: return NoticeEdit{w, WorkloadId(77), PreemptCause::kInferenceReturn, TimeFromMillis(1'764'489'630'001),
                              1234.5678, false};
    case 7: return ShrinkEdit{w, kPods, WorkloadId(78), TimeFromMillis(1'764'489'640'002)};
    case 8: return PodExitEdit{w, kPods[0]};
    case 9: return CheckpointEdit{w, TimeFromMillis(1'764'489'599'999)};
    case 10: return RequeueEdit{w, EndCause::kNodeLost};
    case 11: return ReleaseEdit{w, WorkloadState::kCancelled, EndCause::kGraceExpired};
    case 12: return LendEdit{NodeId(11)};
    case 13: return ReturnEdit{NodeId(12)};
    case 14: return SampleRegisterNode();
    case 15: return NodeHealthEdit{NodeId(13), Health::kFailed};
    case 16: return GpuFaultEdit{NodeId(14), 0b1000'0100};
    case 17: return CordonEdit{NodeId(15), false};
    case 18: return LeaseEdit{NodeId(16), TimeFromMillis(1'764'489'630'003)};
    case 19: return IdleEdit{w, TimeFromMillis(1'764'491'400'004)};
    case 20: return state::ReplicaReadyEdit{w, kPods[1], false};
    case 21: return state::ScaleUpEndEdit{w, state::ScaleUpResult::kTimedOut, 3, 4095,
                                          TimeFromMillis(1'764'491'400'005), TimeFromMillis(1'764'491'400'606)};
    default: return std::nullopt;
  }
}

constexpr EditOrigin kOrigins[] = {EditOrigin::kWorld, EditOrigin::kPriority, EditOrigin::kLifecycle,
                                   EditOrigin::kColocation, EditOrigin::kEngine};

TEST(JournalRecordTest, EveryEditAndEveryOriginRoundTrips) {
  for (size_t i = 0; i < std::variant_size_v<Edit>; ++i) {
    const std::optional<Edit> edit = SampleEdit(i);
    ASSERT_TRUE(edit.has_value()) << "no sample (and no journal codec test) for Edit alternative " << i;
    ASSERT_EQ(edit->index(), i);
    for (EditOrigin origin : kOrigins) {
      SCOPED_TRACE(std::string(EditName(*edit)) + " from " + std::string(EditOriginName(origin)));
      const JournalEntry entry{TimeFromMillis(1'764'489'600'000 + static_cast<int64_t>(i)), origin, *edit};
      const std::string text = JournalRecordToText(entry);
      auto decoded = JournalRecordFromText(text);
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString() << "\n" << text;
      ASSERT_TRUE(std::holds_alternative<JournalEntry>(*decoded));
      const JournalEntry& got = std::get<JournalEntry>(*decoded);
      EXPECT_EQ(got.at, entry.at);
      EXPECT_EQ(got.origin, origin);
      ExpectSameEdit(got.edit, entry.edit);
      // Canonical: the decoded record encodes to the same text (the replay
      // compares edits this way).
      EXPECT_EQ(JournalRecordToText(*decoded), text);
      // The documented names.
      const json j = json::parse(text);
      EXPECT_EQ(j["record"], "edit");
      EXPECT_EQ(j["edit"], std::string(EditName(*edit)));
      EXPECT_EQ(j["origin"], std::string(EditOriginName(origin)));
    }
  }
}

// The submit record is written without a JSON tree (protocol/json_writer.h);
// its text must stay exactly the tree's dump, which the replay compares and
// docs/formats.md documents: sorted keys, nlohmann's escapes and numbers.
TEST(JournalRecordTest, SubmitTextIsTheTreeDumpByteForByte) {
  std::vector<Workload> cases;
  cases.push_back(FullWorkload());
  cases.push_back(Workload{});  // defaults: empty lists and maps, zero doubles
  Workload odd = FullWorkload();
  odd.batch.deadline = kInfiniteFuture;
  odd.submit_time = kInfiniteFuture;
  odd.name = "quote\" back\\slash\ttab\nnewline\x01" "ctl \xc3\xa9t\xc3\xa9 \xe2\x82\xac";
  odd.tenant = "";
  odd.constraints.node_selector = {{"z\"k", "v\n"}, {"a", ""}};
  odd.priority.derivation = {"", "\x7f del", "caf\xc3\xa9"};
  odd.inference.replica_capacity_rps = 1e-7;
  odd.inference.model_size_gib = 1e20;
  odd.priority.value = -5;
  cases.push_back(odd);
  for (const Workload& w : cases) {
    for (EditOrigin origin : kOrigins) {
      const JournalEntry entry{TimeFromMillis(1'764'489'600'000), origin, SubmitEdit{w}};
      const std::string tree = JournalRecordToJson(entry).dump();
      EXPECT_EQ(JournalEntryText(entry.at, origin, entry.edit), tree);
      EXPECT_EQ(JournalRecordToText(entry), tree);
    }
  }
  // Every other edit's text is its tree's dump too.
  for (size_t i = 0; i < std::variant_size_v<Edit>; ++i) {
    const JournalEntry entry{TimeFromMillis(7), EditOrigin::kEngine, *SampleEdit(i)};
    EXPECT_EQ(JournalEntryText(entry.at, entry.origin, entry.edit), JournalRecordToJson(entry).dump()) << i;
  }
  // A placement is written directly as well: not borrowed, one pod on one GPU.
  const JournalEntry place{TimeFromMillis(9), EditOrigin::kWorld, PlaceEdit{WorkloadId(3), {kPods[0]}, false}};
  EXPECT_EQ(JournalEntryText(place.at, place.origin, place.edit), JournalRecordToJson(place).dump());
}

// Not UTF-8: refused as the tree's dump refuses it (a record that could not
// be read back must not reach the store).
TEST(JournalRecordTest, SubmitTextRefusesInvalidUtf8LikeTheTree) {
  Workload w = FullWorkload();
  w.name = "bad \xff byte";
  EXPECT_THROW(JournalEntryText(TimeFromMillis(1), EditOrigin::kWorld, SubmitEdit{w}), nlohmann::json::type_error);
  EXPECT_THROW(JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, SubmitEdit{w}}).dump(),
               nlohmann::json::type_error);
}

TEST(JournalRecordTest, NoDeadlineIsNullAndRoundTrips) {
  Workload w = FullWorkload();
  w.batch.deadline = kInfiniteFuture;
  const JournalEntry entry{TimeFromMillis(5), EditOrigin::kWorld, SubmitEdit{w}};
  const json j = JournalRecordToJson(entry);
  EXPECT_TRUE(j["workload"]["batch"]["deadline_ms"].is_null());
  auto decoded = JournalRecordFromJson(j);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(std::get<SubmitEdit>(std::get<JournalEntry>(*decoded).edit).workload.batch.deadline, kInfiniteFuture);

  const JournalEntry notice{TimeFromMillis(5), EditOrigin::kEngine, NoticeEdit{WorkloadId(1)}};
  auto n = JournalRecordFromJson(JournalRecordToJson(notice));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(std::get<NoticeEdit>(std::get<JournalEntry>(*n).edit).grace_deadline, kInfiniteFuture);
  EXPECT_FALSE(std::get<NoticeEdit>(std::get<JournalEntry>(*n).edit).preemptor.valid());
}

TEST(JournalRecordTest, ARecordFromBeforeRequeuesWereCountedStillReads) {
  const JournalEntry entry{TimeFromMillis(5), EditOrigin::kWorld, SubmitEdit{FullWorkload()}};
  json j = JournalRecordToJson(entry);
  j["workload"].erase("requeues");
  j["workload"]["priority"].erase("resume_bonus");
  j["workload"]["priority"].erase("borrowing_start_delta");
  auto decoded = JournalRecordFromJson(j);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Workload& w = std::get<SubmitEdit>(std::get<JournalEntry>(*decoded).edit).workload;
  EXPECT_EQ(w.requeues, 0);
  EXPECT_EQ(w.priority.resume_bonus, 0);
  EXPECT_EQ(w.priority.borrowing_start_delta, 0);
  // A negative count is refused, naming the field.
  j["workload"]["requeues"] = -1;
  ExpectFieldError(JournalRecordFromJson(j), "workload.requeues");
}

// Spares are written only when there are some: a record without them (all
// but predictive inference, and every record before them) reads as none; more
// spares than pods are refused, naming the field.
TEST(JournalRecordTest, SparePodsAreOptionalAndBounded) {
  JournalEntry entry{TimeFromMillis(5), EditOrigin::kColocation, SetTargetEdit{WorkloadId(1), 5}};
  json j = JournalRecordToJson(entry);
  EXPECT_FALSE(j.contains("spare_pods"));
  auto decoded = JournalRecordFromJson(j);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(std::get<SetTargetEdit>(std::get<JournalEntry>(*decoded).edit).spare_pods, 0);
  j["spare_pods"] = 6;
  ExpectFieldError(JournalRecordFromJson(j), "spare_pods");
  Workload w = FullWorkload();
  w.spare_pods = 0;
  json submit = JournalRecordToJson(JournalEntry{TimeFromMillis(5), EditOrigin::kWorld, SubmitEdit{w}});
  EXPECT_FALSE(submit["workload"].contains("spare_pods"));
  submit["workload"]["spare_pods"] = w.pods + 1;
  ExpectFieldError(JournalRecordFromJson(submit), "workload.spare_pods");
}

// A job that saves only at its interval writes no checkpoint_on_request_ms,
// so journals written before the field existed read the same; a negative
// save time is refused, naming the field.
TEST(JournalRecordTest, CheckpointOnRequestIsOptionalAndBounded) {
  Workload w = FullWorkload();
  w.training.checkpoint_on_request = Duration(0);
  json submit = JournalRecordToJson(JournalEntry{TimeFromMillis(5), EditOrigin::kWorld, SubmitEdit{w}});
  EXPECT_FALSE(submit["workload"]["training"].contains("checkpoint_on_request_ms"));
  EXPECT_EQ(json::parse(JournalRecordToText(JournalEntry{TimeFromMillis(5), EditOrigin::kWorld, SubmitEdit{w}})),
            submit);
  auto decoded = JournalRecordFromJson(submit);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(std::get<SubmitEdit>(std::get<JournalEntry>(*decoded).edit).workload.training.checkpoint_on_request,
            Duration(0));
  submit["workload"]["training"]["checkpoint_on_request_ms"] = -1;
  ExpectFieldError(JournalRecordFromJson(submit), "workload.training.checkpoint_on_request_ms");
}

TEST(JournalRecordTest, MarkersAndLoadSamplesRoundTrip) {
  for (PassPhase phase : {PassPhase::kTick, PassPhase::kPlanSnapshot, PassPhase::kPlanApply,
                          PassPhase::kEngineSnapshot, PassPhase::kEngineApply}) {
    const PassMarker m{TimeFromMillis(1'764'489'600'017), phase};
    auto decoded = JournalRecordFromText(JournalRecordToText(m));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ASSERT_TRUE(std::holds_alternative<PassMarker>(*decoded));
    EXPECT_EQ(std::get<PassMarker>(*decoded).at, m.at);
    EXPECT_EQ(std::get<PassMarker>(*decoded).phase, phase);
    EXPECT_EQ(JournalRecordToJson(m)["phase"], std::string(PassPhaseName(phase)));
  }
  const LoadSample s{TimeFromMillis(-250), WorkloadId(12), 1234.000000001};
  auto decoded = JournalRecordFromText(JournalRecordToText(s));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_TRUE(std::holds_alternative<LoadSample>(*decoded));
  EXPECT_EQ(std::get<LoadSample>(*decoded).at, s.at);
  EXPECT_EQ(std::get<LoadSample>(*decoded).workload, s.workload);
  EXPECT_EQ(std::get<LoadSample>(*decoded).rps, s.rps);
  const ServerStart start{TimeFromMillis(1'764'489'600'123)};
  decoded = JournalRecordFromText(JournalRecordToText(start));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_TRUE(std::holds_alternative<ServerStart>(*decoded));
  EXPECT_EQ(std::get<ServerStart>(*decoded).at, start.at);
  // Strict like every record: nothing but its two fields.
  EXPECT_FALSE(JournalRecordFromText(R"({"record":"server_start","at_ms":1,"state":{}})").ok());
}

json PlaceJson() {
  return JournalRecordToJson(JournalEntry{TimeFromMillis(10), EditOrigin::kEngine, PlaceEdit{WorkloadId(3), kPods}});
}

TEST(JournalRecordTest, RefusesHostileInputNamingTheField) {
  ExpectFieldError(JournalRecordFromJson(json::array()), "record");
  ExpectFieldError(JournalRecordFromJson(json{{"at_ms", 1}}), "record");
  ExpectFieldError(JournalRecordFromJson(json{{"record", "snapshot"}, {"at_ms", 1}}), "record");

  json j = PlaceJson();
  j["edit"] = "teleport";
  ExpectFieldError(JournalRecordFromJson(j), "edit");

  j = PlaceJson();
  j.erase("at_ms");
  ExpectFieldError(JournalRecordFromJson(j), "at_ms");

  j = PlaceJson();
  j.erase("borrowed");
  ExpectFieldError(JournalRecordFromJson(j), "borrowed");

  j = PlaceJson();
  j["extra"] = 1;
  ExpectFieldError(JournalRecordFromJson(j), "extra");

  j = PlaceJson();
  j["at_ms"] = "soon";
  ExpectFieldError(JournalRecordFromJson(j), "at_ms");

  j = PlaceJson();
  j["origin"] = "martians";
  ExpectFieldError(JournalRecordFromJson(j), "origin");

  j = PlaceJson();
  j["workload"] = 0;
  ExpectFieldError(JournalRecordFromJson(j), "workload");

  j = PlaceJson();
  j["pods"][1]["node"] = 4294967295ll;  // NodeId's invalid value
  ExpectFieldError(JournalRecordFromJson(j), "pods[1].node");

  j = PlaceJson();
  j["pods"][0]["gpus"] = {0, 64};
  ExpectFieldError(JournalRecordFromJson(j), "pods[0].gpus[1]");

  j = PlaceJson();
  j["pods"][0]["gpus"] = {3, 3};
  ExpectFieldError(JournalRecordFromJson(j), "pods[0].gpus[1]");

  j = PlaceJson();
  j["pods"] = json::array();
  for (size_t i = 0; i <= kMaxJournalPods; ++i) j["pods"].push_back({{"node", 0}, {"gpus", {0}}});
  ExpectFieldError(JournalRecordFromJson(j), "pods");

  j = JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, NodeHealthEdit{NodeId(1), Health::kFailed}});
  j["health"] = 2;
  ExpectFieldError(JournalRecordFromJson(j), "health");

  j = JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, ReleaseEdit{WorkloadId(1)}});
  j["final_state"] = "running";
  ExpectFieldError(JournalRecordFromJson(j), "final_state");

  j = JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, SubmitEdit{FullWorkload()}});
  j["workload"]["priority"]["derivation"] = json::array();
  for (size_t i = 0; i <= kMaxJournalListEntries; ++i) j["workload"]["priority"]["derivation"].push_back("x");
  ExpectFieldError(JournalRecordFromJson(j), "workload.priority.derivation");

  j = JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, SubmitEdit{FullWorkload()}});
  j["workload"]["inference"].erase("model_source");
  ExpectFieldError(JournalRecordFromJson(j), "workload.inference.model_source");

  j = JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, SubmitEdit{FullWorkload()}});
  j["workload"]["kind"] = "mining";
  ExpectFieldError(JournalRecordFromJson(j), "workload.kind");

  j = JournalRecordToJson(JournalEntry{TimeFromMillis(1), EditOrigin::kWorld, SubmitEdit{FullWorkload()}});
  j["workload"]["name"] = std::string(kMaxJournalStringBytes + 1, 'a');
  ExpectFieldError(JournalRecordFromJson(j), "workload.name");

  j = JournalRecordToJson(LoadSample{TimeFromMillis(1), WorkloadId(2), 5});
  j["rps"] = -1;
  ExpectFieldError(JournalRecordFromJson(j), "rps");

  j = JournalRecordToJson(PassMarker{TimeFromMillis(1), PassPhase::kTick});
  j["phase"] = "lunch";
  ExpectFieldError(JournalRecordFromJson(j), "phase");
}

TEST(JournalRecordTest, RefusesHostileText) {
  EXPECT_FALSE(JournalRecordFromText("{\"record\":").ok());
  EXPECT_FALSE(JournalRecordFromText(std::string(10'000, '[') + std::string(10'000, ']')).ok());
  EXPECT_FALSE(JournalRecordFromText(std::string(kMaxJournalRecordBytes + 1, ' ')).ok());
}

}  // namespace
}  // namespace tidal::protocol
