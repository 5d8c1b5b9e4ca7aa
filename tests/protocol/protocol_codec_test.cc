// Every agent<->server message survives encode -> decode unchanged. Each
// test sets every field to a value other than its default, so a codec that
// drops a field (as PodEvent::ToJson once dropped the stop outcome and the
// attempt) fails here. Decode errors name the bad field.
#include <gtest/gtest.h>

#include <string>

#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "protocol/pod_assignment.h"
#include "protocol/pod_event.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;

// Through the text form too: what crosses the wire is the dump.
json Wire(const json& j) { return json::parse(j.dump()); }

// Expects a decode error whose message starts with `field` + ":".
template <typename T>
void ExpectFieldError(const StatusOr<T>& decoded, const std::string& field) {
  ASSERT_FALSE(decoded.ok()) << "expected an error at " << field;
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoded.status().message().rfind(field + ":", 0), 0u) << decoded.status().message();
}

PodEvent FullExitEvent() {
  PodEvent e;
  e.key = {12, 3, 7};
  e.phase = "exited";
  e.time_ms = 1'764'489'600'000;
  e.exit_code = 143;
  e.signal = 15;
  e.reason = "stopped (priority)";
  e.checkpoint_time_ms = 1'764'489'500'000;
  e.cold_start_ms = 8200;
  e.stop = StopOutcome{1'764'489'590'000, true, true};
  e.load = LoadReport{120.5, 40.25, 71.5};
  e.utilization = 0.875;
  return e;
}

TEST(PodEventCodecTest, RoundTripsEveryField) {
  const PodEvent e = FullExitEvent();
  auto decoded = PodEventFromJson(Wire(PodEventToJson(e)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, e);
  // The fields the server's stale-attempt guard and preemption audit read
  // are on the wire under their documented names.
  const json j = PodEventToJson(e);
  EXPECT_EQ(j["attempt"], 7);
  EXPECT_EQ(j["notice_time_ms"], 1'764'489'590'000);
  EXPECT_EQ(j["killed_at_deadline"], true);
  EXPECT_EQ(j["checkpointed_in_time"], true);
}

TEST(PodEventCodecTest, RoundTripsAReportWithoutPhaseOrStopOutcome) {
  PodEvent e;
  e.key = {5, 1, 2};
  e.time_ms = 99;
  e.utilization = 0.5;
  e.load = LoadReport{10, -1, 30};  // the replica gave no p95
  auto decoded = PodEventFromJson(Wire(PodEventToJson(e)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, e);
  EXPECT_FALSE(PodEventToJson(e).contains("notice_time_ms"));
  EXPECT_FALSE(PodEventToJson(e)["load"].contains("p95_ms"));
}

// A hostile node's (or a tenant command's) reason reaches people's
// terminals: its escapes are defused and its length is bounded, and the
// event itself is still taken.
TEST(PodEventCodecTest, AReasonLosesControlCharactersAndIsBounded) {
  PodEvent e = FullExitEvent();
  e.reason = "failed to start: execve /bin/\x1b]0;owned\x07x\r\n";
  auto decoded = PodEventFromJson(Wire(PodEventToJson(e)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->reason, "failed to start: execve /bin/?]0;owned?x??");
  // 2,000 two-byte characters: cut at 1,024 bytes, between characters.
  std::string long_reason;
  for (int i = 0; i < 2000; ++i) long_reason += "\xc3\xa9";  // e-acute
  e.reason = "x" + long_reason;  // odd offset: byte 1,024 is inside a character
  decoded = PodEventFromJson(Wire(PodEventToJson(e)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->reason.size(), 1023u);
  EXPECT_NO_THROW(json(decoded->reason).dump());  // still valid UTF-8
}

TEST(PodEventCodecTest, BatchRoundTrips) {
  PodEventBatch batch;
  batch.events.push_back(FullExitEvent());
  PodEvent ready;
  ready.key = {12, 0, 7};
  ready.phase = "ready";
  ready.cold_start_ms = 300;
  batch.events.push_back(ready);
  auto decoded = PodEventBatchFromJson(Wire(PodEventBatchToJson(batch)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, batch);
}

TEST(PodEventCodecTest, DecodeErrorsNameTheField) {
  auto batch = [](json event) { return json{{"events", json::array({json{{"workload", 1}, {"rank", 0}}, event})}}; };
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"phase", "dancing"}})),
                   "events[1].phase");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", "zero"}})), "events[1].rank");
  ExpectFieldError(PodEventBatchFromJson(batch({{"rank", 0}})), "events[1].workload");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"attempt", -1}})),
                   "events[1].attempt");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"checkpointed_in_time", "yes"}})),
                   "events[1].checkpointed_in_time");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"notice_time_ms", 1.5}})),
                   "events[1].notice_time_ms");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"utilization", 7}})),
                   "events[1].utilization");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"load", {{"rps", "many"}}}})),
                   "events[1].load.rps");
  ExpectFieldError(PodEventBatchFromJson(batch({{"workload", 1}, {"rank", 0}, {"colour", "red"}})),
                   "events[1].colour");
  ExpectFieldError(PodEventBatchFromJson(json{{"events", json::object()}}), "events");
  ExpectFieldError(PodEventBatchFromJson(json::object()), "events");
}

