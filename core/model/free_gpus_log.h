// Which nodes' free GPUs changed, in order, kept next to Snapshot::free_gpus
// by whoever keeps that (state::State), so that a caller keeping a
// ClusterState across passes (Scheduler) compares only the nodes that
// changed since its last pass instead of every node: on a 10,000-node
// cluster with few changes per pass, that comparison was a quarter of a
// simulated week's time.
//
// Changes are numbered 1, 2, ... per lineage; the log keeps the nodes of the
// latest ones (trimmed from the front as it grows, so a State nobody
// schedules from keeps it bounded). A copy may go on to change apart from
// its original, so a copy starts a lineage of its own with nothing logged:
// a reader that kept up with the original then finds another lineage and
// compares every node, as it would without a log. Lineages are numbered by
// a process-wide counter: which number a lineage gets changes nothing but
// whether a reader can use the log (the counter is ChangeStamp's,
// core/model/change_stamp.h).
#ifndef TIDAL_CORE_MODEL_FREE_GPUS_LOG_H_
#define TIDAL_CORE_MODEL_FREE_GPUS_LOG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tidal {

class FreeGpusLog {
 public:
  FreeGpusLog();
  FreeGpusLog(const FreeGpusLog& other);
  FreeGpusLog& operator=(const FreeGpusLog& other);
  // A move keeps the lineage; the moved-from log starts a new one.
  FreeGpusLog(FreeGpusLog&& other) noexcept;
  FreeGpusLog& operator=(FreeGpusLog&& other) noexcept;

  // Node `node`'s free GPUs changed (one of `node_count` nodes: the log
  // keeps about 4 changes per node before trimming).
  void Record(uint32_t node, size_t node_count);
  // Forgets everything: a new lineage (the free GPUs were replaced whole).
  void Reset();

  uint64_t lineage() const { return lineage_; }
  uint64_t changes() const { return changes_; }
  // The nodes of changes after number `seen` of `lineage`, in order (a node
  // may repeat), or nullopt when the log is of another lineage or no longer
  // reaches back that far. Valid until the next Record or Reset.
  std::optional<std::span<const uint32_t>> ChangedSince(uint64_t lineage, uint64_t seen) const;

 private:
  uint64_t lineage_;
  uint64_t changes_ = 0;
  std::vector<uint32_t> nodes_;  // changes changes_ - nodes_.size() + 1 .. changes_
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_FREE_GPUS_LOG_H_
