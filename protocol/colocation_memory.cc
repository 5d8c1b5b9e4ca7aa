#include "protocol/colocation_memory.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/journal_snapshot.h"
#include "protocol/object_reader.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;
using Keys = std::vector<std::string_view>;

// Figures (req/s, their sums and errors, the -1 of "never seen") well
// inside a double's exact range.
constexpr double kMaxFigure = 1e18;
constexpr int64_t kMaxWorkloadId = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxNodeId = static_cast<int64_t>(NodeId::kInvalid) - 1;

StatusOr<ObjectReader> OpenAll(const json& v, const std::string& path, const Keys& keys) {
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(v, path, keys));
  for (std::string_view k : keys) {
    if (!v.contains(k)) return r.Missing(k);
  }
  return r;
}

StatusOr<const json*> List(const ObjectReader& r, std::string_view key) {
  const json& v = r.at(key);
  TIDAL_RETURN_IF_ERROR(ExpectArray(v, r.FieldPath(key)));
  if (v.size() > kMaxSnapshotEntries) {
    return FieldError(r.FieldPath(key), "more than " + std::to_string(kMaxSnapshotEntries) + " entries");
  }
  return &v;
}

Status Millis(const json& v, const std::string& path, Time* out) {
  if (!v.is_number_integer() || v.get<int64_t>() < kMinTimeMs || v.get<int64_t>() > kMaxTimeMs) {
    return FieldError(path, "expected a time in ms, got " + Shown(v));
  }
  *out = TimeFromMillis(v.get<int64_t>());
  return Status::Ok();
}

Status OptionalMillisAt(const json& v, const std::string& path, std::optional<Time>* out) {
  if (v.is_null()) {
    out->reset();
    return Status::Ok();
  }
  Time t;
  TIDAL_RETURN_IF_ERROR(Millis(v, path, &t));
  *out = t;
  return Status::Ok();
}

Status Figure(const json& v, const std::string& path, double* out) {
  if (!v.is_number() || v.get<double>() < -kMaxFigure || v.get<double>() > kMaxFigure) {
    return FieldError(path, "expected a number from -1e18 to 1e18, got " + Shown(v));
  }
  *out = v.get<double>();
  return Status::Ok();
}

Status Id(const json& v, const std::string& path, int64_t min, int64_t max, int64_t* out) {
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
    return FieldError(path, "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                                ", got " + Shown(v));
  }
  *out = v.get<int64_t>();
  return Status::Ok();
}

Status ReadWorkload(const ObjectReader& r, std::string_view key, WorkloadId* out) {
  int64_t id = 0;
  TIDAL_RETURN_IF_ERROR(Id(r.at(key), r.FieldPath(key), 1, kMaxWorkloadId, &id));
  *out = WorkloadId(static_cast<uint64_t>(id));
  return Status::Ok();
}

// A list of numbers (or of integers, for `fold_day`).
template <typename T>
Status NumberList(const ObjectReader& r, std::string_view key, std::vector<T>* out) {
  TIDAL_ASSIGN_OR_RETURN(const json* v, List(r, key));
  out->clear();
  out->reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = IndexPath(r.FieldPath(key), i);
    if constexpr (std::is_same_v<T, double>) {
      double x = 0;
      TIDAL_RETURN_IF_ERROR(Figure((*v)[i], path, &x));
      out->push_back(x);
    } else {
      int64_t x = 0;
      TIDAL_RETURN_IF_ERROR(
          Id((*v)[i], path, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &x));
      out->push_back(x);
    }
  }
  return Status::Ok();
}

// [[t_ms, value], ...]
template <typename T>
Status PairList(const ObjectReader& r, std::string_view key, std::deque<std::pair<Time, T>>* out) {
  TIDAL_ASSIGN_OR_RETURN(const json* v, List(r, key));
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string path = IndexPath(r.FieldPath(key), i);
    const json& e = (*v)[i];
    if (!e.is_array() || e.size() != 2) return FieldError(path, "expected [time_ms, value], got " + Shown(e));
    Time t;
    TIDAL_RETURN_IF_ERROR(Millis(e[0], IndexPath(path, 0), &t));
    if constexpr (std::is_same_v<T, double>) {
      double x = 0;
      TIDAL_RETURN_IF_ERROR(Figure(e[1], IndexPath(path, 1), &x));
      out->emplace_back(t, x);
    } else {
      int64_t x = 0;
      TIDAL_RETURN_IF_ERROR(Id(e[1], IndexPath(path, 1), 0, std::numeric_limits<int>::max(), &x));
      out->emplace_back(t, static_cast<int>(x));
    }
  }
  return Status::Ok();
}

