#include "sim/trace_loader.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "sim/text_reader.h"

namespace tidal::sim {

Status CheckTraceOptions(const std::string& path, const TraceOptions& o) {
  if (!(o.time_scale > 0)) return InvalidArgument(fmt::format("{}: time_scale must be > 0", path));
  if (!(o.duration_scale > 0))
    return InvalidArgument(fmt::format("{}: duration_scale must be > 0", path));
  if (!(o.load_scale >= 0)) return InvalidArgument(fmt::format("{}: load_scale must be >= 0", path));
  if (o.start_s < 0 || o.span_s < 0)
    return InvalidArgument(fmt::format("{}: start_s and span_s must be >= 0", path));
  if (o.node_gpus < 1 || o.node_gpus > 64)
    return InvalidArgument(fmt::format("{}: node_gpus must be in 1..64", path));
  if (!(o.window_s > 0)) return InvalidArgument(fmt::format("{}: window_s must be > 0", path));
  return Status::Ok();
}

namespace {
bool InWindow(double offset_s, const TraceOptions& o) {
  if (offset_s < o.start_s) return false;
  return o.span_s <= 0 || offset_s < o.start_s + o.span_s;
}
}  // namespace

void FinishTraceJobs(std::vector<TraceJob>& jobs, const TraceOptions& o) {
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  if (jobs.empty()) return;
  const double t0 = jobs.front().submit_s;
  std::vector<TraceJob> kept;
  kept.reserve(jobs.size());
  for (TraceJob& j : jobs) {
    const double offset = j.submit_s - t0;
    if (!InWindow(offset, o)) continue;
    j.submit_s = offset;
    kept.push_back(std::move(j));
    if (o.limit > 0 && kept.size() >= o.limit) break;
  }
  if (!kept.empty()) {
    const double first = kept.front().submit_s;
    for (TraceJob& j : kept) {
      j.submit_s = (j.submit_s - first) * o.time_scale;
      j.duration_s *= o.duration_scale;
    }
  }
  jobs = std::move(kept);
}

StatusOr<LoadSeries> BucketLoadSamples(const std::string& path, std::string_view time_field,
                                       const std::vector<LoadTraceSample>& samples, const TraceOptions& o,
                                       bool divide_by_window) {
  LoadSeries out;
  out.step_s = o.window_s * o.time_scale;
  if (samples.empty()) return out;
  double t0 = samples.front().time_s;
  for (const LoadTraceSample& s : samples) t0 = std::min(t0, s.time_s);
  for (const LoadTraceSample& s : samples) {
    const double offset = s.time_s - t0;
    if (!InWindow(offset, o)) continue;
    // Compared as a double: a far-off (or infinite) time must not reach the
    // cast, which is undefined past size_t's range.
    const double window = (offset - o.start_s) / o.window_s;
    if (!(window < static_cast<double>(kMaxLoadWindows))) {
      return FieldError(path, s.line, time_field,
                        fmt::format("{:.0f} s after the first sample: a load trace spans at most {} windows of {} s",
                                    offset, kMaxLoadWindows, o.window_s),
                        fmt::format("{}", s.time_s));
    }
    const size_t bucket = static_cast<size_t>(window);
    if (out.rps.size() <= bucket) out.rps.resize(bucket + 1, 0.0);
    out.rps[bucket] += s.value;
  }
  for (double& r : out.rps) r = (divide_by_window ? r / o.window_s : r) * o.load_scale;
  return out;
}

void SplitIntoPods(int gpus, int node_gpus, int& pods, int& gpus_per_pod) {
  gpus_per_pod = 1;
  for (int d = std::min(gpus, node_gpus); d >= 1; --d) {
    if (gpus % d == 0) {
      gpus_per_pod = d;
      break;
    }
  }
  pods = gpus / gpus_per_pod;
}

StatusOr<std::vector<TraceJob>> LoadPhillyTrace(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  std::string line;
  TIDAL_RETURN_IF_ERROR(ReadHeader(*in, {"timestamp", "duration", "num_gpus", "gpu_time", "cluster"}));
  std::vector<TraceJob> jobs;
  std::vector<std::string_view> f;
  while (in->Next(line)) {
    if (line.empty()) continue;  // philly.csv ends with one blank line
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 5)
      return FieldError(path, n, "row", fmt::format("expected 5 columns, found {}", f.size()), line);
    auto ts = ParseDateTime(f[0]);
    if (!ts) return FieldError(path, n, "timestamp", "expected YYYY-MM-DD HH:MM:SS", f[0]);
    auto duration = ParseDouble(f[1]);
    if (!duration || *duration < 0)
      return FieldError(path, n, "duration", "expected seconds >= 0", f[1]);
    auto gpus = ParseInt(f[2]);
    if (!gpus || *gpus < 1 || *gpus > 4096)
      return FieldError(path, n, "num_gpus", "expected an integer in 1..4096", f[2]);
    if (!ParseDouble(f[3])) return FieldError(path, n, "gpu_time", "expected a number", f[3]);
    if (f[4].empty()) return FieldError(path, n, "cluster", "expected a virtual cluster id", f[4]);
    TraceJob j;
    j.name = fmt::format("philly-{}", n);
    j.submit_s = *ts;
    j.duration_s = *duration;
    SplitIntoPods(static_cast<int>(*gpus), o.node_gpus, j.pods, j.gpus_per_pod);
    j.kind = WorkloadKind::kTraining;
    j.group = std::string(f[4]);
    j.line = n;
    jobs.push_back(std::move(j));
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  FinishTraceJobs(jobs, o);
  return jobs;
}

StatusOr<OpenbResult> LoadOpenbPods(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  std::string line;
  TIDAL_RETURN_IF_ERROR(ReadHeader(
      *in,
      {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
       "creation_time", "deletion_time", "scheduled_time"}));
  OpenbResult out;
  std::vector<std::string_view> f;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 11)
      return FieldError(path, n, "row", fmt::format("expected 11 columns, found {}", f.size()), line);
    if (f[0].empty()) return FieldError(path, n, "name", "expected a pod name", f[0]);
    auto num_gpu = ParseInt(f[3]);
    if (!num_gpu || *num_gpu < 0 || *num_gpu > 64)
      return FieldError(path, n, "num_gpu", "expected an integer in 0..64", f[3]);
    auto milli = ParseInt(f[4]);
    if (!milli || *milli < 0 || *milli > 1000)
      return FieldError(path, n, "gpu_milli", "expected an integer in 0..1000", f[4]);
    const std::string_view qos = f[6];
    if (qos != "LS" && qos != "BE" && qos != "Burstable" && qos != "Guaranteed")
      return FieldError(path, n, "qos", "expected LS, BE, Burstable or Guaranteed", qos);
    auto created = ParseDouble(f[8]);
    if (!created || *created < 0)
      return FieldError(path, n, "creation_time", "expected seconds >= 0", f[8]);
    auto deleted = ParseDouble(f[9]);
    if (!deleted || *deleted < *created)
      return FieldError(path, n, "deletion_time", "expected seconds >= creation_time", f[9]);
    if (*num_gpu == 0) {
      ++out.skipped_cpu_only;
      continue;
    }
    if (f[10].empty()) {
      // Never bound to a node (pod_phase Pending): it has no run time to
      // replay, and deletion - creation is how long it waited, not ran.
      ++out.skipped_never_ran;
      continue;
    }
    auto scheduled = ParseDouble(f[10]);
    if (!scheduled || *scheduled < *created || *scheduled > *deleted)
      return FieldError(path, n, "scheduled_time",
                        "expected empty or seconds between creation_time and deletion_time", f[10]);
    const double start = *scheduled;
    TraceJob j;
    j.name = std::string(f[0]);
    j.submit_s = *created;
    j.duration_s = *deleted - start;
    j.gpus_per_pod = static_cast<int>(*num_gpu);  // openb pods never span nodes
    j.pods = 1;
    j.kind = qos == "BE" ? WorkloadKind::kTraining : WorkloadKind::kInference;
    j.group = std::string(qos);
    j.line = n;
    out.jobs.push_back(std::move(j));
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  FinishTraceJobs(out.jobs, o);
  return out;
}

