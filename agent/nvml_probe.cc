#include "agent/nvml_probe.h"

#include <dlfcn.h>

#include <algorithm>

#include <fmt/core.h>

namespace tidal::agent {
namespace {

template <typename Fn>
bool Bind(void* handle, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) missing = name;
  return fn != nullptr;
}

// "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3": the cluster model names GPUs
// without the vendor and without spaces.
std::string NormalizeModel(std::string name) {
  if (name.starts_with("NVIDIA ")) name.erase(0, 7);
  std::replace(name.begin(), name.end(), ' ', '-');
  return name;
}

}  // namespace

StatusOr<std::unique_ptr<NvmlGpuProbe>> NvmlGpuProbe::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Unavailable(fmt::format("NVML not available: {}", err ? err : library));
  }
  nvml::Api api;
  std::string missing;
  bool ok = Bind(handle, "nvmlInit_v2", api.init, missing) &&
            Bind(handle, "nvmlShutdown", api.shutdown, missing) &&
            Bind(handle, "nvmlErrorString", api.error_string, missing) &&
            Bind(handle, "nvmlSystemGetDriverVersion", api.system_get_driver_version, missing) &&
            Bind(handle, "nvmlDeviceGetCount_v2", api.device_get_count, missing) &&
            Bind(handle, "nvmlDeviceGetHandleByIndex_v2", api.device_get_handle_by_index, missing) &&
            Bind(handle, "nvmlDeviceGetUUID", api.device_get_uuid, missing) &&
            Bind(handle, "nvmlDeviceGetName", api.device_get_name, missing) &&
            Bind(handle, "nvmlDeviceGetMemoryInfo", api.device_get_memory_info, missing) &&
            Bind(handle, "nvmlDeviceGetP2PStatus", api.device_get_p2p_status, missing) &&
            Bind(handle, "nvmlDeviceGetTotalEccErrors", api.device_get_total_ecc_errors, missing) &&
            Bind(handle, "nvmlDeviceGetUtilizationRates", api.device_get_utilization_rates, missing) &&
            Bind(handle, "nvmlEventSetCreate", api.event_set_create, missing) &&
            Bind(handle, "nvmlDeviceRegisterEvents", api.device_register_events, missing) &&
            Bind(handle, "nvmlEventSetWait_v2", api.event_set_wait, missing) &&
            Bind(handle, "nvmlEventSetFree", api.event_set_free, missing);
  if (!ok) {
    dlclose(handle);
    return Unavailable(fmt::format("NVML not available: {} lacks {}", library, missing));
  }
  // Older drivers lack MIG; the probe then reports MIG off.
  api.device_get_mig_mode = reinterpret_cast<decltype(api.device_get_mig_mode)>(
      dlsym(handle, "nvmlDeviceGetMigMode"));
  std::unique_ptr<NvmlGpuProbe> probe(new NvmlGpuProbe(api, handle));
  TIDAL_RETURN_IF_ERROR(probe->Init());
  return probe;
}

StatusOr<std::unique_ptr<NvmlGpuProbe>> NvmlGpuProbe::FromApi(const nvml::Api& api) {
  std::unique_ptr<NvmlGpuProbe> probe(new NvmlGpuProbe(api, nullptr));
  TIDAL_RETURN_IF_ERROR(probe->Init());
  return probe;
}

std::string NvmlGpuProbe::Error(nvml::Return r) const {
  const char* text = api_.error_string ? api_.error_string(r) : nullptr;
  return text ? std::string(text) : fmt::format("NVML error {}", r);
}

Status NvmlGpuProbe::Init() {
  nvml::Return r = api_.init();
  if (r != nvml::kSuccess) {
    api_.shutdown = nullptr;  // nothing to shut down
    return Unavailable(fmt::format("NVML not available: nvmlInit: {}", Error(r)));
  }
  unsigned count = 0;
  if ((r = api_.device_get_count(&count)) != nvml::kSuccess) {
    return Internal(fmt::format("nvmlDeviceGetCount: {}", Error(r)));
  }
  for (unsigned i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    if ((r = api_.device_get_handle_by_index(i, &device)) != nvml::kSuccess) {
      return Internal(fmt::format("nvmlDeviceGetHandleByIndex({}): {}", i, Error(r)));
    }
    devices_.push_back(device);
  }
  ecc_seen_.assign(devices_.size(), 0);
  for (size_t i = 0; i < devices_.size(); ++i) {
    unsigned long long ecc = 0;
    if (api_.device_get_total_ecc_errors(devices_[i], nvml::kMemoryErrorTypeUncorrected,
                                         nvml::kVolatileEcc, &ecc) == nvml::kSuccess) {
      ecc_seen_[i] = ecc;  // only new errors after start are faults
    }
  }
  // XID events are best effort: GeForce boards and some VMs refuse them.
  if (api_.event_set_create(&events_) == nvml::kSuccess) {
    for (nvml::Device device : devices_) {
      api_.device_register_events(device, nvml::kEventTypeXidCriticalError, events_);
    }
  } else {
    events_ = nullptr;
  }
  return Status::Ok();
}

