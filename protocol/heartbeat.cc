#include "protocol/heartbeat.h"

#include "protocol/object_reader.h"

namespace tidal::protocol {

using nlohmann::json;

json HeartbeatToJson(const Heartbeat& heartbeat) {
  json gpus = json::array();
  for (const GpuReport& g : heartbeat.gpus) {
    json gpu = {{"index", g.index}, {"healthy", g.healthy}};
    if (g.xid != 0) gpu["xid"] = g.xid;
    if (g.ecc_uncorrectable != 0) gpu["ecc_uncorrectable"] = g.ecc_uncorrectable;
    if (g.utilization) gpu["utilization"] = *g.utilization;
    if (g.memory_used_gib) gpu["memory_used_gib"] = *g.memory_used_gib;
    gpus.push_back(std::move(gpu));
  }
  json j = {{"gpus", std::move(gpus)}};
  if (heartbeat.pods_by_watch) j["pods_by_watch"] = true;
  return j;
}

StatusOr<Heartbeat> HeartbeatFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r,
                         ObjectReader::Open(j, "", std::vector<std::string_view>{"gpus", "pods_by_watch"}));
  Heartbeat heartbeat;
  TIDAL_RETURN_IF_ERROR(r.Bool("pods_by_watch", &heartbeat.pods_by_watch));
  if (!r.Has("gpus")) return heartbeat;
  TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("gpus"), "gpus"));
  size_t i = 0;
  for (const json& g : r.at("gpus")) {
    TIDAL_ASSIGN_OR_RETURN(
        ObjectReader gr,
        ObjectReader::Open(g, IndexPath("gpus", i++),
                           std::vector<std::string_view>{"index", "healthy", "xid", "ecc_uncorrectable",
                                                         "utilization", "memory_used_gib"}));
    GpuReport gpu;
    if (!gr.Has("index")) return gr.Missing("index");
    TIDAL_RETURN_IF_ERROR(gr.Int("index", &gpu.index, 0));
    TIDAL_RETURN_IF_ERROR(gr.Bool("healthy", &gpu.healthy));
    TIDAL_RETURN_IF_ERROR(gr.Int("xid", &gpu.xid, 0, 1 << 20));
    TIDAL_RETURN_IF_ERROR(gr.Int("ecc_uncorrectable", &gpu.ecc_uncorrectable, 0));
    TIDAL_RETURN_IF_ERROR(gr.Optional(&ObjectReader::Double, "utilization", &gpu.utilization, 0.0, 1.0));
    TIDAL_RETURN_IF_ERROR(gr.Optional(&ObjectReader::Double, "memory_used_gib", &gpu.memory_used_gib, 0.0, 1e6));
    heartbeat.gpus.push_back(gpu);
  }
  return heartbeat;
}

json HeartbeatReplyToJson(const HeartbeatReply& reply) {
  json j = json::object();
  if (reply.lease_s) j["lease_s"] = *reply.lease_s;
  if (reply.pods) j["pods"] = PodAssignmentListToJson(PodAssignmentList{*reply.pods})["pods"];
  return j;
}

StatusOr<HeartbeatReply> HeartbeatReplyFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::nullopt));
  HeartbeatReply reply;
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::Int, "lease_s", &reply.lease_s, 1, 1 << 30));
  if (r.Has("pods")) {
    TIDAL_ASSIGN_OR_RETURN(reply.pods, PodAssignmentsFromJson(r.at("pods")));
  }
  return reply;
}

}  // namespace tidal::protocol
