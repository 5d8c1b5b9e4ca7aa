// Pod output: agents upload what their pods wrote, users read it back
// (docs/api.md, "Pod logs"). The buffers live in PodLogStore, outside the
// engine's state and the store: logs are neither journaled nor audited.
#include <fmt/format.h>

#include "protocol/pod_log.h"
#include "server/control_plane.h"

namespace tidal::server {

using nlohmann::json;

StatusOr<json> ControlPlane::PodLogs(const Principal& who, const std::string& node_name, const json& body) {
  TIDAL_RETURN_IF_ERROR(CheckNodeCaller(who, node_name));
  TIDAL_ASSIGN_OR_RETURN(protocol::PodLogBatch batch, protocol::PodLogBatchFromJson(body));
  std::vector<const protocol::PodLogChunk*> taken;
  {
    std::lock_guard lock(mu_);
    auto node = config_.catalog.FindNode(node_name);
    if (!node) return NotFound(fmt::format("node \"{}\" is not known", node_name));
    for (const protocol::PodLogChunk& c : batch.chunks) {
      // A node writes only the logs of its own pods: a rank placed there
      // now, or one whose log it began (the last output of a pod arrives
      // after its exit freed the placement).
      const WorkloadRecord* w = Find(c.key.workload);
      if (!w) continue;
      const std::optional<size_t> pod = w->PodOfRank(c.key.rank);
      const bool placed_here = pod && w->allocation->pods[*pod].node == *node &&
                               (c.key.attempt == 0 || c.key.attempt == w->attempt);
      if (!placed_here && pod_logs_.Writer(c.key.workload, c.key.rank) != node_name) continue;
      taken.push_back(&c);
    }
  }
  for (const protocol::PodLogChunk* c : taken) pod_logs_.Append(c->key.workload, c->key.rank, node_name, c->data);
  return json{{"accepted", taken.size()}};
}

StatusOr<json> ControlPlane::WorkloadLogs(const Principal& who, uint64_t id, int rank, int64_t from_offset) const {
  {
    std::lock_guard lock(mu_);
    const WorkloadRecord* r = Find(id);
    if (!r) return NotFound(fmt::format("workload {} not found", id));
    TIDAL_RETURN_IF_ERROR(CheckTenantAccess(who, r->w.tenant));
  }
  return protocol::PodLogPageToJson(pod_logs_.Read(id, rank, from_offset));
}

}  // namespace tidal::server
