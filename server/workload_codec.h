// JSON for the API and the store. A submit body is read strictly (unknown
// fields, wrong types and absurd sizes are errors naming the field); a record
// is written with every field the server keeps, and read back at recovery.
#ifndef TIDAL_SERVER_WORKLOAD_CODEC_H_
#define TIDAL_SERVER_WORKLOAD_CODEC_H_

#include <string>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "server/catalog.h"
#include "server/workload_record.h"

namespace tidal::server {

inline constexpr int kMaxTotalGpus = 4096;

// What a submitter wrote, before admission fills in the rest.
struct SubmitSpec {
  WorkloadRecord record;  // id, state, priority, tenant, project, queue unset
  std::string tenant;     // "" = from the project
  std::string project;    // "" = the tenant's only project
  std::string queue;      // "" = the project's default queue
  double deadline_s = 0;  // batch, relative to submission; 0 = none
  bool has_min = false, has_max = false, has_checkpoint = false;
  bool has_image = false, has_dataset = false, has_model_version = false;
};

StatusOr<SubmitSpec> ParseSubmit(const nlohmann::json& body);

// GPU indices of a mask, ascending.
std::vector<int> MaskToIndices(GpuMask mask);

nlohmann::json PriorityToJson(const Priority& p);
nlohmann::json WaitToJson(const WaitDecision& w);
nlohmann::json RecordToJson(const WorkloadRecord& r, const Catalog& catalog);
// Names that no longer resolve (a queue removed from the config) are errors.
StatusOr<WorkloadRecord> RecordFromJson(const nlohmann::json& j, const Catalog& catalog);

std::optional<WorkloadKind> ParseKind(std::string_view name);
std::optional<WorkloadState> ParseState(std::string_view name);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_WORKLOAD_CODEC_H_
