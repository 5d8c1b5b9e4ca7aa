#include "protocol/workload_batch.h"

#include <string>
#include <vector>

#include "protocol/json_writer.h"
#include "protocol/object_reader.h"

namespace tidal::protocol {

using nlohmann::json;

json WorkloadBatchToJson(const WorkloadBatch& batch) {
  return {{"workloads", batch.workloads}};
}

std::string WorkloadBatchText(const std::vector<std::string>& item_texts) {
  std::string text;
  size_t size = 16;
  for (const std::string& item : item_texts) size += item.size() + 1;
  text.reserve(size);
  JsonWriter out(text);
  out.BeginObject();
  out.Key("workloads");
  out.BeginArray();
  for (const std::string& item : item_texts) out.Raw(item);
  out.EndArray();
  out.EndObject();
  return text;
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
