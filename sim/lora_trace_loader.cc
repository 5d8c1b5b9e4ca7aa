#include "sim/lora_trace_loader.h"

#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {
namespace {

// Index of `value` in `wanted`, or -1; an empty list matches everything (-2).
int Match(const std::vector<std::string>& wanted, std::string_view value) {
  if (wanted.empty()) return -2;
  for (size_t i = 0; i < wanted.size(); ++i)
    if (wanted[i] == value) return static_cast<int>(i);
  return -1;
}

// An error for the first filter value that matched no row of the file.
Status CheckAllSeen(const std::string& path, const std::vector<std::string>& wanted,
                    const std::vector<bool>& seen, std::string_view key, std::string_view column) {
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (seen[i]) continue;
    return InvalidArgument(fmt::format(
        "{}: field '{}': no request has {} \"{}\" (key '{}' of the load-trace spec)", path, column,
        column, wanted[i], key));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<LoadSeries> LoadGenaiLoraTrace(const std::string& path, const TraceOptions& o,
                                        const LoraRequestFilter& filter) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(ReadHeader(
      *in, {"gmt_create", "predict_type", "predict_status", "exec_time_seconds", "groupId",
            "prompt_length", "negative_prompt_length", "num_images_per_prompt",
            "num_inference_steps", "checkpoint_model_version_id", "num_lora"}));
  std::vector<LoadTraceSample> samples;
  std::vector<bool> model_seen(filter.models.size(), false);
  std::vector<bool> type_seen(filter.request_types.size(), false);
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
    // checkpoint_model_version_id is empty on 25 rows of the published
    // file: such a request matches no model filter.
    const int model = Match(filter.models, f[9]);
    const int type = Match(filter.request_types, f[1]);
    if (model >= 0) model_seen[static_cast<size_t>(model)] = true;
    if (type >= 0) type_seen[static_cast<size_t>(type)] = true;
    // A request the filter leaves out still counts for the time origin
    // (value 0): curves cut from one file by different filters stay aligned.
    const bool kept = model != -1 && type != -1;
    samples.push_back({*ts, kept ? 1.0 : 0.0, n});
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  TIDAL_RETURN_IF_ERROR(
      CheckAllSeen(path, filter.models, model_seen, "model", "checkpoint_model_version_id"));
  TIDAL_RETURN_IF_ERROR(
      CheckAllSeen(path, filter.request_types, type_seen, "request_type", "predict_type"));
  return BucketLoadSamples(path, "gmt_create", samples, o, /*divide_by_window=*/true);
}

}  // namespace tidal::sim
