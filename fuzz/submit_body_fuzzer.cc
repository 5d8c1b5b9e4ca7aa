// POST /v1/workloads, /v1/dry-run and /v1/workloads/{id}/resize bodies:
// the depth check, the JSON parser, the submit codec (names, then the spec)
// against the embedded example cluster's catalog, and the resize codec.
#include "fuzz/fuzz_input.h"
#include "server/server_config.h"
#include "server/workload_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tidal::server::ServerConfig* config = [] {
    auto c = tidal::server::ParseServerConfig("", "", "");
    return c.ok() ? new tidal::server::ServerConfig(*c) : nullptr;
  }();
  if (config == nullptr) __builtin_trap();  // the embedded config must load
  auto body = tidal::fuzz::AsJson(data, size);
  if (!body) return 0;
  (void)tidal::server::ParseResize(*body);
  auto names = tidal::server::ReadSubmitNames(*body);
  if (!names.ok()) return 0;
  // The project as admission would resolve it: the named one, else any.
  const std::string project = names->project.empty() ? "llm-sft" : names->project;
  auto spec = tidal::server::ParseSubmit(*body, config->catalog, project, tidal::Time{});
  if (spec.ok()) {
    // What the store keeps must read back.
    const nlohmann::json stored = tidal::server::RecordToStoredJson(spec->record, config->catalog);
    (void)tidal::server::RecordFromJson(stored, config->catalog);
  }
  (void)tidal::server::RequestDigest(*body);
  return 0;
}
