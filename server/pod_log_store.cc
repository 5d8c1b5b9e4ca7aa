#include "server/pod_log_store.h"

#include <algorithm>

namespace tidal::server {

namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) >> 6) == 0x2; }

}  // namespace

PodLogStore::PodLogStore(int64_t max_bytes_per_pod, size_t max_pods)
    : max_bytes_per_pod_(max_bytes_per_pod), max_pods_(max_pods) {}

void PodLogStore::Append(uint64_t workload, int rank, const std::string& node, std::string_view data) {
  std::lock_guard lock(mu_);
  auto it = buffers_.try_emplace({workload, rank}).first;
  Buffer& b = it->second;
  b.node = node;
  b.written_seq = ++seq_;
  b.data.append(data);
  if (static_cast<int64_t>(b.data.size()) > max_bytes_per_pod_) {
    // Cut at a character boundary: a page must stay valid UTF-8.
    size_t cut = b.data.size() - static_cast<size_t>(max_bytes_per_pod_);
    while (cut < b.data.size() && IsContinuation(b.data[cut])) ++cut;
    b.data.erase(0, cut);
    b.start_offset += static_cast<int64_t>(cut);
  }
  while (buffers_.size() > max_pods_) {
    auto oldest = std::min_element(buffers_.begin(), buffers_.end(), [](const auto& a, const auto& b) {
      return a.second.written_seq < b.second.written_seq;
    });
    buffers_.erase(oldest);
  }
}

std::string PodLogStore::Writer(uint64_t workload, int rank) const {
  std::lock_guard lock(mu_);
  auto it = buffers_.find({workload, rank});
  return it == buffers_.end() ? "" : it->second.node;
}

protocol::PodLogPage PodLogStore::Read(uint64_t workload, int rank, int64_t from_offset) const {
  protocol::PodLogPage page;
  page.workload = workload;
  page.rank = rank;
  std::lock_guard lock(mu_);
  auto it = buffers_.find({workload, rank});
  if (it == buffers_.end()) {
    page.offset = page.next_offset = 0;  // nothing uploaded yet
    return page;
  }
  const Buffer& b = it->second;
  const int64_t end = b.start_offset + static_cast<int64_t>(b.data.size());
  page.truncated = from_offset < b.start_offset;
  size_t at = static_cast<size_t>(std::clamp(from_offset, b.start_offset, end) - b.start_offset);
  // An offset inside a character starts at the next one.
  while (at < b.data.size() && IsContinuation(b.data[at])) ++at;
  page.offset = b.start_offset + static_cast<int64_t>(at);
  page.next_offset = end;
  page.data = b.data.substr(at);
  return page;
}

}  // namespace tidal::server