NvmlGpuProbe::~NvmlGpuProbe() {
  if (events_ != nullptr && api_.event_set_free) api_.event_set_free(events_);
  if (api_.shutdown) api_.shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

StatusOr<GpuInventory> NvmlGpuProbe::Inventory() {
  GpuInventory inv;
  char buf[nvml::kDeviceNameBufferSize] = {};
  nvml::Return r = api_.system_get_driver_version(buf, sizeof(buf));
  if (r != nvml::kSuccess) return Internal(fmt::format("nvmlSystemGetDriverVersion: {}", Error(r)));
  inv.driver_version = buf;
  for (size_t i = 0; i < devices_.size(); ++i) {
    GpuDevice gpu;
    gpu.index = static_cast<int>(i);
    char uuid[nvml::kDeviceUuidBufferSize] = {};
    if ((r = api_.device_get_uuid(devices_[i], uuid, sizeof(uuid))) != nvml::kSuccess) {
      return Internal(fmt::format("nvmlDeviceGetUUID({}): {}", i, Error(r)));
    }
    gpu.uuid = uuid;
    char name[nvml::kDeviceNameBufferSize] = {};
    if ((r = api_.device_get_name(devices_[i], name, sizeof(name))) != nvml::kSuccess) {
      return Internal(fmt::format("nvmlDeviceGetName({}): {}", i, Error(r)));
    }
    gpu.model = NormalizeModel(name);
    nvml::Memory memory{};
    if ((r = api_.device_get_memory_info(devices_[i], &memory)) != nvml::kSuccess) {
      return Internal(fmt::format("nvmlDeviceGetMemoryInfo({}): {}", i, Error(r)));
    }
    gpu.memory_mib = static_cast<int64_t>(memory.total / (1024 * 1024));
    unsigned current = 0, pending = 0;
    gpu.mig_enabled = api_.device_get_mig_mode != nullptr &&
                      api_.device_get_mig_mode(devices_[i], &current, &pending) == nvml::kSuccess &&
                      current == 1;
    for (size_t j = 0; j < devices_.size(); ++j) {
      if (j == i) continue;
      int status = -1;
      if (api_.device_get_p2p_status(devices_[i], devices_[j], nvml::kP2pCapsIndexNvlink,
                                     &status) == nvml::kSuccess &&
          status == nvml::kP2pStatusOk) {
        gpu.nvlink_peers.push_back(static_cast<int>(j));
      }
    }
    inv.gpus.push_back(std::move(gpu));
  }
  return inv;
}

std::vector<GpuFault> NvmlGpuProbe::PollFaults() {
  std::vector<GpuFault> faults;
  if (events_ != nullptr) {
    nvml::EventData data{};
    // Timeout 0: drain what is queued without blocking the agent loop.
    while (api_.event_set_wait(events_, &data, 0) == nvml::kSuccess) {
      if ((data.event_type & nvml::kEventTypeXidCriticalError) == 0) continue;
      auto it = std::find(devices_.begin(), devices_.end(), data.device);
      if (it == devices_.end()) continue;
      faults.push_back({static_cast<int>(it - devices_.begin()), GpuFaultKind::kXid,
                        static_cast<int64_t>(data.event_data)});
    }
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    unsigned long long ecc = 0;
    if (api_.device_get_total_ecc_errors(devices_[i], nvml::kMemoryErrorTypeUncorrected,
                                         nvml::kVolatileEcc, &ecc) != nvml::kSuccess) {
      continue;  // ECC off or unsupported
    }
    if (ecc > ecc_seen_[i]) {
      faults.push_back({static_cast<int>(i), GpuFaultKind::kEccUncorrectable,
                        static_cast<int64_t>(ecc - ecc_seen_[i])});
      ecc_seen_[i] = ecc;
    }
  }
  return faults;
}

StatusOr<std::vector<GpuSample>> NvmlGpuProbe::Sample() {
  std::vector<GpuSample> samples;
  for (size_t i = 0; i < devices_.size(); ++i) {
    GpuSample s;
    s.gpu_index = static_cast<int>(i);
    nvml::Utilization util{};
    nvml::Return r = api_.device_get_utilization_rates(devices_[i], &util);
    if (r != nvml::kSuccess) {
      return Internal(fmt::format("nvmlDeviceGetUtilizationRates({}): {}", i, Error(r)));
    }
    s.utilization_pct = util.gpu;
    nvml::Memory memory{};
    if ((r = api_.device_get_memory_info(devices_[i], &memory)) != nvml::kSuccess) {
      return Internal(fmt::format("nvmlDeviceGetMemoryInfo({}): {}", i, Error(r)));
    }
    s.memory_used_mib = static_cast<int64_t>(memory.used / (1024 * 1024));
    samples.push_back(s);
  }
  return samples;
}

}  // namespace tidal::agent
