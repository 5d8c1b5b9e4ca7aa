#include "protocol/workload_batch.h"

#include <string>
#include <vector>

#include "protocol/object_reader.h"

namespace tidal::protocol {

using nlohmann::json;

json WorkloadBatchToJson(const WorkloadBatch& batch) {
  return {{"workloads", batch.workloads}};
}

StatusOr<WorkloadBatch> WorkloadBatchFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::vector<std::string_view>{"workloads"}));
  if (!r.Has("workloads")) return r.Missing("workloads");
  const json& items = r.at("workloads");
  TIDAL_RETURN_IF_ERROR(ExpectArray(items, "workloads"));
  if (items.empty() || items.size() > kMaxBatchWorkloads) {
    return FieldError("workloads", "expected 1 to " + std::to_string(kMaxBatchWorkloads) + " workloads, got " +
                                       std::to_string(items.size()));
  }
  WorkloadBatch batch;
  batch.workloads.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_object()) {
      return FieldError(IndexPath("workloads", i), "expected an object, got " + Shown(items[i]));
    }
    batch.workloads.push_back(items[i]);
  }
  return batch;
}

Status InBatchItem(const Status& status, size_t index) {
  if (status.ok()) return status;
  const std::string& message = status.message();
  const std::string item = IndexPath("workloads", index);
  return Status(status.code(), FieldOfMessage(message).empty() ? item + ": " + message : item + "." + message);
}

}  // namespace tidal::protocol
