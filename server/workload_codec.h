// JSON for the API and the store. The workload's own fields go through the
// config codec (config/json_codec.h: the workload-file names, strict
// parsing); this file adds what only the server keeps: the run spec the agent
// needs, the allocation, stop notices and the history reports read.
//
// A submit body is read strictly (unknown fields, wrong types and absurd
// sizes are errors naming the field). RecordToJson writes the API form (every
// server field, defaults included); RecordToStoredJson the compact form the
// store keeps (defaults omitted). RecordFromJson reads both.
#ifndef TIDAL_SERVER_WORKLOAD_CODEC_H_
#define TIDAL_SERVER_WORKLOAD_CODEC_H_

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/json_codec.h"
#include "core/common/status.h"
#include "server/catalog.h"
#include "server/workload_record.h"

namespace tidal::server {

inline constexpr int kMaxTotalGpus = config::kMaxWorkloadGpus;

// The names a submit body gives; admission resolves them (a user's tenant
// comes from its token, the project may be the tenant's only one).
struct SubmitNames {
  std::string kind;     // "" = training
  std::string tenant;   // "" = from the project
  std::string project;  // "" = the tenant's only project
  std::string queue;    // "" = the project's default queue
};
// Checks the body's keys and the types of its names.
StatusOr<SubmitNames> ReadSubmitNames(const nlohmann::json& body);

// What a submitter wrote, before admission fills in the rest.
struct SubmitSpec {
  WorkloadRecord record;  // id, state and priority unset
  bool has_checkpoint = false;
  bool has_image = false, has_dataset = false, has_model_version = false;
  bool has_max_runtime = false, has_gpus_per_replica = false;
};

// Parses a submit body for `project` (resolved by admission), submitted at
// `now` (deadline_s counts from it).
StatusOr<SubmitSpec> ParseSubmit(const nlohmann::json& body, const Catalog& catalog,
                                 const std::string& project, Time now);

// POST /v1/workloads/{id}/resize: the replica counts it changes, each in
// [1, kMaxTotalGpus]; the workload decides whether they fit it.
struct ResizeRequest {
  std::optional<int> replicas, min_replicas, max_replicas;
};
StatusOr<ResizeRequest> ParseResize(const nlohmann::json& body);

using config::PriorityToJson;

// GPU indices of a mask, ascending.
inline std::vector<int> MaskToIndices(GpuMask mask) { return config::GpuIndices(mask); }

// A digest of a submit body, equal for equal JSON however it is spelled.
std::string RequestDigest(const nlohmann::json& body);

nlohmann::json WaitToJson(const WaitDecision& w);
// `wait` is the last pass's explanation of a pending workload (nullptr =
// none): the control plane keeps those apart from the records.
nlohmann::json RecordToJson(const WorkloadRecord& r, const Catalog& catalog, const WaitDecision* wait);
nlohmann::json RecordToStoredJson(const WorkloadRecord& r, const Catalog& catalog);
// The two forms' text, byte for byte the trees' dump(), written without
// building the tree: a submit's reply and every stored record change, on
// the state lock's hot paths.
std::string RecordToText(const WorkloadRecord& r, const Catalog& catalog, const WaitDecision* wait);
std::string RecordToStoredText(const WorkloadRecord& r, const Catalog& catalog);
// Names that no longer resolve (a queue removed from the config) are errors.
StatusOr<WorkloadRecord> RecordFromJson(const nlohmann::json& j, const Catalog& catalog);

std::optional<WorkloadKind> ParseKind(std::string_view name);
std::optional<WorkloadState> ParseState(std::string_view name);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_WORKLOAD_CODEC_H_
