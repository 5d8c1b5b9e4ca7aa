#include "sim/lora_trace_loader.h"

#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {

StatusOr<LoadSeries> LoadGenaiLoraTrace(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(ReadHeader(
      *in, {"gmt_create", "predict_type", "predict_status", "exec_time_seconds", "groupId",
            "prompt_length", "negative_prompt_length", "num_images_per_prompt",
            "num_inference_steps", "checkpoint_model_version_id", "num_lora"}));
  std::vector<LoadTraceSample> samples;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 11)
      return FieldError(path, n, "row", fmt::format("expected 11 columns, found {}", f.size()), line);
    auto ts = ParseDateTime(f[0]);
    if (!ts) return FieldError(path, n, "gmt_create", "expected YYYY-MM-DD HH:MM:SS", f[0]);
    if (f[1].empty()) return FieldError(path, n, "predict_type", "expected a request type", f[1]);
    const std::string_view status = f[2];
    if (status != "SUCCEED" && status != "FAILED" && status != "PENDING" && status != "PROCESSING")
      return FieldError(path, n, "predict_status", "expected SUCCEED, FAILED, PENDING or PROCESSING",
                        status);
    if (!f[3].empty()) {  // empty for requests still pending
      auto exec = ParseDouble(f[3]);
      if (!exec || *exec < 0)
        return FieldError(path, n, "exec_time_seconds", "expected empty or seconds >= 0", f[3]);
    }
    auto lora = ParseInt(f[10]);
    if (!lora || *lora < 0 || *lora > 64)
      return FieldError(path, n, "num_lora", "expected an integer in 0..64", f[10]);
    samples.push_back({*ts, 1.0, n});
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  return BucketLoadSamples(path, "gmt_create", samples, o, /*divide_by_window=*/true);
}

}  // namespace tidal::sim
