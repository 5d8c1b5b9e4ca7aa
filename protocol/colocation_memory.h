// The co-location controller's memory (core/colocation/colocation_controller.h
// ColocationMemory) as the journal snapshot keeps it, under "colocation"
// (docs/formats.md "Snapshots"). A replay that starts at a snapshot restores
// it, so its forecasts, replica targets, loans and relend holds go on as the
// server's did.
//
// Lossless and strict like the rest of the snapshot: doubles are written
// with round-trip precision, every field is required, an unknown field, a
// wrong type or an oversized list is an error naming the field
// ("colocation.load[0].profile[3]: ...").
#ifndef TIDAL_PROTOCOL_COLOCATION_MEMORY_H_
#define TIDAL_PROTOCOL_COLOCATION_MEMORY_H_

#include <string>

#include <nlohmann/json.hpp>

#include "core/colocation/colocation_controller.h"
#include "core/common/status.h"

namespace tidal::protocol {

nlohmann::json ColocationMemoryToJson(const ColocationMemory& memory);
// `path` names the object in errors ("colocation").
StatusOr<ColocationMemory> ColocationMemoryFromJson(const nlohmann::json& j, const std::string& path);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_COLOCATION_MEMORY_H_
