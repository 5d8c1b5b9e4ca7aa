#include "core/model/free_gpus_log.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "core/model/change_stamp.h"

namespace tidal {

FreeGpusLog::FreeGpusLog() : lineage_(NewLineage()) {}

FreeGpusLog::FreeGpusLog(const FreeGpusLog& other) : lineage_(NewLineage()), changes_(other.changes_) {}

FreeGpusLog& FreeGpusLog::operator=(const FreeGpusLog& other) {
  if (this != &other) {
    lineage_ = NewLineage();
    changes_ = other.changes_;
    nodes_.clear();
  }
  return *this;
}

FreeGpusLog::FreeGpusLog(FreeGpusLog&& other) noexcept
    : lineage_(other.lineage_), changes_(other.changes_), nodes_(std::move(other.nodes_)) {
  other.Reset();
}

FreeGpusLog& FreeGpusLog::operator=(FreeGpusLog&& other) noexcept {
  if (this != &other) {
    lineage_ = other.lineage_;
    changes_ = other.changes_;
    nodes_ = std::move(other.nodes_);
    other.Reset();
  }
  return *this;
}

void FreeGpusLog::Record(uint32_t node, size_t node_count) {
  ++changes_;
  nodes_.push_back(node);
  // Trimming half at a time keeps a Record O(1) amortized.
  const size_t cap = std::max<size_t>(1024, 4 * node_count);
  if (nodes_.size() > cap) nodes_.erase(nodes_.begin(), nodes_.begin() + static_cast<std::ptrdiff_t>(nodes_.size() / 2));
}

void FreeGpusLog::Reset() {
  lineage_ = NewLineage();
  nodes_.clear();
}

std::optional<std::span<const uint32_t>> FreeGpusLog::ChangedSince(uint64_t lineage, uint64_t seen) const {
  const uint64_t first = changes_ - nodes_.size() + 1;  // the oldest change logged
  if (lineage != lineage_ || seen > changes_ || seen + 1 < first) return std::nullopt;
  return std::span<const uint32_t>(nodes_).subspan(static_cast<size_t>(seen + 1 - first));
}

}  // namespace tidal
