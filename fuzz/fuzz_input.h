// Shared by the fuzz targets (fuzz/*_fuzzer.cc): each defines
// LLVMFuzzerTestOneInput, the libFuzzer entry point. Built with
// -DTIDAL_FUZZ=ON under clang they link libFuzzer; otherwise replay_main.cc
// feeds them every file of the seed corpus (docs/RELIABILITY.md).
#ifndef TIDAL_FUZZ_FUZZ_INPUT_H_
#define TIDAL_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/input_limits.h"

namespace tidal::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input as the server parses a request body: depth-checked first (a deep
// body must be refused, not recursed into), then parsed without exceptions.
inline std::optional<nlohmann::json> AsJson(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  if (!config::CheckJsonDepth(text, "body").ok()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace tidal::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#endif  // TIDAL_FUZZ_FUZZ_INPUT_H_