// A replica's load reply and the agent's pod event take the same figures:
// whatever the reply reader accepts, the event codec accepts in turn, so one
// pod's report cannot make the server refuse the agent's batch.
TEST(LoadReplyCodecTest, AcceptsWhatAPodEventCarries) {
  for (const json& reply : {json{{"rps", 1e9}, {"p95_ms", 0}, {"p99_ms", 5}}, json{{"rps", 3}, {"extra", 1}},
                            json::object()}) {
    auto load = LoadReplyFromJson(reply);
    ASSERT_TRUE(load.ok()) << reply.dump() << ": " << load.status().message();
    PodEvent e;
    e.key = {1, 0, 0};
    e.load = *load;
    EXPECT_TRUE(PodEventFromJson(PodEventToJson(e)).ok()) << reply.dump();
  }
  ExpectFieldError(LoadReplyFromJson(json{{"rps", 1.5e9}}), "load.rps");
  ExpectFieldError(LoadReplyFromJson(json{{"p99_ms", -1}}), "load.p99_ms");
  ExpectFieldError(LoadReplyFromJson(json{{"p95_ms", "slow"}}), "load.p95_ms");
  EXPECT_FALSE(LoadReplyFromJson(json::array()).ok());
}

PodAssignment FullAssignment() {
  PodAssignment p;
  p.key = {12, 1, 4};
  p.name = "llama-ft";
  p.kind = "inference";
  p.world_size = 3;
  p.gpus = {2, 5};
  p.master_addr = "10.0.0.7";
  p.master_port = 29512;
  p.command = {"trainer", "--steps", "100"};
  p.env = {{"K", "V"}, {"MODE", "fast"}};
  p.image = "registry/llama:1";
  p.checkpoint_dir_key = "w12-ckpt";
  p.readiness = HttpEndpoint{8000, "/ready"};
  p.load_endpoint = HttpEndpoint{8001, "/load"};
  p.desired_run = false;
  p.notice = StopNotice{"reclaim", 1000, 31000, 2};  // SIGINT
  p.notice->checkpoint = true;
  return p;
}

