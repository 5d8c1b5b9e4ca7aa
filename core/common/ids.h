// Strong integer IDs. Each entity in a Snapshot is addressed by its index in
// the snapshot's vector of that entity, wrapped so that a NodeId can never be
// passed where a QueueId is expected. Names (strings) live on the entities.
#ifndef TIDAL_CORE_COMMON_IDS_H_
#define TIDAL_CORE_COMMON_IDS_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace tidal {

template <typename Tag>
class StrongId {
 public:
  using Rep = uint32_t;
  static constexpr Rep kInvalid = std::numeric_limits<Rep>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}

  constexpr Rep value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalid; }
  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  Rep value_ = kInvalid;
};

using NodeId = StrongId<struct NodeTag>;
using PoolId = StrongId<struct PoolTag>;
using QueueId = StrongId<struct QueueTag>;
using ProjectId = StrongId<struct ProjectTag>;
using RackId = StrongId<struct RackTag>;
using ZoneId = StrongId<struct ZoneTag>;
// Workloads keep a 64-bit, never-reused id: the server assigns it at admission
// and it survives restarts, so it is not an index.
class WorkloadId {
 public:
  constexpr WorkloadId() = default;
  constexpr explicit WorkloadId(uint64_t value) : value_(value) {}
  constexpr uint64_t value() const { return value_; }
  constexpr bool valid() const { return value_ != 0; }
  constexpr auto operator<=>(const WorkloadId&) const = default;

 private:
  uint64_t value_ = 0;
};

}  // namespace tidal

template <typename Tag>
struct std::hash<tidal::StrongId<Tag>> {
  size_t operator()(tidal::StrongId<Tag> id) const noexcept { return id.value(); }
};
template <>
struct std::hash<tidal::WorkloadId> {
  size_t operator()(tidal::WorkloadId id) const noexcept {
    return std::hash<uint64_t>()(id.value());
  }
};

#endif  // TIDAL_CORE_COMMON_IDS_H_
