// GpuProbe over NVML, loaded at run time with dlopen("libnvidia-ml.so.1") so
// that one build runs on machines with and without an NVIDIA driver. The few
// NVML types, constants and entry points used are declared here by hand (no
// NVML header or library at build time); their layouts follow nvml.h of
// driver 450 and later.
//
// Health: an NVML event set registered for XID critical errors on every GPU
// is polled without waiting; uncorrectable volatile ECC counts are compared
// with the previous poll, and an increase is a fault.
#ifndef TIDAL_AGENT_NVML_PROBE_H_
#define TIDAL_AGENT_NVML_PROBE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/gpu_probe.h"

namespace tidal::agent {

namespace nvml {
using Return = int;  // nvmlReturn_t
using Device = struct DeviceOpaque*;
using EventSet = struct EventSetOpaque*;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorTimeout = 10;
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8ULL;
inline constexpr int kP2pCapsIndexNvlink = 2;   // NVML_P2P_CAPS_INDEX_NVLINK
inline constexpr int kP2pStatusOk = 0;
inline constexpr int kMemoryErrorTypeUncorrected = 1;
inline constexpr int kVolatileEcc = 0;
inline constexpr unsigned kDeviceNameBufferSize = 96;
inline constexpr unsigned kDeviceUuidBufferSize = 96;
inline constexpr unsigned kDriverVersionBufferSize = 80;

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

// The entry points the probe calls; filled from dlsym, or by tests.
struct Api {
  Return (*init)() = nullptr;                                         // nvmlInit_v2
  Return (*shutdown)() = nullptr;                                     // nvmlShutdown
  const char* (*error_string)(Return) = nullptr;                      // nvmlErrorString
  Return (*system_get_driver_version)(char*, unsigned) = nullptr;
  Return (*device_get_count)(unsigned*) = nullptr;                    // _v2
  Return (*device_get_handle_by_index)(unsigned, Device*) = nullptr;  // _v2
  Return (*device_get_uuid)(Device, char*, unsigned) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned) = nullptr;
  Return (*device_get_memory_info)(Device, Memory*) = nullptr;
  Return (*device_get_mig_mode)(Device, unsigned*, unsigned*) = nullptr;
  Return (*device_get_p2p_status)(Device, Device, int, int*) = nullptr;
  Return (*device_get_total_ecc_errors)(Device, int, int, unsigned long long*) = nullptr;
  Return (*device_get_utilization_rates)(Device, Utilization*) = nullptr;
  Return (*event_set_create)(EventSet*) = nullptr;
  Return (*device_register_events)(Device, unsigned long long, EventSet) = nullptr;
  Return (*event_set_wait)(EventSet, EventData*, unsigned) = nullptr;  // _v2
  Return (*event_set_free)(EventSet) = nullptr;
};
}  // namespace nvml

class NvmlGpuProbe final : public GpuProbe {
 public:
  // dlopens `library` (default libnvidia-ml.so.1) and initializes NVML.
  // Fails with "NVML not available: <dlerror>" when the library is absent.
  static StatusOr<std::unique_ptr<NvmlGpuProbe>> Load(
      const std::string& library = "libnvidia-ml.so.1");
  // Over a given function table (tests); calls api.init.
  static StatusOr<std::unique_ptr<NvmlGpuProbe>> FromApi(const nvml::Api& api);
  ~NvmlGpuProbe() override;

  StatusOr<GpuInventory> Inventory() override;
  std::vector<GpuFault> PollFaults() override;
  StatusOr<std::vector<GpuSample>> Sample() override;

 private:
  NvmlGpuProbe(nvml::Api api, void* handle) : api_(api), handle_(handle) {}
  Status Init();
  std::string Error(nvml::Return r) const;

  nvml::Api api_;
  void* handle_ = nullptr;  // dlopen handle; null for a test table
  std::vector<nvml::Device> devices_;
  nvml::EventSet events_ = nullptr;
  std::vector<unsigned long long> ecc_seen_;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_NVML_PROBE_H_
