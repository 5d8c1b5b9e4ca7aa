// The journal's snapshot record (docs/formats.md "Snapshots"): the committed
// state of the server's StateMachine after journal record `seq`, so that a
// reader (the server's store compacting its journal, `tidal sim replay`)
// can start there instead of at the first record. It is a record of its own,
// independent of the store that keeps it: the SQLite store keeps it in a
// table next to the journal, and an etcd store (issue #13) can keep the same
// text under a key.
//
// It holds what changes as edits apply: the nodes (health, failed GPUs,
// cordons, registrations), zones and racks, the loans, each project's spend,
// every live workload and allocation in the state's order, each
// allocation's notice and leaving deadline, and which nodes' agents
// registered, and the co-location controller's memory. The static rest (pools, queues, projects' configuration)
// comes from the cluster file the history runs under (the store's meta), so
// a snapshot restores onto that configuration.
//
// The codec is lossless and strict, like the journal's: a decoded snapshot
// restores a state equal to the one encoded (State::Restore), and an
// unknown or missing field, a wrong type or an oversized list is an error
// naming the field.
#ifndef TIDAL_PROTOCOL_JOURNAL_SNAPSHOT_H_
#define TIDAL_PROTOCOL_JOURNAL_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/colocation/colocation_controller.h"
#include "core/common/status.h"
#include "core/model/snapshot.h"
#include "core/state/state.h"

namespace tidal::protocol {

struct ProjectSpend {
  double used_gpu_hours = 0;  // as the engine reads it
  double base_gpu_hours = 0;  // State::Extras: the base it accrues from
  double gpu_seconds = 0;     // and the GPU-seconds since
};

struct JournalSnapshot {
  int64_t seq = 0;  // the last journal record it covers (>= 1)
  Time at;          // the state's clock
  uint64_t cluster_version = 0;
  std::vector<Zone> zones;
  std::vector<Rack> racks;
  std::vector<Node> nodes;       // indexed by NodeId
  std::vector<bool> lent;        // by NodeId
  std::vector<bool> registered;  // by NodeId: the node's agent registered
  std::vector<Time> lease_until;  // by NodeId: its lease (kInfiniteFuture = none given)
  std::vector<ProjectSpend> projects;  // by ProjectId
  std::vector<Workload> workloads;     // in the state's order
  std::vector<Allocation> allocations;  // in the state's order
  std::vector<state::State::AllocationExtras> allocation_extras;  // parallel to allocations
  std::vector<state::PendingScaleUp> scale_ups;  // in workload-id order
  // The co-location controller's memory at `seq` (protocol/colocation_memory.h);
  // absent in snapshots written before it: a replay then starts the
  // controller afresh.
  std::optional<ColocationMemory> colocation;
};

// Bounds beyond which a snapshot is refused as hostile (a store of 50,000
// workloads writes about 60 MiB).
inline constexpr size_t kMaxSnapshotBytes = size_t{1} << 30;
inline constexpr size_t kMaxSnapshotEntries = size_t{1} << 22;

// The snapshot of `state` after journal record `seq`.
JournalSnapshot SnapshotOf(int64_t seq, const state::State& state, std::vector<bool> registered);
// The state it holds, on the configuration the history runs under
// (`configured`'s pools, `queues`, and `projects` but for their spend).
// Fails when the snapshot does not fit it (another cluster's node count or
// projects) or does not hold together (a GPU held twice).
StatusOr<state::State> RestoreState(const JournalSnapshot& snapshot, const Cluster& configured,
                                    const std::vector<Queue>& queues, const std::vector<Project>& projects);

nlohmann::json JournalSnapshotToJson(const JournalSnapshot& snapshot);
StatusOr<JournalSnapshot> JournalSnapshotFromJson(const nlohmann::json& j);
// Compact JSON text, one object (what the store keeps), and back.
std::string JournalSnapshotToText(const JournalSnapshot& snapshot);
StatusOr<JournalSnapshot> JournalSnapshotFromText(std::string_view text);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_JOURNAL_SNAPSHOT_H_
