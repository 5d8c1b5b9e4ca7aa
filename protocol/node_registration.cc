#include "protocol/node_registration.h"

#include "protocol/object_reader.h"

namespace tidal::protocol {

using nlohmann::json;

json NodeRegistrationToJson(const NodeRegistration& reg) {
  json j = {{"name", reg.name}};
  auto put = [&](const char* key, const auto& field) {
    if (field) j[key] = *field;
  };
  put("address", reg.address);
  put("pool", reg.pool);
  put("rack", reg.rack);
  put("zone", reg.zone);
  put("gpu_model", reg.gpu_model);
  put("gpu_memory_gib", reg.gpu_memory_gib);
  put("driver_version", reg.driver_version);
  put("mig_capable", reg.mig_capable);
  if (reg.network) {
    json network = json::object();
    if (reg.network->nic_gbps) network["nic_gbps"] = *reg.network->nic_gbps;
    if (reg.network->rdma) network["rdma"] = *reg.network->rdma;
    j["network"] = std::move(network);
  }
  if (reg.gpus) {
    json gpus = json::array();
    for (const GpuInfo& g : *reg.gpus) {
      json gpu = {{"uuid", g.uuid}, {"healthy", g.healthy}};
      if (g.index) gpu["index"] = *g.index;
      if (!g.model.empty()) gpu["model"] = g.model;
      if (g.memory_gib != 0) gpu["memory_gib"] = g.memory_gib;
      gpus.push_back(std::move(gpu));
    }
    j["gpus"] = std::move(gpus);
  }
  put("nvlink_domains", reg.nvlink_domains);
  put("labels", reg.labels);
  if (reg.taints) {
    json taints = json::array();
    for (const Taint& t : *reg.taints) taints.push_back({{"key", t.key}, {"value", t.value}});
    j["taints"] = std::move(taints);
  }
  return j;
}

StatusOr<NodeRegistration> NodeRegistrationFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader r,
      ObjectReader::Open(j, "",
                         std::vector<std::string_view>{
                             "name", "address", "pool", "rack", "zone", "gpu_model", "gpu_memory_gib",
                             "driver_version", "mig_capable", "network", "gpus", "nvlink_domains",
                             "labels", "taints"}));
  NodeRegistration reg;
  if (!r.Has("name")) return r.Missing("name");
  TIDAL_RETURN_IF_ERROR(r.String("name", &reg.name));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::String, "address", &reg.address));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::String, "pool", &reg.pool));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::String, "rack", &reg.rack));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::String, "zone", &reg.zone));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::String, "gpu_model", &reg.gpu_model));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::Int, "gpu_memory_gib", &reg.gpu_memory_gib, 0, 1 << 20));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::String, "driver_version", &reg.driver_version));
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::Bool, "mig_capable", &reg.mig_capable));
  if (r.Has("network")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader n, ObjectReader::Open(r.at("network"), "network",
                                                              std::vector<std::string_view>{"nic_gbps", "rdma"}));
    NetworkInfo network;
    TIDAL_RETURN_IF_ERROR(n.Optional(&ObjectReader::Double, "nic_gbps", &network.nic_gbps, 0.0, 1e6));
    TIDAL_RETURN_IF_ERROR(n.Optional(&ObjectReader::Bool, "rdma", &network.rdma));
    reg.network = network;
  }
  if (r.Has("gpus")) {
    TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("gpus"), "gpus"));
    std::vector<GpuInfo> gpus;
    size_t i = 0;
    for (const json& g : r.at("gpus")) {
      TIDAL_ASSIGN_OR_RETURN(
          ObjectReader gr,
          ObjectReader::Open(g, IndexPath("gpus", i++),
                             std::vector<std::string_view>{"index", "uuid", "healthy", "model", "memory_gib"}));
      GpuInfo gpu;
      TIDAL_RETURN_IF_ERROR(gr.Optional(&ObjectReader::Int, "index", &gpu.index, 0, kMaxGpusPerNode - 1));
      TIDAL_RETURN_IF_ERROR(gr.String("uuid", &gpu.uuid));
      TIDAL_RETURN_IF_ERROR(gr.Bool("healthy", &gpu.healthy));
      TIDAL_RETURN_IF_ERROR(gr.String("model", &gpu.model));
      TIDAL_RETURN_IF_ERROR(gr.Int("memory_gib", &gpu.memory_gib, 0, 1 << 20));
      gpus.push_back(std::move(gpu));
    }
    reg.gpus = std::move(gpus);
  }
  if (r.Has("nvlink_domains")) {
    const json& domains = r.at("nvlink_domains");
    TIDAL_RETURN_IF_ERROR(ExpectArray(domains, "nvlink_domains"));
    std::vector<std::vector<int>> out;
    for (size_t d = 0; d < domains.size(); ++d) {
      std::vector<int> members;
      TIDAL_RETURN_IF_ERROR(ReadIntList(domains[d], IndexPath("nvlink_domains", d), 0, kMaxGpusPerNode - 1, &members));
      out.push_back(std::move(members));
    }
    reg.nvlink_domains = std::move(out);
  }
  TIDAL_RETURN_IF_ERROR(r.Optional(&ObjectReader::StringMap, "labels", &reg.labels));
  if (r.Has("taints")) {
    TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("taints"), "taints"));
    std::vector<Taint> taints;
    size_t i = 0;
    for (const json& t : r.at("taints")) {
      TIDAL_ASSIGN_OR_RETURN(ObjectReader tr, ObjectReader::Open(t, IndexPath("taints", i++),
                                                                 std::vector<std::string_view>{"key", "value"}));
      Taint taint;
      if (!tr.Has("key")) return tr.Missing("key");
      TIDAL_RETURN_IF_ERROR(tr.String("key", &taint.key));
      TIDAL_RETURN_IF_ERROR(tr.String("value", &taint.value));
      taints.push_back(std::move(taint));
    }
    reg.taints = std::move(taints);
  }
  return reg;
}

json RegistrationReplyToJson(const RegistrationReply& reply) {
  json j = {{"node", reply.node}, {"lease_s", reply.lease_s}, {"heartbeat_interval_s", reply.heartbeat_interval_s}};
  if (!reply.credential.empty()) j["credential"] = reply.credential;
  return j;
}

StatusOr<RegistrationReply> RegistrationReplyFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::nullopt));
  RegistrationReply reply;
  TIDAL_RETURN_IF_ERROR(r.String("node", &reply.node));
  TIDAL_RETURN_IF_ERROR(r.Int("lease_s", &reply.lease_s, 1));
  TIDAL_RETURN_IF_ERROR(r.Int("heartbeat_interval_s", &reply.heartbeat_interval_s, 1));
  TIDAL_RETURN_IF_ERROR(r.String("credential", &reply.credential));
  return reply;
}

}  // namespace tidal::protocol
