// Pod output, both ways (docs/api.md): what an agent ships with
// POST /v1/agent/nodes/{name}/pods/logs (the bytes its pods wrote since the
// last shipment), and what GET /v1/workloads/{id}/logs answers (a page of
// what the server kept of one rank, with the offset to ask from next).
#ifndef TIDAL_PROTOCOL_POD_LOG_H_
#define TIDAL_PROTOCOL_POD_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/status.h"
#include "protocol/pod_key.h"

namespace tidal::protocol {

// The most one chunk may carry: an agent ships a chatty pod's output over
// several syncs rather than in one large body.
inline constexpr int64_t kMaxPodLogChunkBytes = 256 << 10;

struct PodLogChunk {
  PodKey key;
  // stdout and stderr as they arrived, valid UTF-8 (the agent replaces
  // bytes that are not with U+FFFD: JSON strings must be UTF-8).
  std::string data;
  bool operator==(const PodLogChunk&) const = default;
};

struct PodLogBatch {
  std::vector<PodLogChunk> chunks;
  bool operator==(const PodLogBatch&) const = default;
};

nlohmann::json PodLogBatchToJson(const PodLogBatch& batch);
// Strict: unknown fields, a chunk over kMaxPodLogChunkBytes, a bad key.
StatusOr<PodLogBatch> PodLogBatchFromJson(const nlohmann::json& j);

// Offsets count bytes since the rank's first output; the server keeps only
// the last bytes of each rank, so `offset` may be past what was asked.
struct PodLogPage {
  uint64_t workload = 0;
  int rank = 0;
  int64_t offset = 0;       // where `data` starts
  int64_t next_offset = 0;  // ask from here to follow
  bool truncated = false;   // bytes before `offset` that were asked for are gone
  std::string data;
  bool operator==(const PodLogPage&) const = default;
};

nlohmann::json PodLogPageToJson(const PodLogPage& page);
// Unknown fields are ignored (a newer server).
StatusOr<PodLogPage> PodLogPageFromJson(const nlohmann::json& j);

// `data` cut to its longest prefix that does not end inside a UTF-8
// sequence, with invalid bytes replaced by U+FFFD; `*consumed` is how many
// input bytes that prefix took (the rest waits for more bytes).
std::string ValidUtf8Prefix(std::string_view data, size_t* consumed);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_POD_LOG_H_
