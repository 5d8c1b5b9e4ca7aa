#include "sim/tiresias_trace_loader.h"

#include <memory>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {
namespace {

// Gang sizes in these files stay far below this; it bounds a bad value.
constexpr long long kMaxJobGpus = 4096;

}  // namespace

StatusOr<std::vector<TraceJob>> LoadTiresiasTrace(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(ReadHeader(*in, {"job_id", "num_gpu", "submit_time", "iterations",
                                         "model_name", "duration", "interval"}));
  std::vector<TraceJob> jobs;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 7)
      return FieldError(path, n, "row", fmt::format("expected 7 columns, found {}", f.size()), line);
    if (f[0].empty()) return FieldError(path, n, "job_id", "expected a job id", f[0]);
    auto gpus = ParseInt(f[1]);
    if (!gpus || *gpus < 1 || *gpus > kMaxJobGpus)
      return FieldError(path, n, "num_gpu", "expected an integer in 1..4096", f[1]);
    auto submit = ParseDouble(f[2]);
    if (!submit || *submit < 0) return FieldError(path, n, "submit_time", "expected seconds >= 0", f[2]);
    auto iterations = ParseInt(f[3]);
    if (!iterations || *iterations < 0)
      return FieldError(path, n, "iterations", "expected an integer >= 0", f[3]);
    if (f[4].empty()) return FieldError(path, n, "model_name", "expected a model name", f[4]);
    auto duration = ParseDouble(f[5]);
    if (!duration || *duration < 0) return FieldError(path, n, "duration", "expected seconds >= 0", f[5]);
    if (!ParseDouble(f[6])) return FieldError(path, n, "interval", "expected a number", f[6]);
    TraceJob j;
    j.name = fmt::format("tiresias-{}", f[0]);
    j.submit_s = *submit;
    j.duration_s = *duration;
    SplitIntoPods(static_cast<int>(*gpus), o.node_gpus, j.pods, j.gpus_per_pod);
    j.group = std::string(f[4]);
    j.line = n;
    jobs.push_back(std::move(j));
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  FinishTraceJobs(jobs, o);
  return jobs;
}

StatusOr<std::vector<TraceJob>> LoadPolluxWorkload(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  if (!(o.job_duration_s > 0))
    return InvalidArgument(fmt::format(
        "{}: a Pollux workload has no run times; set duration_s=SECONDS for its jobs", path));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  TIDAL_RETURN_IF_ERROR(
      ReadHeader(*in, {"name", "time", "application", "num_replicas", "batch_size"}));
  std::vector<TraceJob> jobs;
  std::vector<std::string_view> f;
  std::string line;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 5)
      return FieldError(path, n, "row", fmt::format("expected 5 columns, found {}", f.size()), line);
    if (f[0].empty()) return FieldError(path, n, "name", "expected a job name", f[0]);
    auto time = ParseDouble(f[1]);
    if (!time || *time < 0) return FieldError(path, n, "time", "expected seconds >= 0", f[1]);
    if (f[2].empty()) return FieldError(path, n, "application", "expected an application", f[2]);
    auto replicas = ParseInt(f[3]);
    if (!replicas || *replicas < 1 || *replicas > kMaxJobGpus)
      return FieldError(path, n, "num_replicas", "expected an integer in 1..4096", f[3]);
    auto batch = ParseInt(f[4]);
    if (!batch || *batch < 1) return FieldError(path, n, "batch_size", "expected an integer >= 1", f[4]);
    TraceJob j;
    j.name = std::string(f[0]);
    j.submit_s = *time;
    j.duration_s = o.job_duration_s;
    SplitIntoPods(static_cast<int>(*replicas), o.node_gpus, j.pods, j.gpus_per_pod);
    j.group = std::string(f[2]);
    j.line = n;
    jobs.push_back(std::move(j));
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  FinishTraceJobs(jobs, o);
  return jobs;
}

}  // namespace tidal::sim
