#include "agent/fake_gpu_probe.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

namespace tidal::agent {
namespace {

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

// "H100-80GB" -> 80; 0 when the model carries no "-<N>GB" suffix.
int64_t MemoryGibFromModel(std::string_view model) {
  size_t dash = model.rfind('-');
  if (dash == std::string_view::npos || !model.ends_with("GB")) return 0;
  int64_t gib = 0;
  if (!ParseInt(model.substr(dash + 1, model.size() - dash - 3), gib)) return 0;
  return gib;
}

void BuildGpus(GpuInventory& inv, int count, const std::string& model, int64_t memory_gib,
               bool mig, const std::string& uuid_prefix) {
  for (int i = 0; i < count; ++i) {
    GpuDevice gpu;
    gpu.index = i;
    gpu.uuid = fmt::format("GPU-{}-{:04d}", uuid_prefix, i);
    gpu.model = model;
    gpu.memory_mib = memory_gib * 1024;
    gpu.mig_enabled = mig;
    inv.gpus.push_back(std::move(gpu));
  }
}

// Every GPU in a domain is a peer of every other one in it.
Status ApplyDomains(GpuInventory& inv, const std::vector<std::vector<int>>& domains,
                    const std::string& where) {
  std::vector<bool> seen(inv.gpus.size(), false);
  for (const auto& domain : domains) {
    for (int gpu : domain) {
      if (gpu < 0 || gpu >= static_cast<int>(inv.gpus.size())) {
        return InvalidArgument(fmt::format("{}: GPU {} out of range [0, {})", where, gpu,
                                           inv.gpus.size()));
      }
      if (seen[gpu]) return InvalidArgument(fmt::format("{}: GPU {} in two domains", where, gpu));
      seen[gpu] = true;
      for (int peer : domain) {
        if (peer != gpu) inv.gpus[gpu].nvlink_peers.push_back(peer);
      }
    }
  }
  return Status::Ok();
}

StatusOr<FakeGpuSpec> ParseYamlSpec(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}:{}: {}", path, e.mark.line + 1, e.msg));
  }
  FakeGpuSpec spec;
  auto field_error = [&](const YAML::Node& node, std::string_view field, std::string_view what) {
    return InvalidArgument(
        fmt::format("{}:{}: {}: {}", path, node.Mark().line + 1, field, what));
  };
  try {
    spec.inventory.driver_version = root["driver_version"].as<std::string>("fake-1.0");
    spec.faults_file = root["faults_file"].as<std::string>("");
    const std::string uuid_prefix = root["uuid_prefix"].as<std::string>("fake");
    YAML::Node gpus = root["gpus"];
    if (!gpus || !gpus.IsMap()) return field_error(root, "gpus", "required map is missing");
    const int count = gpus["count"].as<int>(0);
    if (count <= 0 || count > kMaxGpusPerNode) {
      return field_error(gpus, "gpus.count", fmt::format("must be in [1, {}]", kMaxGpusPerNode));
    }
    const std::string model = gpus["model"].as<std::string>("");
    if (model.empty()) return field_error(gpus, "gpus.model", "required");
    int64_t memory_gib = gpus["memory_gib"].as<int64_t>(MemoryGibFromModel(model));
    if (memory_gib <= 0) return field_error(gpus, "gpus.memory_gib", "required and > 0");
    BuildGpus(spec.inventory, count, model, memory_gib, gpus["mig"].as<bool>(false), uuid_prefix);
    std::vector<std::vector<int>> domains;
    if (gpus["nvlink_domains"]) {
      domains = gpus["nvlink_domains"].as<std::vector<std::vector<int>>>();
    } else {
      domains.emplace_back();
      for (int i = 0; i < count; ++i) domains.back().push_back(i);
    }
    TIDAL_RETURN_IF_ERROR(ApplyDomains(
        spec.inventory, domains,
        fmt::format("{}:{}: gpus.nvlink_domains", path, gpus.Mark().line + 1)));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}:{}: {}", path, e.mark.line + 1, e.msg));
  }
  return spec;
}

}  // namespace

StatusOr<FakeGpuSpec> ParseFakeGpuSpec(std::string_view spec_text) {
  const std::string text(spec_text);
  if (text.ends_with(".yaml") || text.ends_with(".yml") ||
      (text.find('/') != std::string::npos && std::filesystem::is_regular_file(text))) {
    return ParseYamlSpec(text);
  }
  std::vector<std::string_view> parts = Split(spec_text, ',');
  std::string_view head = parts[0];
  size_t x = head.find('x');
  int64_t count = 0;
  if (x == std::string_view::npos || !ParseInt(head.substr(0, x), count) || count <= 0 ||
      count > kMaxGpusPerNode || x + 1 >= head.size()) {
    return InvalidArgument(fmt::format(
        "fake GPU spec '{}': expected COUNTxMODEL such as 4xH100-80GB (COUNT in [1, {}])",
        spec_text, kMaxGpusPerNode));
  }
  const std::string model(head.substr(x + 1));
  const int64_t memory_gib = MemoryGibFromModel(model);
  if (memory_gib <= 0) {
    return InvalidArgument(fmt::format(
        "fake GPU spec '{}': model '{}' must end in -<GiB>GB, e.g. H100-80GB", spec_text, model));
  }
  FakeGpuSpec spec;
  spec.inventory.driver_version = "fake-1.0";
  std::string uuid_prefix = "fake";
  bool mig = false;
  std::string nvlink = fmt::format("1x{}", count);
  for (size_t i = 1; i < parts.size(); ++i) {
    size_t eq = parts[i].find('=');
    std::string_view key = parts[i].substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : parts[i].substr(eq + 1);
    if (key == "nvlink") {
      nvlink = value;
    } else if (key == "driver") {
      spec.inventory.driver_version = value;
    } else if (key == "mig") {
      mig = value == "on" || value == "true" || value == "1";
    } else if (key == "uuid") {
      uuid_prefix = value;
    } else if (key == "faults") {
      spec.faults_file = value;
    } else {
      return InvalidArgument(fmt::format(
          "fake GPU spec '{}': unknown option '{}' (known: nvlink, driver, mig, uuid, faults)",
          spec_text, key));
    }
  }
  BuildGpus(spec.inventory, static_cast<int>(count), model, memory_gib, mig, uuid_prefix);
  std::vector<std::vector<int>> domains;
  if (nvlink != "none") {
    size_t nx = nvlink.find('x');
    int64_t n_domains = 0, per_domain = 0;
    if (nx == std::string::npos || !ParseInt(std::string_view(nvlink).substr(0, nx), n_domains) ||
        !ParseInt(std::string_view(nvlink).substr(nx + 1), per_domain) || n_domains <= 0 ||
        per_domain <= 0 || n_domains * per_domain != count) {
      return InvalidArgument(fmt::format(
          "fake GPU spec '{}': nvlink={} must be DOMAINSxGPUS with DOMAINS*GPUS == {}, or none",
          spec_text, nvlink, count));
    }
    for (int d = 0; d < n_domains; ++d) {
      domains.emplace_back();
      for (int g = 0; g < per_domain; ++g) domains.back().push_back(d * per_domain + g);
    }
  }
  TIDAL_RETURN_IF_ERROR(ApplyDomains(spec.inventory, domains, "nvlink"));
  return spec;
}