template <typename T>
json PairsJson(const std::deque<std::pair<Time, T>>& pairs) {
  json out = json::array();
  for (const auto& [t, x] : pairs) out.push_back(json::array({ToMillis(t), x}));
  return out;
}

json SeriesJson(WorkloadId service, const LoadSeries& s) {
  return {{"workload", service.value()},
          {"first_seen_ms", ToMillis(s.first_seen)},
          {"last_seen_ms", ToMillis(s.last_seen)},
          {"last_rps", s.last_rps},
          {"cell", s.cell},
          {"cell_sum", s.cell_sum},
          {"cell_max", s.cell_max},
          {"cell_count", s.cell_count},
          {"profile", s.profile},
          {"peak_profile", s.peak_profile},
          {"deviation", s.deviation},
          {"before_fold", s.before_fold},
          {"fold_day", s.fold_day},
          {"level", s.level},
          {"recent", PairsJson(s.recent)},
          {"issued", PairsJson(s.issued)},
          {"margin", s.margin}};
}

Status ReadSeries(const json& v, const std::string& path, WorkloadId* service, LoadSeries* s) {
  // `issued` and `margin` (the learned margin) may be absent: a snapshot
  // written before them restores a margin of 1 that learns afresh.
  const Keys required = {"workload", "first_seen_ms", "last_seen_ms", "last_rps", "cell",
                         "cell_sum", "cell_max", "cell_count", "profile", "peak_profile",
                         "deviation", "before_fold", "fold_day", "level", "recent"};
  Keys allowed = required;
  allowed.push_back("issued");
  allowed.push_back("margin");
  TIDAL_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Open(v, path, allowed));
  for (std::string_view k : required) {
    if (!v.contains(k)) return r.Missing(k);
  }
  TIDAL_RETURN_IF_ERROR(ReadWorkload(r, "workload", service));
  TIDAL_RETURN_IF_ERROR(Millis(r.at("first_seen_ms"), r.FieldPath("first_seen_ms"), &s->first_seen));
  TIDAL_RETURN_IF_ERROR(Millis(r.at("last_seen_ms"), r.FieldPath("last_seen_ms"), &s->last_seen));
  TIDAL_RETURN_IF_ERROR(Figure(r.at("last_rps"), r.FieldPath("last_rps"), &s->last_rps));
  TIDAL_RETURN_IF_ERROR(r.Int64("cell", &s->cell));
  TIDAL_RETURN_IF_ERROR(Figure(r.at("cell_sum"), r.FieldPath("cell_sum"), &s->cell_sum));
  TIDAL_RETURN_IF_ERROR(Figure(r.at("cell_max"), r.FieldPath("cell_max"), &s->cell_max));
  TIDAL_RETURN_IF_ERROR(r.Int("cell_count", &s->cell_count, 0));
  TIDAL_RETURN_IF_ERROR(NumberList(r, "profile", &s->profile));
  TIDAL_RETURN_IF_ERROR(NumberList(r, "peak_profile", &s->peak_profile));
  TIDAL_RETURN_IF_ERROR(NumberList(r, "deviation", &s->deviation));
  TIDAL_RETURN_IF_ERROR(NumberList(r, "before_fold", &s->before_fold));
  TIDAL_RETURN_IF_ERROR(NumberList(r, "fold_day", &s->fold_day));
  TIDAL_RETURN_IF_ERROR(Figure(r.at("level"), r.FieldPath("level"), &s->level));
  TIDAL_RETURN_IF_ERROR(PairList(r, "recent", &s->recent));
  if (r.Has("issued")) TIDAL_RETURN_IF_ERROR(PairList(r, "issued", &s->issued));
  if (r.Has("margin")) TIDAL_RETURN_IF_ERROR(Figure(r.at("margin"), r.FieldPath("margin"), &s->margin));
  return Status::Ok();
}

}  // namespace

json ColocationMemoryToJson(const ColocationMemory& m) {
  json load = json::array(), scaling = json::array(), noticed = json::array(), needed_at = json::array(),
       services = json::array();
  for (const auto& [service, s] : m.load) load.push_back(SeriesJson(service, s));
  for (const auto& [service, s] : m.scaling) {
    scaling.push_back({{"workload", service.value()},
                       {"target", s.target},
                       {"since_ms", ToMillis(s.since)},
                       {"needs", PairsJson(s.needs)}});
  }
  for (const auto& [key, until] : m.noticed) {
    noticed.push_back({{"workload", key.first.value()}, {"node", key.second.value()}, {"until_ms", ToMillis(until)}});
  }
  for (const std::optional<Time>& t : m.needed_at) needed_at.push_back(OptionalMillisJson(t));
  for (WorkloadId w : m.known_services) services.push_back(w.value());
  return {{"load", std::move(load)},
          {"scaling", std::move(scaling)},
          {"lent", m.lent},
          {"needed_at_ms", std::move(needed_at)},
          {"last_prepare_ms", OptionalMillisJson(m.last_prepare)},
          {"noticed", std::move(noticed)},
          {"services", std::move(services)}};
}

