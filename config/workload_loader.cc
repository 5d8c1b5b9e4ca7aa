#include "config/workload_loader.h"

#include <set>

#include "config/field_reader.h"
#include "config/yaml_document.h"

namespace tidal::config {

StatusOr<std::vector<WorkloadSpec>> ParseWorkloadJson(const nlohmann::json& root,
                                                      const ClusterConfig& cluster) {
  const nlohmann::json* list = &root;
  std::string path;
  if (root.is_object()) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(root, "", {"workloads"}));
    if (!r.Has("workloads")) return FieldError("workloads", "required field is missing");
    list = &r.at("workloads");
    path = "workloads";
  }
  TIDAL_RETURN_IF_ERROR(ExpectArray(*list, path));
  std::vector<WorkloadSpec> specs;
  std::set<std::string> names;
  const NameScope scope = ScopeOf(cluster);
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string item_path = IndexPath(path, i);
    WorkloadJsonOptions options;
    options.id = i + 1;
    TIDAL_ASSIGN_OR_RETURN(WorkloadSpec spec, WorkloadFromJson((*list)[i], scope, options, item_path));
    if (!names.insert(spec.workload.name).second) {
      return FieldError(JoinPath(item_path, "name"), "duplicate workload '" + spec.workload.name + "'");
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

StatusOr<std::vector<WorkloadSpec>> ParseWorkloadYaml(std::string_view text, const ClusterConfig& cluster,
                                                      std::string source_name) {
  TIDAL_ASSIGN_OR_RETURN(YamlDocument doc, YamlDocument::Parse(text, std::move(source_name)));
  StatusOr<std::vector<WorkloadSpec>> specs = ParseWorkloadJson(doc.root(), cluster);
  if (!specs.ok()) return doc.Locate(specs.status());
  return specs;
}

StatusOr<std::vector<WorkloadSpec>> LoadWorkloadFile(const std::string& path, const ClusterConfig& cluster) {
  TIDAL_ASSIGN_OR_RETURN(YamlDocument doc, YamlDocument::Load(path));
  StatusOr<std::vector<WorkloadSpec>> specs = ParseWorkloadJson(doc.root(), cluster);
  if (!specs.ok()) return doc.Locate(specs.status());
  return specs;
}

}  // namespace tidal::config
