#include "server/metrics.h"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/common/check.h"
#include "server/build_info.h"
#include "server/overload_guard.h"
#include "server/process_collector.h"

namespace tidal::server {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

prometheus::Labels ToMap(const Labels& labels) {
  return prometheus::Labels(labels.begin(), labels.end());
}

}  // namespace

std::string FormatLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, Escape(labels[i].second));
  }
  return out + "}";
}

std::string RenderFamilies(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()), process_(std::make_shared<ProcessCollector>()) {
  // The usual info metric: constant 1, the build in its labels, so that a
  // dashboard can show (and an alert join on) what version runs.
  prometheus::BuildGauge()
      .Name("tidal_build_info")
      .Help("Always 1; the labels say which build of tidal server runs.")
      .Register(*registry_)
      .Add({{"version", TIDAL_VERSION_NUMBER}, {"compiler", kTidalCompiler}})
      .Set(1);
}

void Metrics::DefineCounter(const std::string& name, const std::string& help,
                            const std::vector<Labels>& initial) {
  std::lock_guard lock(mu_);
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  counters_[name] = &family;
  for (const Labels& l : initial) family.Add(ToMap(l));
}

void Metrics::DefineHistogram(const std::string& name, const std::string& help,
                              std::vector<double> buckets, const std::vector<Labels>& initial) {
  std::lock_guard lock(mu_);
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  histograms_[name] = {&family, std::move(buckets)};
  for (const Labels& l : initial) family.Add(ToMap(l), histograms_[name].buckets);
}

void Metrics::Inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mu_);
  auto it = counters_.find(name);
  TIDAL_CHECK(it != counters_.end()) << "counter " << name << " was never defined";
  it->second->Add(ToMap(labels)).Increment(by);
}

void Metrics::Observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  auto it = histograms_.find(name);
  TIDAL_CHECK(it != histograms_.end()) << "histogram " << name << " was never defined";
  it->second.family->Add(ToMap(labels), it->second.buckets).Observe(value);
}

void Metrics::Zero(const std::string& name, const Labels& labels) {
  std::lock_guard lock(mu_);
  if (auto c = counters_.find(name); c != counters_.end()) {
    c->second->Add(ToMap(labels));
    return;
  }
  auto h = histograms_.find(name);
  TIDAL_CHECK(h != histograms_.end()) << "metric " << name << " was never defined";
  h->second.family->Add(ToMap(labels), h->second.buckets);
}

std::vector<prometheus::MetricFamily> Metrics::Collect() const {
  std::vector<prometheus::MetricFamily> out = registry_->Collect();
  for (prometheus::MetricFamily& f : process_->Collect()) out.push_back(std::move(f));
  return out;
}

std::string Metrics::Render() const { return RenderFamilies(Collect()); }

void GaugeWriter::Family(const std::string& name, const std::string& help, prometheus::MetricType type) {
  TIDAL_CHECK(type == prometheus::MetricType::Gauge || type == prometheus::MetricType::Counter) << name;
  prometheus::MetricFamily& f = families_[name];
  f.name = name;
  f.help = help;
  f.type = type;
}

void GaugeWriter::Sample(const std::string& name, const Labels& labels, double value) {
  if (std::isnan(value)) return;
  auto it = families_.find(name);
  TIDAL_CHECK(it != families_.end()) << "gauge " << name << " has no Family() call";
  prometheus::ClientMetric m;
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  // Sorted by name, as prometheus-cpp writes its own series.
  std::sort(m.label.begin(), m.label.end());
  if (it->second.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  it->second.metric.push_back(std::move(m));
}

std::vector<prometheus::MetricFamily> GaugeWriter::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  for (const auto& [name, f] : families_) out.push_back(f);
  return out;
}

std::string GaugeWriter::Render() const { return RenderFamilies(Collect()); }

void DefineApiMetrics(Metrics& metrics) {
  const std::vector<double> fast_buckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  metrics.DefineHistogram("tidal_api_request_seconds", "API latency by route and method.", fast_buckets);
  metrics.DefineCounter("tidal_api_requests_total", "API requests by route, method and status code.");
  std::vector<Labels> rejections;
  for (Rejection r : kEveryRejection) rejections.push_back({{"reason", std::string(RejectionName(r))}});
  metrics.DefineCounter("tidal_http_rejected_total",
                        "Requests turned away by overload protection, by reason: fair_share (a busy server, the "
                        "tenant over its share of request seats), submit_rate, unfinished_cap, auth_failures "
                        "(over a client's failed-authentication budget), body_too_large.",
                        rejections);
}

}  // namespace tidal::server
