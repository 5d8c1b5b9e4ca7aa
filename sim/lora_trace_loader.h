// Alibaba GenAI serving requests (alibaba-genai-serving-v2026/
// lora_request_trace.csv, Lin et al., SoCC'25): one Stable Diffusion request
// per row over 23 days, with a strong daily cycle, so the longest diurnal
// load driver among the public traces.
#ifndef TIDAL_SIM_LORA_TRACE_LOADER_H_
#define TIDAL_SIM_LORA_TRACE_LOADER_H_

#include <string>

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
StatusOr<LoadSeries> LoadGenaiLoraTrace(const std::string& path, const TraceOptions& options);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_LORA_TRACE_LOADER_H_
