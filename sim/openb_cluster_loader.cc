#include "sim/openb_cluster_loader.h"

#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/cluster_loader.h"
#include "sim/text_reader.h"

namespace tidal::sim {
namespace {

// GPU memory of the disclosed models (GiB); the internal codes G1-G3 are
// unknown and left 0 (no workload of a trace asks for GPU memory).
int GpuMemoryGib(std::string_view model) {
  if (model == "P100" || model == "T4" || model == "V100M16") return 16;
  if (model == "V100M32") return 32;
  if (model == "A10") return 24;
  return 0;
}

}  // namespace

StatusOr<OpenbCluster> LoadOpenbCluster(const std::string& path, const OpenbClusterOptions& o) {
  if (!(o.inference_share >= 0 && o.inference_share <= 1))
    return InvalidArgument(fmt::format("{}: inference_share must be in 0..1", path));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(ReadHeader(*in, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  OpenbCluster out;
  nlohmann::json nodes = nlohmann::json::array();
  // Per model: nodes seen and nodes put in the shared pool, so that each
  // model is split by inference_share (the first node of a model goes to
  // shared when the share is above 0).
  std::map<std::string, std::pair<int, int>> per_model;
  int shared_gpus = 0, training_gpus = 0;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 5)
      return FieldError(path, n, "row", fmt::format("expected 5 columns, found {}", f.size()), line);
    if (f[0].empty() || f[0].size() > 128)
      return FieldError(path, n, "sn", "expected a node name of 1..128 characters", f[0]);
    if (auto cpu = ParseInt(f[1]); !cpu || *cpu < 0)
      return FieldError(path, n, "cpu_milli", "expected an integer >= 0", f[1]);
    if (auto mem = ParseInt(f[2]); !mem || *mem < 0)
      return FieldError(path, n, "memory_mib", "expected an integer >= 0", f[2]);
    auto gpus = ParseInt(f[3]);
    if (!gpus || *gpus < 0 || *gpus > 64)
      return FieldError(path, n, "gpu", "expected an integer in 0..64", f[3]);
    if (*gpus == 0) {
      ++out.skipped_cpu_nodes;
      continue;
    }
    if (f[4].empty() || f[4].size() > 64)
      return FieldError(path, n, "model", "expected the GPU model of a GPU node", f[4]);
    auto& [seen, shared] = per_model[std::string(f[4])];
    ++seen;
    const bool to_shared = shared < o.inference_share * seen;
    if (to_shared) ++shared;
    (to_shared ? shared_gpus : training_gpus) += static_cast<int>(*gpus);
    nodes.push_back({{"name", std::string(f[0])},
                     {"rack", "openb"},
                     {"pool", to_shared ? "shared" : "training"},
                     {"gpus", *gpus},
                     {"gpu_model", std::string(f[4])},
                     {"gpu_memory_gib", GpuMemoryGib(f[4])}});
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  if (nodes.empty()) return InvalidArgument(fmt::format("{}: no GPU node", path));
  nlohmann::json root = {
      {"zones", nlohmann::json::array({"openb"})},
      {"racks", nlohmann::json::array({nlohmann::json{{"name", "openb"}, {"zone", "openb"}}})},
      {"pools", nlohmann::json::array({"shared", "training"})},
      {"nodes", std::move(nodes)},
      {"queues",
       {{{"name", "serving"}, {"guaranteed_gpus", shared_gpus}, {"pools", nlohmann::json::array({"shared"})}},
        {{"name", "batch"}, {"guaranteed_gpus", training_gpus}, {"pools", nlohmann::json::array({"training", "shared"})}}}},
      {"projects",
       {{{"name", "online"}, {"tenant", "online"}, {"tier", "critical"}, {"queue", "serving"},
         {"top_tier_approved", true}},
        {{"name", "batch"}, {"tenant", "batch"}, {"tier", "standard"}, {"queue", "batch"}}}},
  };
  auto config = config::ParseClusterJson(root);
  if (!config.ok())
    return InvalidArgument(fmt::format("{}: {}", path, config.status().message()));
  out.config = std::move(*config);
  return out;
}

bool IsOpenbClusterSpec(std::string_view text) { return text.substr(0, 6) == "openb:"; }

StatusOr<OpenbCluster> LoadOpenbClusterSpec(std::string_view text) {
  std::vector<std::string_view> parts;
  SplitCsv(text.substr(6), parts);
  const std::string path(parts[0]);
  if (path.empty()) return InvalidArgument(fmt::format("--cluster \"{}\": empty path", text));
  OpenbClusterOptions o;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    const std::string_view key = parts[i].substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : parts[i].substr(eq + 1);
    if (key != "inference_share")
      return InvalidArgument(
          fmt::format("--cluster \"{}\": unknown key '{}' (inference_share)", text, key));
    auto v = ParseDouble(value);
    if (!v || *v < 0 || *v > 1)
      return InvalidArgument(fmt::format(
          "--cluster \"{}\": key 'inference_share': expected a share in 0..1 (got \"{}\")", text, value));
    o.inference_share = *v;
  }
  return LoadOpenbCluster(path, o);
}

}  // namespace tidal::sim
