// The store's journal snapshots (read at recovery, where the server
// validates the latest, and by `tidal sim replay`, which starts from it). A
// snapshot that decodes must encode to text that decodes again, and
// restoring it onto the example cluster (the one the seeds come from) must
// either fail with a reason or give a state whose own snapshot restores too.
#include <cstdlib>

#include "config/cluster_loader.h"
#include "config/embedded_examples.h"
#include "fuzz/fuzz_input.h"
#include "protocol/journal_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tidal::config::ClusterConfig* cluster = [] {
    auto c = tidal::config::ParseClusterYaml(tidal::config::kBasicClusterYaml, "cluster.yaml");
    return c.ok() ? new tidal::config::ClusterConfig(*c) : nullptr;
  }();
  if (cluster == nullptr) __builtin_trap();  // the embedded cluster must load
  using namespace tidal::protocol;
  auto snapshot = JournalSnapshotFromText(tidal::fuzz::AsText(data, size));
  if (!snapshot.ok()) return 0;
  if (!JournalSnapshotFromText(JournalSnapshotToText(*snapshot)).ok()) __builtin_trap();
  auto state = RestoreState(*snapshot, cluster->cluster, cluster->queues, cluster->projects);
  if (!state.ok()) return 0;
  const JournalSnapshot again = SnapshotOf(snapshot->seq, *state, snapshot->registered);
  if (!RestoreState(again, cluster->cluster, cluster->queues, cluster->projects).ok()) __builtin_trap();
  return 0;
}
