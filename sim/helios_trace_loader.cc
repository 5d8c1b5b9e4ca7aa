#include "sim/helios_trace_loader.h"

#include <memory>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {

StatusOr<TraceJobs> LoadHeliosTrace(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(ReadHeader(
      *in, {"job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time",
            "start_time", "end_time", "duration", "queue"}));
  TraceJobs out;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 12)
      return FieldError(path, n, "row", fmt::format("expected 12 columns, found {}", f.size()), line);
    if (f[0].empty()) return FieldError(path, n, "job_id", "expected a job id", f[0]);
    if (f[2].empty()) return FieldError(path, n, "vc", "expected a virtual cluster", f[2]);
    auto gpus = ParseInt(f[3]);
    if (!gpus || *gpus < 0 || *gpus > 4096)
      return FieldError(path, n, "gpu_num", "expected an integer in 0..4096", f[3]);
    auto nodes = ParseInt(f[5]);
    if (!nodes || *nodes < 0 || *nodes > 512)
      return FieldError(path, n, "node_num", "expected an integer in 0..512", f[5]);
    if (f[6].empty()) return FieldError(path, n, "state", "expected a job state", f[6]);
    auto submit = ParseDateTime(f[7]);
    if (!submit) return FieldError(path, n, "submit_time", "expected YYYY-MM-DD HH:MM:SS", f[7]);
    std::optional<double> start;
    if (!f[8].empty()) {
      start = ParseDateTime(f[8]);
      if (!start || *start < *submit)
        return FieldError(path, n, "start_time", "expected empty or a time at or after submit_time",
                          f[8]);
    }
    auto duration = ParseDouble(f[10]);
    if (!duration || *duration < 0) return FieldError(path, n, "duration", "expected seconds >= 0", f[10]);
    if (*gpus == 0) {
      ++out.skipped_cpu_only;
      continue;
    }
    if (!start) {
      ++out.skipped_never_ran;
      continue;
    }
    TraceJob j;
    j.name = fmt::format("helios-{}", f[0]);
    j.submit_s = *submit;
    j.duration_s = *duration;
    const int g = static_cast<int>(*gpus);
    const int k = static_cast<int>(*nodes);
    if (k >= 1 && g % k == 0 && g / k <= o.node_gpus) {
      j.pods = k;
      j.gpus_per_pod = g / k;
    } else {
      SplitIntoPods(g, o.node_gpus, j.pods, j.gpus_per_pod);
    }
    j.group = std::string(f[2]);
    j.line = n;
    out.jobs.push_back(std::move(j));
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  FinishTraceJobs(out.jobs, o);
  return out;
}

}  // namespace tidal::sim
