#include "protocol/pod_log.h"

#include "protocol/object_reader.h"

namespace tidal::protocol {

using nlohmann::json;

json PodLogBatchToJson(const PodLogBatch& batch) {
  json chunks = json::array();
  for (const PodLogChunk& c : batch.chunks) {
    json j = {{"workload", c.key.workload}, {"rank", c.key.rank}, {"data", c.data}};
    if (c.key.attempt > 0) j["attempt"] = c.key.attempt;
    chunks.push_back(std::move(j));
  }
  return {{"chunks", std::move(chunks)}};
}

StatusOr<PodLogBatch> PodLogBatchFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::vector<std::string_view>{"chunks"}));
  if (!r.Has("chunks")) return r.Missing("chunks");
  TIDAL_RETURN_IF_ERROR(ExpectArray(r.at("chunks"), "chunks"));
  PodLogBatch batch;
  size_t i = 0;
  for (const json& c : r.at("chunks")) {
    TIDAL_ASSIGN_OR_RETURN(ObjectReader cr, ObjectReader::Open(c, IndexPath("chunks", i++),
                                                               std::vector<std::string_view>{"workload", "rank", "attempt", "data"}));
    PodLogChunk chunk;
    if (!cr.Has("workload")) return cr.Missing("workload");
    int64_t workload = 0;
    TIDAL_RETURN_IF_ERROR(cr.Int64("workload", &workload, 1));
    chunk.key.workload = static_cast<uint64_t>(workload);
    if (!cr.Has("rank")) return cr.Missing("rank");
    TIDAL_RETURN_IF_ERROR(cr.Int("rank", &chunk.key.rank, 0));
    TIDAL_RETURN_IF_ERROR(cr.Int64("attempt", &chunk.key.attempt, 0));
    if (!cr.Has("data")) return cr.Missing("data");
    TIDAL_RETURN_IF_ERROR(cr.String("data", &chunk.data));
    if (static_cast<int64_t>(chunk.data.size()) > kMaxPodLogChunkBytes) {
      return FieldError(cr.FieldPath("data"),
                        std::to_string(chunk.data.size()) + " bytes is above the limit of " +
                            std::to_string(kMaxPodLogChunkBytes) + " per chunk");
    }
    batch.chunks.push_back(std::move(chunk));
  }
  return batch;
}

json PodLogPageToJson(const PodLogPage& p) {
  return {{"workload", p.workload}, {"rank", p.rank},           {"offset", p.offset},
          {"next_offset", p.next_offset}, {"truncated", p.truncated}, {"data", p.data}};
}

StatusOr<PodLogPage> PodLogPageFromJson(const json& j) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(j, "", std::nullopt));
  PodLogPage p;
  for (const char* key : {"workload", "rank", "offset", "next_offset", "data"}) {
    if (!r.Has(key)) return r.Missing(key);
  }
  int64_t workload = 0;
  TIDAL_RETURN_IF_ERROR(r.Int64("workload", &workload, 1));
  p.workload = static_cast<uint64_t>(workload);
  TIDAL_RETURN_IF_ERROR(r.Int("rank", &p.rank, 0));
  TIDAL_RETURN_IF_ERROR(r.Int64("offset", &p.offset, 0));
  TIDAL_RETURN_IF_ERROR(r.Int64("next_offset", &p.next_offset, p.offset));
  TIDAL_RETURN_IF_ERROR(r.Bool("truncated", &p.truncated));
  TIDAL_RETURN_IF_ERROR(r.String("data", &p.data));
  return p;
}

std::string ValidUtf8Prefix(std::string_view data, size_t* consumed) {
  std::string out;
  out.reserve(data.size());
  size_t i = 0;
  const size_t n = data.size();
  while (i < n) {
    const auto b = static_cast<unsigned char>(data[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0) {  // a stray continuation byte or 0xF8..0xFF
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (i + len > n) {
      // Maybe the rest of a sequence is still to come; unless what is here
      // already cannot be one.
      bool could_be = true;
      for (size_t k = i + 1; k < n; ++k) could_be = could_be && (static_cast<unsigned char>(data[k]) >> 6) == 0x2;
      if (could_be) break;
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    bool ok = true;
    for (size_t k = 1; k < len; ++k) ok = ok && (static_cast<unsigned char>(data[i + k]) >> 6) == 0x2;
    // Overlong forms, surrogates and values above U+10FFFF are invalid too;
    // nlohmann's dump would throw on them.
    if (ok && len > 1) {
      uint32_t cp = b & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(data[i + k]) & 0x3F);
      const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    out.append(data.substr(i, len));
    i += len;
  }
  *consumed = i;
  return out;
}

}  // namespace tidal::protocol