TEST(PodAssignmentCodecTest, RoundTripsEveryField) {
  const PodAssignment p = FullAssignment();
  auto decoded = PodAssignmentFromJson(Wire(PodAssignmentToJson(p)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, p);
  EXPECT_EQ(PodAssignmentToJson(p)["notice"]["signal"], "SIGINT");  // by name, as documented
  EXPECT_EQ(PodAssignmentToJson(p)["desired"], "stop");
  EXPECT_EQ(PodAssignmentToJson(p)["notice"]["checkpoint"], true);
}

TEST(PodAssignmentCodecTest, ListRoundTripsAndAbsentOptionalsAreNull) {
  PodAssignmentList list;
  list.pods.push_back(FullAssignment());
  PodAssignment plain;
  plain.key = {3, 0, 1};
  plain.name = "w3";
  plain.command = {"true"};
  plain.checkpoint_dir_key = "w3";
  list.pods.push_back(plain);
  list.version = "1764000000000-42";
  auto decoded = PodAssignmentListFromJson(Wire(PodAssignmentListToJson(list)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, list);
  // A hostile server's version is bounded like every other field.
  json long_version = PodAssignmentListToJson(list);
  long_version["version"] = std::string(65, 'v');
  ExpectFieldError(PodAssignmentListFromJson(long_version), "version");
  const json j = PodAssignmentToJson(plain);
  EXPECT_TRUE(j["notice"].is_null());
  EXPECT_TRUE(j["readiness"].is_null());
}

TEST(PodAssignmentCodecTest, DefaultsForAbsentFieldsAndUnknownFieldsIgnored) {
  auto p = PodAssignmentFromJson(json{{"workload", 9}, {"command", {"x"}}, {"from_a_newer_server", 1}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "w9");
  EXPECT_EQ(p->checkpoint_dir_key, "w9");
  EXPECT_EQ(p->kind, "training");
  EXPECT_EQ(p->world_size, 1);
  EXPECT_TRUE(p->desired_run);
  auto stop = PodAssignmentFromJson(json{{"workload", 9}, {"desired", "stop"}, {"notice", {{"cause", "idle"}}}});
  ASSERT_TRUE(stop.ok()) << stop.status().ToString();
  EXPECT_EQ(stop->notice->signal, 15);
  EXPECT_FALSE(stop->notice->checkpoint);  // an older server never asks for a save
  // A notice that does not ask writes no "checkpoint" at all.
  EXPECT_FALSE(PodAssignmentToJson(*stop)["notice"].contains("checkpoint"));
  auto bad = PodAssignmentFromJson(
      json{{"workload", 9}, {"desired", "stop"}, {"notice", {{"cause", "idle"}, {"checkpoint", "now"}}}});
  ExpectFieldError(bad, "pod.notice.checkpoint");
}

TEST(PodAssignmentCodecTest, DecodeErrorsNameTheField) {
  const json base = {{"workload", 5}, {"rank", 0}, {"world_size", 2}, {"command", {"x"}}};
  auto with = [&](const char* key, json value) {
    json pod = base;
    pod[key] = std::move(value);
    return json{{"pods", json::array({pod})}};
  };
  ExpectFieldError(PodAssignmentListFromJson(with("rank", -1)), "pods[0].rank");
  ExpectFieldError(PodAssignmentListFromJson(with("rank", kMaxPodRank)), "pods[0].rank");
  // A rank past the world: a pod a shrink removes, or a replica that kept
  // its rank while others left.
  EXPECT_TRUE(PodAssignmentListFromJson(with("rank", 7)).ok());
  ExpectFieldError(PodAssignmentListFromJson(with("workload", 0)), "pods[0].workload");
  ExpectFieldError(PodAssignmentListFromJson(with("gpus", json::array({1, 64}))), "pods[0].gpus[1]");
  // A pod with nothing to run fails to start on its own (PodProcess::Start);
  // refusing the list would hold back every other pod of its node.
  EXPECT_TRUE(PodAssignmentListFromJson(with("command", json::array())).ok());
  ExpectFieldError(PodAssignmentListFromJson(with("env", {{"A", 1}})), "pods[0].env.A");
  ExpectFieldError(PodAssignmentListFromJson(with("checkpoint_dir_key", "../etc")), "pods[0].checkpoint_dir_key");
  ExpectFieldError(PodAssignmentListFromJson(with("readiness", {{"port", 70000}})), "pods[0].readiness.port");
  ExpectFieldError(PodAssignmentListFromJson(with("load_endpoint", {{"path", "load"}})), "pods[0].load_endpoint.path");
  ExpectFieldError(PodAssignmentListFromJson(with("desired", "pause")), "pods[0].desired");
  ExpectFieldError(PodAssignmentListFromJson(with("notice", {{"signal", "SIGNOPE"}})), "pods[0].notice.signal");
  ExpectFieldError(PodAssignmentListFromJson(with("attempt", "one")), "pods[0].attempt");
  ExpectFieldError(PodAssignmentListFromJson(json{{"pods", 3}}), "pods");
}

TEST(PodAssignmentCodecTest, SignalsByNameOrNumber) {
  EXPECT_EQ(*ParseSignal("SIGTERM"), 15);
  EXPECT_EQ(*ParseSignal("TERM"), 15);
  EXPECT_EQ(*ParseSignal("9"), 9);
  EXPECT_FALSE(ParseSignal("0").ok());
  EXPECT_FALSE(ParseSignal("SIGNOPE").ok());
  EXPECT_EQ(SignalName(9), "SIGKILL");
}

TEST(HeartbeatCodecTest, RoundTripsEveryField) {
  Heartbeat hb;
  hb.gpus.push_back(GpuReport{3, false, 79, 2, 0.93, 61.5});
  hb.gpus.push_back(GpuReport{1, true, 0, 0, std::nullopt, std::nullopt});
  for (const bool by_watch : {false, true}) {
    hb.pods_by_watch = by_watch;
    auto decoded = HeartbeatFromJson(Wire(HeartbeatToJson(hb)));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, hb);
  }
}

TEST(HeartbeatCodecTest, ReplyRoundTrips) {
  HeartbeatReply reply;
  reply.lease_s = 45;
  reply.pods = std::vector<PodAssignment>{FullAssignment()};
  auto decoded = HeartbeatReplyFromJson(Wire(HeartbeatReplyToJson(reply)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, reply);
  // No pods key: the server said nothing about pods, which is not "none".
  auto bare = HeartbeatReplyFromJson(json{{"lease_s", 30}});
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->pods.has_value());
}

TEST(HeartbeatCodecTest, DecodeErrorsNameTheField) {
  auto gpu = [](json g) { return json{{"gpus", json::array({json{{"index", 0}}, g})}}; };
  ExpectFieldError(HeartbeatFromJson(gpu(json::object())), "gpus[1].index");
  ExpectFieldError(HeartbeatFromJson(gpu({{"index", 1}, {"utilization", 7}})), "gpus[1].utilization");
  ExpectFieldError(HeartbeatFromJson(gpu({{"index", 1}, {"healthy", 1}})), "gpus[1].healthy");
  ExpectFieldError(HeartbeatFromJson(gpu({{"index", 1}, {"temp", 80}})), "gpus[1].temp");
  ExpectFieldError(HeartbeatFromJson(json{{"gpus", "all"}}), "gpus");
  ExpectFieldError(HeartbeatFromJson(json{{"pods_by_watch", "yes"}}), "pods_by_watch");
  ExpectFieldError(HeartbeatReplyFromJson(json{{"lease_s", "long"}}), "lease_s");
  ExpectFieldError(HeartbeatReplyFromJson(json{{"pods", json::array({json{{"workload", -1}}})}}), "pods[0].workload");
}

NodeRegistration FullRegistration() {
  NodeRegistration reg;
  reg.name = "node-3";
  reg.address = "10.0.0.3";
  reg.pool = "inference";
  reg.rack = "r1";
  reg.zone = "z1";
  reg.gpu_model = "H100-SXM-80GB";
  reg.gpu_memory_gib = 80;
  reg.driver_version = "550.54";
  reg.mig_capable = true;
  reg.network = NetworkInfo{400.5, true};
  reg.gpus = std::vector<GpuInfo>{GpuInfo{0, "GPU-a", true, "H100", 80}, GpuInfo{1, "GPU-b", false, "", 0}};
  reg.nvlink_domains = std::vector<std::vector<int>>{{0}, {1}};
  reg.labels = std::map<std::string, std::string>{{"team", "nlp"}};
  reg.taints = std::vector<Taint>{{"dedicated", "nlp"}, {"gpu", ""}};
  return reg;
}

TEST(NodeRegistrationCodecTest, RoundTripsEveryField) {
  const NodeRegistration reg = FullRegistration();
  auto decoded = NodeRegistrationFromJson(Wire(NodeRegistrationToJson(reg)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, reg);
}

TEST(NodeRegistrationCodecTest, AbsentFieldsStayAbsent) {
  NodeRegistration reg;
  reg.name = "n";
  auto decoded = NodeRegistrationFromJson(Wire(NodeRegistrationToJson(reg)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, reg);
  EXPECT_EQ(NodeRegistrationToJson(reg), json({{"name", "n"}}));
}

TEST(NodeRegistrationCodecTest, ReplyRoundTrips) {
  const RegistrationReply reply{"node-3", 45, 7, std::string(64, 'a')};
  auto decoded = RegistrationReplyFromJson(Wire(RegistrationReplyToJson(reply)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, reply);
  EXPECT_EQ(decoded->credential, std::string(64, 'a'));
}

TEST(NodeRegistrationCodecTest, ReplyWithoutCredentialDecodes) {
  // An older server issues none: the agent keeps using its token.
  const RegistrationReply reply{"node-3", 45, 7};
  EXPECT_FALSE(RegistrationReplyToJson(reply).contains("credential"));
  auto decoded = RegistrationReplyFromJson(Wire(RegistrationReplyToJson(reply)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->credential, "");
}

TEST(NodeRegistrationCodecTest, DecodeErrorsNameTheField) {
  auto with = [](const char* key, json value) {
    json reg = {{"name", "n"}};
    reg[key] = std::move(value);
    return reg;
  };
  ExpectFieldError(NodeRegistrationFromJson(json{{"gpus", json::array()}}), "name");
  ExpectFieldError(NodeRegistrationFromJson(with("gpu_memory_gib", "80")), "gpu_memory_gib");
  ExpectFieldError(NodeRegistrationFromJson(with("network", {{"rdma", "yes"}})), "network.rdma");
  ExpectFieldError(NodeRegistrationFromJson(with("gpus", json::array({json{{"index", "0"}}}))), "gpus[0].index");
  ExpectFieldError(NodeRegistrationFromJson(with("nvlink_domains", json::array({json::array({0, "1"})}))),
                   "nvlink_domains[0][1]");
  ExpectFieldError(NodeRegistrationFromJson(with("labels", {{"a", 1}})), "labels.a");
  ExpectFieldError(NodeRegistrationFromJson(with("taints", json::array({json{{"value", "v"}}}))), "taints[0].key");
  ExpectFieldError(NodeRegistrationFromJson(with("colour", "red")), "colour");
}

}  // namespace
}  // namespace tidal::protocol
