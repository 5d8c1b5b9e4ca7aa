// A GpuProbe without GPUs, for development, tests and `tidal up`.
//
// Topology comes from a spec string or a YAML file:
//   "4xH100-80GB"                       4 GPUs, 80 GiB each (from the "-80GB"
//                                       suffix), all in one NVLink domain
//   "8xA100-40GB,nvlink=2x4"            2 NVLink domains of 4 GPUs
//   options: nvlink=none | AxB, driver=VER, mig=on, uuid=PREFIX, faults=PATH
//   "/path/node.yaml"                   keys: driver_version, uuid_prefix,
//                                       faults_file, gpus: {count, model,
//                                       memory_gib, mig, nvlink_domains:
//                                       [[0,1],[2,3]]}
// Faults and utilization are injected through a control file that the probe
// re-reads from where it stopped on each poll; one command per line:
//   xid GPU CODE     an XID critical error on GPU (e.g. "xid 3 79")
//   ecc GPU COUNT    COUNT uncorrectable ECC errors on GPU
//   util GPU PCT     pin GPU's utilization (PCT < 0 unpins)
// Without a pin, a GPU's utilization is its holder's activity (SetLoad) times
// 90%, with a little seeded jitter; memory in use is 60% of the GPU while a
// pod holds it.
#ifndef TIDAL_AGENT_FAKE_GPU_PROBE_H_
#define TIDAL_AGENT_FAKE_GPU_PROBE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_probe.h"
#include "core/common/rng.h"

namespace tidal::agent {

struct FakeGpuSpec {
  GpuInventory inventory;
  std::string faults_file;  // "" = none
};

// `spec` is the part after "fake:". A spec naming an existing file (or ending
// in .yaml/.yml) is read as YAML.
StatusOr<FakeGpuSpec> ParseFakeGpuSpec(std::string_view spec);

// How busy a pod's fake GPUs look: its CPU share over a sample (CPU seconds
// `cpu_delta_s` in `interval_s`) as a fraction of `busy_cpu_share`, capped at
// 1. /proc charges CPU time in whole clock ticks (`tick_s`, 10 ms), to
// whichever process runs when the tick lands: a process that only wakes
// briefly now and then is charged a tick at random, and one tick in a 1 s
// sample reads as 1 % of a CPU, half of busy at the 2 % default. An idle
// debug session then looked busy every half minute or so and its idle
// reclaim never came. So the first tick of each sample is counted as that
// noise, not as work.
double FakeGpuActivity(double cpu_delta_s, double interval_s, double busy_cpu_share, double tick_s);

class FakeGpuProbe final : public GpuProbe {
 public:
  explicit FakeGpuProbe(FakeGpuSpec spec, uint64_t seed = 1);

  StatusOr<GpuInventory> Inventory() override;
  std::vector<GpuFault> PollFaults() override;
  StatusOr<std::vector<GpuSample>> Sample() override;

  // Called by the agent each sampling period: whether a pod holds the GPU and
  // how busy it is, 0..1.
  void SetLoad(int gpu_index, bool held, double activity);
  // Direct injection (tests, agent endpoint); reported by the next PollFaults.
  void InjectFault(const GpuFault& fault);
  const std::string& faults_file() const { return spec_.faults_file; }

 private:
  struct GpuLoad {
    bool held = false;
    double activity = 0;
    double pinned_util_pct = -1;
  };
  void ReadControlFileLocked();

  std::mutex mu_;
  FakeGpuSpec spec_;
  Rng rng_;
  std::vector<GpuLoad> load_;
  std::vector<GpuFault> pending_faults_;
  uint64_t control_offset_ = 0;
  int control_line_ = 0;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_FAKE_GPU_PROBE_H_
