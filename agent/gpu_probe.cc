#include "agent/gpu_probe.h"

#include <numeric>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "agent/fake_gpu_probe.h"
#include "agent/nvml_probe.h"

namespace tidal::agent {

std::vector<GpuMask> NvlinkDomains(const GpuInventory& inventory) {
  const int n = static_cast<int>(inventory.gpus.size());
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const GpuDevice& gpu : inventory.gpus) {
    for (int peer : gpu.nvlink_peers) {
      if (peer < 0 || peer >= n || gpu.index < 0 || gpu.index >= n) continue;
      int a = find(gpu.index), b = find(peer);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  }
  // Roots are the lowest index of each component, so scanning in index order
  // yields domains ordered by their lowest GPU.
  std::vector<GpuMask> domains;
  std::vector<int> domain_of_root(n, -1);
  for (int i = 0; i < n; ++i) {
    int root = find(i);
    if (domain_of_root[root] < 0) {
      domain_of_root[root] = static_cast<int>(domains.size());
      domains.push_back(0);
    }
    domains[domain_of_root[root]] |= GpuMask{1} << i;
  }
  return domains;
}

std::string_view GpuFaultKindName(GpuFaultKind kind) {
  switch (kind) {
    case GpuFaultKind::kXid: return "xid";
    case GpuFaultKind::kEccUncorrectable: return "ecc_uncorrectable";
  }
  return "unknown";
}

StatusOr<std::unique_ptr<GpuProbe>> MakeGpuProbe(std::string_view spec,
                                                 const std::string& work_dir) {
  if (spec == "nvml") {
    auto probe = NvmlGpuProbe::Load();
    if (!probe.ok()) return probe.status();
    return std::unique_ptr<GpuProbe>(std::move(probe).value());
  }
  if (spec.starts_with("fake:")) {
    auto fake = ParseFakeGpuSpec(spec.substr(5));
    if (!fake.ok()) return fake.status();
    if (fake->faults_file.empty() && !work_dir.empty()) {
      fake->faults_file = work_dir + "/gpu-faults";
    }
    return std::unique_ptr<GpuProbe>(std::make_unique<FakeGpuProbe>(std::move(fake).value()));
  }
  return InvalidArgument(fmt::format("--gpus '{}': expected nvml or fake:SPEC", spec));
}

nlohmann::json InventoryToJson(const GpuInventory& inventory) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuDevice& gpu : inventory.gpus) {
    gpus.push_back({{"index", gpu.index},
                    {"uuid", gpu.uuid},
                    {"model", gpu.model},
                    {"memory_mib", gpu.memory_mib},
                    {"nvlink_peers", gpu.nvlink_peers},
                    {"mig_enabled", gpu.mig_enabled}});
  }
  nlohmann::json domains = nlohmann::json::array();
  for (GpuMask mask : NvlinkDomains(inventory)) {
    std::vector<int> members;
    for (int i = 0; i < kMaxGpusPerNode; ++i) {
      if (mask & (GpuMask{1} << i)) members.push_back(i);
    }
    domains.push_back(members);
  }
  return {{"driver_version", inventory.driver_version},
          {"gpus", gpus},
          {"nvlink_domains", domains}};
}

nlohmann::json FaultToJson(const GpuFault& fault) {
  return {{"gpu", fault.gpu_index}, {"kind", GpuFaultKindName(fault.kind)}, {"code", fault.code}};
}

std::string FormatInventory(const GpuInventory& inventory) {
  std::string out = fmt::format("driver {}, {} GPU(s)\n", inventory.driver_version,
                                inventory.gpus.size());
  for (const GpuDevice& gpu : inventory.gpus) {
    out += fmt::format("  gpu {}  {}  {}  {} MiB  mig={}  nvlink_peers=[{}]\n", gpu.index,
                       gpu.uuid, gpu.model, gpu.memory_mib, gpu.mig_enabled ? "on" : "off",
                       fmt::join(gpu.nvlink_peers, ","));
  }
  std::vector<std::string> domains;
  for (GpuMask mask : NvlinkDomains(inventory)) domains.push_back(fmt::format("{:#x}", mask));
  out += fmt::format("  nvlink domains: {}\n", fmt::join(domains, " "));
  return out;
}

}  // namespace tidal::agent