FakeGpuProbe::FakeGpuProbe(FakeGpuSpec spec, uint64_t seed)
    : spec_(std::move(spec)), rng_(seed), load_(spec_.inventory.gpus.size()) {}

StatusOr<GpuInventory> FakeGpuProbe::Inventory() {
  std::lock_guard lock(mu_);
  return spec_.inventory;
}

void FakeGpuProbe::InjectFault(const GpuFault& fault) {
  std::lock_guard lock(mu_);
  pending_faults_.push_back(fault);
}

double FakeGpuActivity(double cpu_delta_s, double interval_s, double busy_cpu_share, double tick_s) {
  if (interval_s <= 0 || busy_cpu_share <= 0) return 0;
  const double share = std::max(0.0, cpu_delta_s - tick_s) / interval_s;
  return std::min(1.0, share / busy_cpu_share);
}

void FakeGpuProbe::SetLoad(int gpu_index, bool held, double activity) {
  std::lock_guard lock(mu_);
  if (gpu_index < 0 || gpu_index >= static_cast<int>(load_.size())) return;
  load_[gpu_index].held = held;
  load_[gpu_index].activity = std::clamp(activity, 0.0, 1.0);
}

void FakeGpuProbe::ReadControlFileLocked() {
  if (spec_.faults_file.empty()) return;
  std::ifstream in(spec_.faults_file, std::ios::binary);
  if (!in) return;  // not written yet
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < control_offset_) control_offset_ = 0;  // truncated: start over
  if (size == control_offset_) return;
  in.seekg(static_cast<std::streamoff>(control_offset_));
  std::string chunk(size - control_offset_, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  // Only whole lines: a writer may be half-way through the last one.
  const size_t last_newline = chunk.rfind('\n');
  if (last_newline == std::string::npos) return;
  control_offset_ += last_newline + 1;
  std::istringstream lines(chunk.substr(0, last_newline + 1));
  std::string line;
  const int gpu_count = static_cast<int>(load_.size());
  while (std::getline(lines, line)) {
    ++control_line_;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string command;
    int64_t gpu = -1;
    double value = 0;
    words >> command >> gpu >> value;
    if (!words.fail() && gpu >= 0 && gpu < gpu_count) {
      if (command == "xid") {
        pending_faults_.push_back({static_cast<int>(gpu), GpuFaultKind::kXid,
                                   static_cast<int64_t>(value)});
        continue;
      }
      if (command == "ecc" && value > 0) {
        pending_faults_.push_back({static_cast<int>(gpu), GpuFaultKind::kEccUncorrectable,
                                   static_cast<int64_t>(value)});
        continue;
      }
      if (command == "util") {
        load_[gpu].pinned_util_pct = value < 0 ? -1 : std::min(value, 100.0);
        continue;
      }
    }
    fmt::print(stderr, "{}:{}: ignored '{}': expected 'xid|ecc|util GPU VALUE' with GPU in [0, {})\n",
               spec_.faults_file, control_line_, line, gpu_count);
  }
}

std::vector<GpuFault> FakeGpuProbe::PollFaults() {
  std::lock_guard lock(mu_);
  ReadControlFileLocked();
  std::vector<GpuFault> out;
  out.swap(pending_faults_);
  return out;
}

StatusOr<std::vector<GpuSample>> FakeGpuProbe::Sample() {
  std::lock_guard lock(mu_);
  ReadControlFileLocked();
  std::vector<GpuSample> samples;
  for (size_t i = 0; i < load_.size(); ++i) {
    const GpuLoad& load = load_[i];
    GpuSample s;
    s.gpu_index = static_cast<int>(i);
    if (load.pinned_util_pct >= 0) {
      s.utilization_pct = load.pinned_util_pct;
    } else if (load.held && load.activity > 0) {
      // +-5 points of jitter so dashboards look alive; never above 100.
      s.utilization_pct = std::clamp(load.activity * 90.0 + (rng_.Uniform() - 0.5) * 10.0, 0.0, 100.0);
    }
    s.memory_used_mib = load.held ? spec_.inventory.gpus[i].memory_mib * 6 / 10 : 0;
    samples.push_back(s);
  }
  return samples;
}

}  // namespace tidal::agent
