// What the server keeps of pods' output: the last `max_bytes_per_pod` bytes
// of each (workload, rank), in memory, as agents upload them
// (POST /v1/agent/nodes/{node}/pods/logs). Served by
// GET /v1/workloads/{id}/logs. Not persisted: logs are a debugging aid, the
// agent's files under its work dir are the record, and a restarted server
// starts with empty buffers. At most `max_pods` buffers are kept; the one
// written longest ago goes first. Thread-safe.
#ifndef TIDAL_SERVER_POD_LOG_STORE_H_
#define TIDAL_SERVER_POD_LOG_STORE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "protocol/pod_log.h"

namespace tidal::server {

class PodLogStore {
 public:
  explicit PodLogStore(int64_t max_bytes_per_pod = 1 << 20, size_t max_pods = 256);

  // Appends `data` (valid UTF-8) to the rank's buffer, which remembers the
  // node that wrote it last.
  void Append(uint64_t workload, int rank, const std::string& node, std::string_view data);
  // The node whose agent writes the rank's buffer; "" when there is none.
  std::string Writer(uint64_t workload, int rank) const;
  // What is kept from `from_offset` on (clamped to what is kept).
  protocol::PodLogPage Read(uint64_t workload, int rank, int64_t from_offset) const;

 private:
  struct Buffer {
    std::string data;
    int64_t start_offset = 0;  // of data[0]
    std::string node;
    uint64_t written_seq = 0;  // for eviction
  };
  const int64_t max_bytes_per_pod_;
  const size_t max_pods_;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, int>, Buffer> buffers_;
  uint64_t seq_ = 0;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_POD_LOG_STORE_H_