StatusOr<LoadSeries> LoadAzureLlmTrace(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  std::string line;
  TIDAL_RETURN_IF_ERROR(ReadHeader(*in, {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}));
  std::vector<LoadTraceSample> samples;
  std::vector<std::string_view> f;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 3)
      return FieldError(path, n, "row", fmt::format("expected 3 columns, found {}", f.size()), line);
    auto ts = ParseDateTime(f[0]);
    if (!ts) return FieldError(path, n, "TIMESTAMP", "expected YYYY-MM-DD HH:MM:SS.fffffff", f[0]);
    auto ctx = ParseInt(f[1]);
    if (!ctx || *ctx < 0) return FieldError(path, n, "ContextTokens", "expected an integer >= 0", f[1]);
    auto gen = ParseInt(f[2]);
    if (!gen || *gen < 0)
      return FieldError(path, n, "GeneratedTokens", "expected an integer >= 0", f[2]);
    samples.push_back({*ts, 1.0, n});
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  return BucketLoadSamples(path, "TIMESTAMP", samples, o, /*divide_by_window=*/true);
}

StatusOr<LoadSeries> LoadGenaiQps(const std::string& path, const TraceOptions& o) {
  TIDAL_RETURN_IF_ERROR(CheckTraceOptions(path, o));
  TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> in, LineReader::Open(path));
  std::string line;
  TIDAL_RETURN_IF_ERROR(ReadHeader(*in, {"timestamp_anon", "value", "container_ip", "request_type"}));
  std::vector<LoadTraceSample> samples;
  std::vector<std::string_view> f;
  while (in->Next(line)) {
    if (line.empty()) continue;
    const int n = in->line_number();
    SplitCsv(line, f);
    if (f.size() != 4)
      return FieldError(path, n, "row", fmt::format("expected 4 columns, found {}", f.size()), line);
    auto ts = ParseDouble(f[0]);
    if (!ts || *ts < 0) return FieldError(path, n, "timestamp_anon", "expected seconds >= 0", f[0]);
    auto v = ParseDouble(f[1]);
    if (!v || *v < 0 || !std::isfinite(*v)) return FieldError(path, n, "value", "expected a finite rate >= 0", f[1]);
    samples.push_back({*ts, *v, n});
  }
  TIDAL_RETURN_IF_ERROR(in->status());
  return BucketLoadSamples(path, "timestamp_anon", samples, o, /*divide_by_window=*/false);
}

}  // namespace tidal::sim
