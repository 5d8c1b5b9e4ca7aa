// Alibaba GenAI serving requests (alibaba-genai-serving-v2026/
// lora_request_trace.csv, Lin et al., SoCC'25): one Stable Diffusion request
// per row over 23 days, with a strong daily cycle, so the longest diurnal
// load driver among the public traces.
#ifndef TIDAL_SIM_LORA_TRACE_LOADER_H_
#define TIDAL_SIM_LORA_TRACE_LOADER_H_

#include <string>
#include <vector>

#include "core/common/status.h"
#include "sim/trace_loader.h"

namespace tidal::sim {

// Columns: gmt_create,predict_type,predict_status,exec_time_seconds,groupId,
// prompt_length,negative_prompt_length,num_images_per_prompt,
// num_inference_steps,checkpoint_model_version_id,num_lora. Every request
// (whatever its status: a failed one was still sent) counts as one arrival;
// arrivals per window_s become requests/s. gmt_create is shifted by an unknown
// constant upstream, so the hour of day is relative (diurnal_peak_h does not
// apply to it; the cycle is the trace's own).
//
// `filter` keeps only some requests (keys model= and request_type= of a
// --load-trace spec), so that one file drives several services. The time
// origin (offset 0, start_s, span_s) is the first request of the whole file
// whatever the filter, so curves cut from one file by different filters stay
// aligned, and each curve runs to the file's last request. A filter value no
// row of the file has is an error naming the column (a typo would otherwise
// give a silent zero load).
struct LoraRequestFilter {
  std::vector<std::string> models;         // checkpoint_model_version_id; empty = every model
  std::vector<std::string> request_types;  // predict_type; empty = every type
};
StatusOr<LoadSeries> LoadGenaiLoraTrace(const std::string& path, const TraceOptions& options,
                                        const LoraRequestFilter& filter = {});

}  // namespace tidal::sim

#endif  // TIDAL_SIM_LORA_TRACE_LOADER_H_
