#include "sim/dlrm_trace_loader.h"

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {
namespace {

// Empty = unknown (before or after the trace); otherwise seconds >= 0.
bool ParseOptionalTime(std::string_view text, std::optional<double>& out) {
  out.reset();
  if (text.empty()) return true;
  auto v = ParseDouble(text);
  if (!v || *v < 0) return false;
  out = *v;
  return true;
}

}  // namespace

StatusOr<TraceJobs> LoadDlrmInstances(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(ReadHeader(
      *in, {"instance_sn", "role", "app_name", "cpu_request", "cpu_limit", "gpu_request",
            "gpu_limit", "rdma_request", "rdma_limit", "memory_request", "memory_limit",
            "disk_request", "disk_limit", "max_instance_per_node", "creation_time",
            "scheduled_time", "deletion_time"}));
  TraceJobs out;
  // Deletion times are known only once the whole file is read (the trace end
  // is its latest time), so open-ended instances are finished afterwards.
  std::vector<size_t> open_ended;
  double trace_end = 0;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 17)
      return FieldError(path, n, "row", fmt::format("expected 17 columns, found {}", f.size()), line);
    if (f[0].empty()) return FieldError(path, n, "instance_sn", "expected an instance id", f[0]);
    if (f[1] != "CN" && f[1] != "HN") return FieldError(path, n, "role", "expected CN or HN", f[1]);
    if (f[2].empty()) return FieldError(path, n, "app_name", "expected a service name", f[2]);
    auto gpus = ParseInt(f[5]);
    if (!gpus || *gpus < 0 || *gpus > 64)
      return FieldError(path, n, "gpu_request", "expected an integer in 0..64", f[5]);
    std::optional<double> created, scheduled, deleted;
    if (!ParseOptionalTime(f[14], created))
      return FieldError(path, n, "creation_time", "expected empty or seconds >= 0", f[14]);
    if (!ParseOptionalTime(f[15], scheduled) || (scheduled && created && *scheduled < *created))
      return FieldError(path, n, "scheduled_time", "expected empty or seconds >= creation_time", f[15]);
    const double start = scheduled.value_or(created.value_or(0));
    if (!ParseOptionalTime(f[16], deleted) || (deleted && *deleted < start))
      return FieldError(path, n, "deletion_time", "expected empty or seconds >= scheduled_time", f[16]);
    trace_end = std::max({trace_end, start, deleted.value_or(0)});
    if (*gpus == 0) {
      ++out.skipped_cpu_only;
      continue;
    }
    TraceJob j;
    j.name = std::string(f[0]);
    j.submit_s = created.value_or(0);
    j.duration_s = deleted ? *deleted - start : -start;  // open-ended: trace_end - start below
    j.gpus_per_pod = static_cast<int>(*gpus);
    j.pods = 1;
    j.kind = WorkloadKind::kInference;
    j.group = std::string(f[2]);
    j.line = n;
    if (!deleted) open_ended.push_back(out.jobs.size());
    out.jobs.push_back(std::move(j));
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  for (size_t i : open_ended) out.jobs[i].duration_s += trace_end;
  FinishTraceJobs(out.jobs, o);
  return out;
}

}  // namespace tidal::sim
