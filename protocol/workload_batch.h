// What POST /v1/workloads:batch carries and answers (docs/api.md):
// workloads submitted together, admitted all or none, in one store change.
// The request's items are workload bodies as POST /v1/workloads takes them
// (admission checks their fields); the reply's are the workloads created,
// in the request's order.
#ifndef TIDAL_PROTOCOL_WORKLOAD_BATCH_H_
#define TIDAL_PROTOCOL_WORKLOAD_BATCH_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"

namespace tidal::protocol {

inline constexpr std::string_view kWorkloadBatchPath = "/v1/workloads:batch";
// A sweep of a thousand trials fits; more is split by the client.
inline constexpr size_t kMaxBatchWorkloads = 1000;

// The body both ways: {"workloads": [...]}.
struct WorkloadBatch {
  std::vector<nlohmann::json> workloads;
  bool operator==(const WorkloadBatch&) const = default;
};

nlohmann::json WorkloadBatchToJson(const WorkloadBatch& batch);
// The reply's text from items already encoded (each a JSON object's text):
// WorkloadBatchToJson's dump() for the parsed items, without the parse.
std::string WorkloadBatchText(const std::vector<std::string>& item_texts);
// Strict on the envelope: 1 to kMaxBatchWorkloads objects under
// "workloads" and nothing else; an error names the field
// ("workloads[3]").
StatusOr<WorkloadBatch> WorkloadBatchFromJson(const nlohmann::json& j);

// `status` about the batch's item `index`, with the item's path in front:
// "replicas: ..." becomes "workloads[3].replicas: ...", so the reply names
// the field as for a single submit; any other message gets "workloads[3]: ".
Status InBatchItem(const Status& status, size_t index);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_WORKLOAD_BATCH_H_
