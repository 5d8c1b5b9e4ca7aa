#include "server/process_collector.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace tidal::server {
namespace {

std::string ReadAll(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// btime of /proc/stat: when the machine booted, in seconds since the epoch.
double BootTimeSeconds() {
  std::istringstream in(ReadAll("/proc/stat"));
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = 0;
      in >> t;
      return t;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

prometheus::MetricFamily One(const std::string& name, const std::string& help,
                             prometheus::MetricType type, double value) {
  prometheus::MetricFamily f{name, help, type, {}};
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

std::optional<ProcessStats> ParseProcStat(std::string_view stat, long ticks_per_second,
                                          double boot_time_seconds, long page_bytes) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  // After "pid (comm)" comes field 3 (state); utime and stime are fields 14
  // and 15, starttime 22, vsize 23 and rss (pages) 24: see proc(5).
  std::istringstream in{std::string(stat.substr(close + 1))};
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  auto field = [&](int n) -> std::optional<double> {
    const size_t i = n - 3;
    if (i >= fields.size()) return std::nullopt;
    double v = 0;
    const auto [p, ec] = std::from_chars(fields[i].data(), fields[i].data() + fields[i].size(), v);
    if (ec != std::errc() || p != fields[i].data() + fields[i].size()) return std::nullopt;
    return v;
  };
  const auto utime = field(14), stime = field(15), start = field(22), vsize = field(23), rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  ProcessStats s;
  s.cpu_seconds = (*utime + *stime) / ticks_per_second;
  s.start_time_seconds = boot_time_seconds + *start / ticks_per_second;
  s.virtual_memory_bytes = *vsize;
  s.resident_memory_bytes = *rss * page_bytes;
  return s;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const auto stats = ParseProcStat(ReadAll("/proc/self/stat"), sysconf(_SC_CLK_TCK), BootTimeSeconds(),
                                   sysconf(_SC_PAGESIZE));
  if (stats) {
    out.push_back(One("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                      MetricType::Counter, stats->cpu_seconds));
    out.push_back(One("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                      MetricType::Gauge, stats->start_time_seconds));
    out.push_back(One("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
                      stats->resident_memory_bytes));
    out.push_back(One("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
                      stats->virtual_memory_bytes));
  }
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) {
    // The iterator's own descriptor is among those counted.
    out.push_back(One("process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
                      std::max(0.0, fds - 1)));
  }
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    out.push_back(One("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
                      static_cast<double>(lim.rlim_cur)));
  }
  return out;
}

}  // namespace tidal::server
