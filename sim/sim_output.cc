#include "sim/sim_output.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "sim/report.h"

namespace tidal::sim {

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Unavailable(fmt::format("{}: cannot write", path));
  out << text;
  out.close();
  if (!out) return Unavailable(fmt::format("{}: write failed", path));
  return Status::Ok();
}

std::string TimeSeriesCsv(const TimeSeries& s) {
  std::string out =
      "t_s,training_gpus,inference_gpus,batch_gpus,debug_gpus,lent_gpus,loans,returns,training_queue";
  for (const TimeSeries::Service& sv : s.services)
    out += fmt::format(",{0}_rps,{0}_capacity_rps,{0}_p99_ms,{0}_ready,{0}_desired,{0}_slo_miss", sv.name);
  out += "\n";
  for (size_t i = 0; i < s.t_s.size(); ++i) {
    out += fmt::format("{:.0f},{},{},{},{},{},{},{},{}", s.t_s[i], s.gpus_by_kind[0][i],
                       s.gpus_by_kind[1][i], s.gpus_by_kind[2][i], s.gpus_by_kind[3][i], s.lent_gpus[i],
                       s.loans[i], s.returns[i], s.training_queue[i]);
    for (const TimeSeries::Service& sv : s.services)
      out += fmt::format(",{:.3f},{:.3f},{:.3f},{},{},{}", sv.rps[i], sv.capacity_rps[i], sv.p99_ms[i],
                         sv.ready[i], sv.desired[i], sv.slo_miss[i]);
    out += "\n";
  }
  return out;
}

StatusOr<SimResult> RunToDirectory(const SimInput& input, const SimOptions& options,
                                   const std::string& out_dir, const std::string& report_bundle_js) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Unavailable(fmt::format("{}: cannot create directory: {}", out_dir, ec.message()));
  const std::string events_path = out_dir + "/events.jsonl";
  std::ofstream events(events_path, std::ios::binary);
  if (!events) return Unavailable(fmt::format("{}: cannot write", events_path));
  TIDAL_ASSIGN_OR_RETURN(SimResult result, RunSimulation(input, options, &events));
  events.close();
  if (!events) return Unavailable(fmt::format("{}: write failed", events_path));
  TIDAL_RETURN_IF_ERROR(WriteFile(out_dir + "/summary.json", result.summary.ToJson().dump(2) + "\n"));
  TIDAL_RETURN_IF_ERROR(WriteFile(out_dir + "/timeseries.csv", TimeSeriesCsv(result.series)));
  const std::string title = fmt::format("Tidal simulation: {} co-location, policy {}",
                                        result.summary.colocation, result.summary.policy);
  TIDAL_RETURN_IF_ERROR(WriteFile(out_dir + "/report.html", RenderReport(result, title, report_bundle_js)));
  return result;
}

StatusOr<nlohmann::json> ReadSummary(const std::string& dir) {
  const std::string path = dir + "/summary.json";
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("{}: cannot open (is {} a sim output directory?)", path, dir));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument(fmt::format("{}: not a JSON object", path));
  return j;
}

}  // namespace tidal::sim
