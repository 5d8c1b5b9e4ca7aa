#include "core/engine/fits_someday.h"

#include <algorithm>

namespace tidal::engine {

void FitsSomeday::Validate(const Snapshot& snapshot) {
  if (snapshot.cluster_version == cluster_version_ && snapshot.cluster.pools == pools_ &&
      snapshot.queues == queues_) {
    return;
  }
  cluster_version_ = snapshot.cluster_version;
  pools_ = snapshot.cluster.pools;
  queues_ = snapshot.queues;
  fits_.clear();
  settled_lineage_ = 0;
  unsettled_.clear();
}

void FitsSomeday::Add(const Workload& w) {
  // Ids are dense where passes stop early (the simulator); a sparse one is
  // not kept rather than grow the vector without bound.
  constexpr uint64_t kMaxKeptId = uint64_t{1} << 25;
  const uint64_t id = w.id.value();
  if (cluster_version_ == 0 || id >= kMaxKeptId || w.batch.deadline != kInfiniteFuture) return;
  if (id >= fits_.size()) fits_.resize(std::max<uint64_t>(id + 1, fits_.size() * 2), 0);
  fits_[id] = 1;
}

bool FitsSomeday::ToAsk(const WaitingOrder& order, std::vector<WaitingOrder::Inserted>& out) const {
  if (settled_lineage_ == 0 || settled_lineage_ != order.log_lineage()) return false;
  const std::optional<std::span<const WaitingOrder::Inserted>> inserted = order.InsertsFrom(settled_inserts_);
  if (!inserted) return false;
  out.insert(out.end(), unsettled_.begin(), unsettled_.end());
  out.insert(out.end(), inserted->begin(), inserted->end());
  return true;
}

void FitsSomeday::Settle(const WaitingOrder& order, std::vector<WaitingOrder::Inserted> unsettled) {
  if (!keeps()) return;
  settled_lineage_ = order.log_lineage();
  settled_inserts_ = order.inserts();
  unsettled_ = std::move(unsettled);
}

}  // namespace tidal::engine
