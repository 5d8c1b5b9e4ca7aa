#include "server/mutation_codec.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tidal::server {

using nlohmann::json;

std::string EncodeMutation(const Mutation& m) {
  json j = json::object();
  if (!m.workloads.empty()) j["workloads"] = m.workloads;
  if (!m.nodes.empty()) j["nodes"] = m.nodes;
  if (!m.audit.empty()) {
    json& audit = j["audit"] = json::array();
    for (const AuditRow& a : m.audit) {
      audit.push_back({{"seq", a.seq}, {"time_ms", a.time_ms}, {"actor", a.actor}, {"action", a.action},
                       {"workload", a.workload}, {"tenant", a.tenant}, {"project", a.project},
                       {"detail", a.detail_json}});
    }
  }
  if (!m.idempotency.empty()) {
    json& keys = j["idempotency"] = json::array();
    for (const IdempotencyRow& k : m.idempotency) keys.push_back({k.key, k.workload});
  }
  if (!m.journal.empty()) j["journal"] = m.journal;
  if (!m.meta.empty()) j["meta"] = m.meta;
  if (!m.snapshot.empty()) {
    j["snapshot"] = m.snapshot;
    j["snapshot_seq"] = m.snapshot_seq;
  }
  if (m.keep_load_since_ms != 0) j["keep_load_since_ms"] = m.keep_load_since_ms;
  // Replace, not throw: records are the server's own JSON, but a journal
  // entry must never be what stops the writer.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string JoinMutations(const std::vector<std::string>& encoded) {
  size_t size = 2;
  for (const std::string& e : encoded) size += e.size() + 1;
  std::string out;
  out.reserve(size);
  out += '[';
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (i) out += ',';
    out += encoded[i];
  }
  out += ']';
  return out;
}

namespace {

// Reads field `key` of `j` into `out` when present; a wrong type is an error.
template <typename T>
Status Field(const json& j, const char* key, size_t index, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  try {
    *out = it->get<T>();
  } catch (const json::exception& e) {
    return Internal(fmt::format("mutation {}: {}: {}", index, key, e.what()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<Mutation>> DecodeMutations(std::string_view text) {
  json list = json::parse(text, nullptr, false);
  if (list.is_discarded() || !list.is_array()) return Internal("mutations: not a JSON list (a torn entry)");
  std::vector<Mutation> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& j = list[i];
    if (!j.is_object()) return Internal(fmt::format("mutation {}: not an object", i));
    Mutation m;
    TIDAL_RETURN_IF_ERROR(Field(j, "workloads", i, &m.workloads));
    TIDAL_RETURN_IF_ERROR(Field(j, "nodes", i, &m.nodes));
    TIDAL_RETURN_IF_ERROR(Field(j, "journal", i, &m.journal));
    TIDAL_RETURN_IF_ERROR(Field(j, "meta", i, &m.meta));
    TIDAL_RETURN_IF_ERROR(Field(j, "snapshot", i, &m.snapshot));
    TIDAL_RETURN_IF_ERROR(Field(j, "snapshot_seq", i, &m.snapshot_seq));
    TIDAL_RETURN_IF_ERROR(Field(j, "keep_load_since_ms", i, &m.keep_load_since_ms));
    std::vector<std::pair<std::string, uint64_t>> keys;
    TIDAL_RETURN_IF_ERROR(Field(j, "idempotency", i, &keys));
    for (auto& [key, workload] : keys) m.idempotency.push_back({std::move(key), workload});
    if (auto audit = j.find("audit"); audit != j.end()) {
      if (!audit->is_array()) return Internal(fmt::format("mutation {}: audit: not a list", i));
      for (const json& a : *audit) {
        if (!a.is_object()) return Internal(fmt::format("mutation {}: audit: a row is not an object", i));
        AuditRow row;
        TIDAL_RETURN_IF_ERROR(Field(a, "seq", i, &row.seq));
        TIDAL_RETURN_IF_ERROR(Field(a, "time_ms", i, &row.time_ms));
        TIDAL_RETURN_IF_ERROR(Field(a, "actor", i, &row.actor));
        TIDAL_RETURN_IF_ERROR(Field(a, "action", i, &row.action));
        TIDAL_RETURN_IF_ERROR(Field(a, "workload", i, &row.workload));
        TIDAL_RETURN_IF_ERROR(Field(a, "tenant", i, &row.tenant));
        TIDAL_RETURN_IF_ERROR(Field(a, "project", i, &row.project));
        TIDAL_RETURN_IF_ERROR(Field(a, "detail", i, &row.detail_json));
        m.audit.push_back(std::move(row));
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace tidal::server