StatusOr<ColocationMemory> ColocationMemoryFromJson(const json& j, const std::string& path) {
  TIDAL_ASSIGN_OR_RETURN(
      ObjectReader r,
      OpenAll(j, path, {"load", "scaling", "lent", "needed_at_ms", "last_prepare_ms", "noticed", "services"}));
  ColocationMemory m;
  TIDAL_ASSIGN_OR_RETURN(const json* load, List(r, "load"));
  for (size_t i = 0; i < load->size(); ++i) {
    const std::string at = IndexPath(r.FieldPath("load"), i);
    WorkloadId service;
    LoadSeries s;
    TIDAL_RETURN_IF_ERROR(ReadSeries((*load)[i], at, &service, &s));
    if (!m.load.emplace(service, std::move(s)).second) return FieldError(at + ".workload", "listed twice");
  }
  TIDAL_ASSIGN_OR_RETURN(const json* scaling, List(r, "scaling"));
  for (size_t i = 0; i < scaling->size(); ++i) {
    const std::string at = IndexPath(r.FieldPath("scaling"), i);
    TIDAL_ASSIGN_OR_RETURN(ObjectReader sr, OpenAll((*scaling)[i], at, {"workload", "target", "since_ms", "needs"}));
    WorkloadId service;
    ServiceScaling s;
    TIDAL_RETURN_IF_ERROR(ReadWorkload(sr, "workload", &service));
    TIDAL_RETURN_IF_ERROR(sr.Int("target", &s.target, 0));
    TIDAL_RETURN_IF_ERROR(Millis(sr.at("since_ms"), sr.FieldPath("since_ms"), &s.since));
    TIDAL_RETURN_IF_ERROR(PairList(sr, "needs", &s.needs));
    if (!m.scaling.emplace(service, std::move(s)).second) return FieldError(at + ".workload", "listed twice");
  }
  TIDAL_ASSIGN_OR_RETURN(const json* lent, List(r, "lent"));
  for (size_t i = 0; i < lent->size(); ++i) {
    if (!(*lent)[i].is_boolean()) {
      return FieldError(IndexPath(r.FieldPath("lent"), i), "expected true or false, got " + Shown((*lent)[i]));
    }
    m.lent.push_back((*lent)[i].get<bool>());
  }
  TIDAL_ASSIGN_OR_RETURN(const json* needed_at, List(r, "needed_at_ms"));
  m.needed_at.resize(needed_at->size());
  for (size_t i = 0; i < needed_at->size(); ++i) {
    TIDAL_RETURN_IF_ERROR(
        OptionalMillisAt((*needed_at)[i], IndexPath(r.FieldPath("needed_at_ms"), i), &m.needed_at[i]));
  }
  TIDAL_RETURN_IF_ERROR(OptionalMillisAt(r.at("last_prepare_ms"), r.FieldPath("last_prepare_ms"), &m.last_prepare));
  TIDAL_ASSIGN_OR_RETURN(const json* noticed, List(r, "noticed"));
  for (size_t i = 0; i < noticed->size(); ++i) {
    const std::string at = IndexPath(r.FieldPath("noticed"), i);
    TIDAL_ASSIGN_OR_RETURN(ObjectReader nr, OpenAll((*noticed)[i], at, {"workload", "node", "until_ms"}));
    WorkloadId workload;
    int64_t node = 0;
    Time until;
    TIDAL_RETURN_IF_ERROR(ReadWorkload(nr, "workload", &workload));
    TIDAL_RETURN_IF_ERROR(Id(nr.at("node"), nr.FieldPath("node"), 0, kMaxNodeId, &node));
    TIDAL_RETURN_IF_ERROR(Millis(nr.at("until_ms"), nr.FieldPath("until_ms"), &until));
    m.noticed[{workload, NodeId(static_cast<uint32_t>(node))}] = until;
  }
  TIDAL_ASSIGN_OR_RETURN(const json* services, List(r, "services"));
  for (size_t i = 0; i < services->size(); ++i) {
    int64_t id = 0;
    TIDAL_RETURN_IF_ERROR(Id((*services)[i], IndexPath(r.FieldPath("services"), i), 1, kMaxWorkloadId, &id));
    m.known_services.insert(WorkloadId(static_cast<uint64_t>(id)));
  }
  return m;
}

}  // namespace tidal::protocol
