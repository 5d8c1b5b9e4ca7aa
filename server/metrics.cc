#include "server/metrics.h"

#include <cmath>

#include <fmt/format.h>

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

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

Labels With(Labels labels, const std::string& key, const std::string& value) {
  labels.emplace_back(key, value);
  return labels;
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

Metrics::Metrics() = default;

void Metrics::DefineCounter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  families_[name].help = help;
}

void Metrics::DefineHistogram(const std::string& name, const std::string& help,
                              std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  f.help = help;
  f.histogram = true;
  f.buckets = std::move(buckets);
}

void Metrics::Inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mu_);
  families_[name].counters[labels] += by;
}

void Metrics::Observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  Family& f = families_[name];
  Histogram& h = f.histograms[labels];
  if (h.counts.empty()) h.counts.assign(f.buckets.size(), 0);
  for (size_t i = 0; i < f.buckets.size(); ++i) {
    if (value <= f.buckets[i]) {
      ++h.counts[i];
      break;
    }
  }
  ++h.count;
  h.sum += value;
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name,
                       f.histogram ? "histogram" : "counter");
    if (!f.histogram) {
      for (const auto& [labels, v] : f.counters) {
        out += fmt::format("{}{} {}\n", name, FormatLabels(labels), Number(v));
      }
      continue;
    }
    for (const auto& [labels, h] : f.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += h.counts[i];
        out += fmt::format("{}_bucket{} {}\n", name,
                           FormatLabels(With(labels, "le", Number(f.buckets[i]))), cumulative);
      }
      out += fmt::format("{}_bucket{} {}\n", name, FormatLabels(With(labels, "le", "+Inf")), h.count);
      out += fmt::format("{}_sum{} {}\n", name, FormatLabels(labels), Number(h.sum));
      out += fmt::format("{}_count{} {}\n", name, FormatLabels(labels), h.count);
    }
  }
  return out;
}

void GaugeWriter::Family(const std::string& name, const std::string& help) {
  families_[name].first = help;
}

void GaugeWriter::Sample(const std::string& name, const Labels& labels, double value) {
  families_[name].second.emplace_back(labels, value);
}

std::string GaugeWriter::Render() const {
  std::string out;
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, f.first, name);
    for (const auto& [labels, v] : f.second) {
      out += fmt::format("{}{} {}\n", name, FormatLabels(labels), Number(v));
    }
  }
  return out;
}

}  // namespace tidal::server
