// A small Prometheus registry: counters and histograms with labels, rendered
// in the text exposition format. Gauges that describe current state (queue
// usage, pending by reason) are computed at scrape time by the caller and
// appended through GaugeWriter, so they never go stale.
#ifndef TIDAL_SERVER_METRICS_H_
#define TIDAL_SERVER_METRICS_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tidal::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  Metrics();
  void DefineCounter(const std::string& name, const std::string& help);
  void DefineHistogram(const std::string& name, const std::string& help,
                       std::vector<double> buckets);
  void Inc(const std::string& name, const Labels& labels, double by = 1);
  void Observe(const std::string& name, const Labels& labels, double value);
  // Counters and histograms in exposition format.
  std::string Render() const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    std::string help;
    bool histogram = false;
    std::vector<double> buckets;
    std::map<Labels, double> counters;
    std::map<Labels, Histogram> histograms;
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// Builds gauge families for one scrape.
class GaugeWriter {
 public:
  void Family(const std::string& name, const std::string& help);
  void Sample(const std::string& name, const Labels& labels, double value);
  std::string Render() const;

 private:
  std::map<std::string, std::pair<std::string, std::vector<std::pair<Labels, double>>>> families_;
};

std::string FormatLabels(const Labels& labels);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_METRICS_H_
