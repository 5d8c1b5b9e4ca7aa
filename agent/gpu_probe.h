// GPU discovery and health behind one small interface, so that the agent runs
// the same code with real GPUs (NvmlGpuProbe) and without (FakeGpuProbe).
#ifndef TIDAL_AGENT_GPU_PROBE_H_
#define TIDAL_AGENT_GPU_PROBE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/common/status.h"
#include "core/model/cluster.h"

namespace tidal::agent {

struct GpuDevice {
  int index = 0;  // NVML index == PCI bus order
  std::string uuid;
  std::string model;  // e.g. "H100-80GB"
  int64_t memory_mib = 0;
  std::vector<int> nvlink_peers;  // indices of GPUs this one reaches over NVLink
  bool mig_enabled = false;
};

struct GpuInventory {
  std::string driver_version;
  std::vector<GpuDevice> gpus;
};

// NVLink domains are the connected components of the peer graph; a GPU with
// no peers is a domain of its own. Ordered by their lowest GPU.
std::vector<GpuMask> NvlinkDomains(const GpuInventory& inventory);

enum class GpuFaultKind { kXid, kEccUncorrectable };
std::string_view GpuFaultKindName(GpuFaultKind kind);  // "xid", "ecc_uncorrectable"

struct GpuFault {
  int gpu_index = 0;
  GpuFaultKind kind = GpuFaultKind::kXid;
  int64_t code = 0;  // the XID number, or the uncorrectable ECC error count
};

struct GpuSample {
  int gpu_index = 0;
  double utilization_pct = 0;
  int64_t memory_used_mib = 0;
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  virtual StatusOr<GpuInventory> Inventory() = 0;
  // Fatal faults seen since the previous call; never blocks for long.
  virtual std::vector<GpuFault> PollFaults() = 0;
  virtual StatusOr<std::vector<GpuSample>> Sample() = 0;
};

// "nvml" or "fake:SPEC" (see fake_gpu_probe.h). `work_dir` is where a fake
// probe looks for its fault control file by default.
StatusOr<std::unique_ptr<GpuProbe>> MakeGpuProbe(std::string_view spec,
                                                 const std::string& work_dir);

nlohmann::json InventoryToJson(const GpuInventory& inventory);
nlohmann::json FaultToJson(const GpuFault& fault);
// One line per GPU, for `tidal agent --probe`.
std::string FormatInventory(const GpuInventory& inventory);

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_GPU_PROBE_H_
