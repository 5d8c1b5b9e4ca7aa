// The standard process_* metrics of Prometheus client libraries, which
// prometheus-cpp 1.0 does not have: CPU time, memory, file descriptors and
// start time of this process, read from /proc at each scrape.
#ifndef TIDAL_SERVER_PROCESS_COLLECTOR_H_
#define TIDAL_SERVER_PROCESS_COLLECTOR_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidal::server {

struct ProcessStats {
  double cpu_seconds = 0;         // user + system
  double start_time_seconds = 0;  // since the Unix epoch
  double resident_memory_bytes = 0;
  double virtual_memory_bytes = 0;
};

// Parses /proc/self/stat (`stat`) given the clock ticks per second, the
// boot time from /proc/stat's btime and the page size. Fields are counted
// after the last ')' because the command name may hold spaces and parens.
// nullopt when the text is not a stat line.
std::optional<ProcessStats> ParseProcStat(std::string_view stat, long ticks_per_second,
                                          double boot_time_seconds, long page_bytes);

class ProcessCollector : public prometheus::Collectable {
 public:
  // Families for what could be read; none when /proc is missing.
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace tidal::server

#endif  // TIDAL_SERVER_PROCESS_COLLECTOR_H_
