// The server's Prometheus metrics, on prometheus-cpp's core library: counters
// and histograms live in a prometheus::Registry and are rendered with its
// TextSerializer (served by the API's own HTTP server, not prometheus-cpp's
// exposer). Gauges that describe current state (queue usage, pending by
// reason) are computed at scrape time by the caller and appended through
// GaugeWriter, so they never go stale. Every scrape also carries the
// process_* metrics (ProcessCollector) and tidal_build_info.
//
// A counter or histogram series exists from the moment its labels are known,
// at 0: the callers declare the label sets they know up front (DefineCounter's
// `initial`, Zero), because Prometheus' increase() and rate() cannot see the
// first event of a series that appears with it (the series starts at 1).
#ifndef TIDAL_SERVER_METRICS_H_
#define TIDAL_SERVER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tidal::server {

// Label pairs in the order the caller writes them (prometheus-cpp sorts them).
using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  Metrics();
  // `initial`: the label sets exported at 0 before their first event.
  void DefineCounter(const std::string& name, const std::string& help,
                     const std::vector<Labels>& initial = {});
  void DefineHistogram(const std::string& name, const std::string& help,
                       std::vector<double> buckets, const std::vector<Labels>& initial = {});
  // The name must have been defined (a bug otherwise, checked).
  void Inc(const std::string& name, const Labels& labels, double by = 1);
  void Observe(const std::string& name, const Labels& labels, double value);
  // Exports the series at 0 if it does not exist yet (a node that joined, a
  // queue): its first event is then an increase Prometheus sees.
  void Zero(const std::string& name, const Labels& labels);
  // Everything the registry holds (counters, histograms, process_*,
  // tidal_build_info), for one scrape.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the text exposition format.
  std::string Render() const;

 private:
  struct HistogramFamily {
    prometheus::Family<prometheus::Histogram>* family;
    prometheus::Histogram::BucketBoundaries buckets;
  };
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_;
  mutable std::mutex mu_;  // guards the two maps (the families lock themselves)
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters_;
  std::map<std::string, HistogramFamily> histograms_;
};

// The HTTP layer's families: tidal_api_request_seconds,
// tidal_api_requests_total and tidal_http_rejected_total (at 0 for every
// reason). The leader's control plane and a follower's reads each define
// them in their own registry.
void DefineApiMetrics(Metrics& metrics);

// Builds gauge families for one scrape (or counters whose value the caller
// keeps, such as the store's commit count). A NaN sample is left out: a figure
// that does not exist (the latency of a service that served nothing) is no
// series rather than a made-up 0.
class GaugeWriter {
 public:
  void Family(const std::string& name, const std::string& help,
              prometheus::MetricType type = prometheus::MetricType::Gauge);
  void Sample(const std::string& name, const Labels& labels, double value);
  std::vector<prometheus::MetricFamily> Collect() const;
  std::string Render() const;

 private:
  std::map<std::string, prometheus::MetricFamily> families_;
};

// Renders families in the text exposition format.
std::string RenderFamilies(const std::vector<prometheus::MetricFamily>& families);

std::string FormatLabels(const Labels& labels);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_METRICS_H_
