// The `tidal` API client: submit, get, list, cancel, explain, dry-run,
// queues, nodes, audit, report, approve, resize, version. Server and token
// come from --server/--token, then TIDAL_SERVER/TIDAL_TOKEN, then the config
// file (cli/cli_config.h), like kubectl and gh. Output is a table unless
// `-o wide|json|yaml`. Human output shows instants as RFC 3339 and relative
// ("3m ago") and durations in kubectl's AGE style; JSON and YAML keep the
// API's epoch milliseconds. An error is one line; the exit codes are in
// cli/command_registry.h.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "cli/cli_config.h"
#include "cli/client_table.h"
#include "cli/command_registry.h"
#include "cli/human_time.h"
#include "config/input_limits.h"
#include "config/yaml_document.h"
#include "protocol/leader_redirect.h"
#include "protocol/loan_calendar.h"
#include "protocol/pod_log.h"
#include "protocol/workload_batch.h"
#include "server/build_info.h"

namespace tidal::cli {
namespace {

using nlohmann::json;

struct ClientFlags {
  std::string server;
  std::string token;
  std::string ca_file;
  std::string output = "table";
  // Reads may come from a follower's copy (protocol/leader_redirect.h).
  bool stale = false;
  bool wide() const { return output == "wide"; }
};

class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// j[a][b]... or null when any step is missing (a const json's operator[]
// must not be asked for a missing key).
const json& Field(const json& j, std::initializer_list<const char*> path) {
  static const json kNull;
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return kNull;
    auto it = at->find(key);
    if (it == at->end()) return kNull;
    at = &*it;
  }
  return *at;
}

int64_t Ms(const json& j) { return j.is_number() ? j.get<int64_t>() : 0; }

// Where requests go and with what: the servers are one, or a replicated
// control plane's replicas.
struct Target {
  std::vector<std::string> servers;
  std::string token;
  std::string ca_file;
};

// Flags, then environment, then the config file.
Target ResolveTarget(const ClientFlags& f) {
  CliContext t{f.server, f.token, f.ca_file};
  if (t.server.empty()) {
    if (const char* s = std::getenv("TIDAL_SERVER")) t.server = s;
  }
  if (t.token.empty()) {
    if (const char* v = std::getenv("TIDAL_TOKEN")) t.token = v;
  }
  if (t.ca_file.empty()) {
    if (const char* v = std::getenv("TIDAL_CA_FILE")) t.ca_file = v;
  }
  if (t.server.empty() || t.token.empty() || t.ca_file.empty()) {
    auto config = CliConfig::Load(CliConfig::DefaultPath());
    if (!config.ok()) throw UsageError(config.status().message());
    const CliContext c = config->Effective();
    if (t.server.empty()) t.server = c.server;
    if (t.token.empty()) t.token = c.token;
    if (t.ca_file.empty()) t.ca_file = c.ca_file;
  }
  if (t.server.empty()) t.server = "http://127.0.0.1:8080";
  auto servers = ParseServerUrls(t.server);
  if (!servers.ok()) throw UsageError(servers.status().message());
  return {std::move(servers).value(), t.token, t.ca_file};
}

// What went wrong on the way to the server, in words: httplib's own names
// ("Connection") read as if the network were at fault.
std::string TransportError(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "could not connect (connection refused or host unreachable: is a server running "
             "there? set --server, TIDAL_SERVER or the config file)";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out after 5 s (is the address right? a firewall?)";
    case httplib::Error::BindIPAddress:
      return "could not bind the local address";
    case httplib::Error::Read:
      return "the connection closed while reading the reply (did the server stop or time out?)";
    case httplib::Error::Write:
      return "the connection closed while sending the request";
    case httplib::Error::SSLServerVerification:
      return "TLS failed: the server's certificate does not chain to the CA (--ca-file, TIDAL_CA_FILE "
             "or ca_file in the config file; default: the system's CAs) or does not name the host";
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
      return "TLS failed (" + httplib::to_string(e) + "; is the server https://?)";
    default:
      return httplib::to_string(e);
  }
}

// Whether a request that failed on its way may be sent to another replica:
// not when the replica that failed could have applied it (the connection
// broke after it was sent) and applying it twice would do it twice (a
// submit without an Idempotency-Key creates a second workload).
bool MayResend(const std::string& method, httplib::Error error, const httplib::Headers& headers) {
  if (method == "GET" || headers.contains("Idempotency-Key")) return true;
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLServerVerification:
      return true;  // nothing was sent
    default:
      return false;
  }
}

// Where `url` is among `servers` (compared as written there); npos when it
// is not.
size_t IndexOf(const std::vector<std::string>& servers, const std::string& url) {
  if (url.empty()) return std::string::npos;
  auto parsed = ParseServerUrls(url);
  if (!parsed.ok() || parsed->size() != 1) return std::string::npos;
  auto it = std::find(servers.begin(), servers.end(), parsed->front());
  return it == servers.end() ? std::string::npos : it - servers.begin();
}

// The replica to ask after those `tried`: the leader the last one named,
// when the list has it, else the first one not yet asked; npos when all
// were. A leader outside the list is not followed: the list is what the
// user trusts with the token, and a confused (or hostile) replica must not
// send it elsewhere.
size_t NextServer(const std::vector<std::string>& servers, const std::vector<bool>& tried,
                  const std::string& leader) {
  if (const size_t named = IndexOf(servers, leader); named != std::string::npos && !tried[named]) return named;
  auto untried = std::find(tried.begin(), tried.end(), false);
  return untried == tried.end() ? std::string::npos : untried - tried.begin();
}

// One request; returns the body (JSON, or CSV for a report). With several
// servers it goes to the one that leads: a replica that cannot be reached,
// or answers 503 not_leader (protocol/leader_redirect.h), passes it on to
// the leader it names or the next server, each asked once at most.
std::string Call(const ClientFlags& f, const std::string& method, const std::string& path,
                 const json* body, const httplib::Headers& extra = {}) {
  const Target target = ResolveTarget(f);
  const std::vector<std::string>& servers = target.servers;
  if (!target.ca_file.empty()) {
    for (const std::string& server : servers) {
      if (!server.starts_with("https://")) {
        throw UsageError(fmt::format("--ca-file: given, but --server '{}' is not https://", server));
      }
    }
    if (access(target.ca_file.c_str(), R_OK) != 0) {
      throw UsageError(fmt::format("--ca-file '{}': cannot read it", target.ca_file));
    }
  }
  httplib::Headers headers = extra;
  if (!target.token.empty()) headers.emplace("Authorization", "Bearer " + target.token);
  if (f.stale && method == "GET") headers.emplace(protocol::kConsistencyHeader, protocol::kConsistencyStale);
  std::vector<bool> tried(servers.size(), false);
  std::vector<std::string> failures;  // "URL: why", one per replica that did not lead
  std::string leader;                 // the one the last replica named
  for (size_t at = 0; at != std::string::npos; at = NextServer(servers, tried, leader)) {
    tried[at] = true;
    leader.clear();
    const std::string& server = servers[at];
    httplib::Client client(server);
    if (!client.is_valid()) throw UsageError(fmt::format("--server '{}': not an http:// or https:// address", server));
    if (!target.ca_file.empty()) client.set_ca_cert_path(target.ca_file.c_str());
    // Never send a token to a server whose certificate does not check out.
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(5, 0);
    client.set_read_timeout(60, 0);
    client.set_tcp_nodelay(true);
    httplib::Result res = method == "GET"
                              ? client.Get(path.c_str(), headers)
                              : client.Post(path.c_str(), headers, body ? body->dump() : "{}",
                                            "application/json");
    if (!res) {
      const std::string why = TransportError(res.error());
      if (servers.size() == 1) throw ClientError(fmt::format("cannot reach {}: {}", server, why));
      if (!MayResend(method, res.error(), headers)) {
        throw ClientError(fmt::format("cannot reach {}: {} (not sent to another server: {} may have applied it)",
                                      server, why, server));
      }
      failures.push_back(fmt::format("{}: {}", server, why));
      continue;
    }
    if (res->status < 300) return res->body;
    const json reply = json::parse(res->body, nullptr, false);
    // With one server, a replica that does not lead is an error like any
    // other: its message says who leads.
    const auto not_leader =
        res->status == 503 && servers.size() > 1 ? protocol::NotLeaderReplyFromJson(reply) : std::nullopt;
    if (not_leader) {
      leader = not_leader->leader_url;
      failures.push_back(fmt::format("{}: not the leader ({})", server, not_leader->message));
      if (!leader.empty() && IndexOf(servers, leader) == std::string::npos) {
        failures.back() += fmt::format("; it names {}, which is not in the list", leader);
      }
      continue;
    }
    std::string msg = res->body;
    if (Field(reply, {"error", "message"}).is_string()) msg = Field(reply, {"error", "message"}).get<std::string>();
    if (res->status == 404 && !reply.is_object()) {
      // Not our API's 404 (which is JSON): most likely a wrong base path.
      msg = fmt::format("{}{}: not found (is {} a Tidal server?)", server, path, server);
    }
    throw ClientError(fmt::format("{} (HTTP {})", msg, res->status));
  }
  throw ClientError(fmt::format("no leader among {}: {}", fmt::join(servers, ", "), fmt::join(failures, "; ")));
}

json CallJson(const ClientFlags& f, const std::string& method, const std::string& path,
              const json* body = nullptr, const httplib::Headers& extra = {}) {
  const std::string text = Call(f, method, path, body, extra);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw ClientError("the server's reply is not JSON");
  return j;
}

// A workload file: one workload object, a list, or {workloads: [...]}.
std::vector<json> ReadWorkloads(const std::string& file) {
  auto doc = config::YamlDocument::Load(file);
  if (!doc.ok()) throw UsageError(doc.status().message());
  const json& root = doc->root();
  std::vector<json> out;
  if (root.is_array()) {
    for (const json& w : root) out.push_back(w);
  } else if (root.is_object() && root.contains("workloads")) {
    for (const json& w : root["workloads"]) out.push_back(w);
  } else if (root.is_object()) {
    out.push_back(root);
  } else {
    throw UsageError(file + ": expected a workload object or a list of workloads");
  }
  return out;
}

std::string Str(const json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

// Free-text details come from the engine, which writes instants as epoch
// milliseconds ("since 1796111763705") or seconds ("by t=1796111795.497s");
// the human output shows them relative to now.
std::string HumanizeDetail(const std::string& detail, int64_t now_ms) {
  static const std::regex kInstant(R"(\bt=(\d{10})(\.\d+)?s\b|\b(\d{13})\b)");
  std::string out;
  auto last = detail.cbegin();
  for (std::sregex_iterator it(detail.begin(), detail.end(), kInstant), end; it != end; ++it) {
    const std::smatch& m = *it;
    const int64_t ms = m[3].matched ? std::stoll(m[3]) : std::llround(std::stod(m[1].str() + m[2].str()) * 1000);
    out.append(last, m[0].first);
    out += TimeAndRelative(ms, now_ms);
    last = m[0].second;
  }
  out.append(last, detail.cend());
  return out;
}

// An audit row's DETAIL column: its reason or cause where it has one, else
// the fact its action records (a priority's change, where a placement went),
// so that no row reads "-" for want of a sentence.
std::string AuditDetail(const json& row, int64_t now_ms) {
  static const json kNone;
  const json& d = row.contains("detail") ? row["detail"] : kNone;
  if (!d.is_object()) return "";
  const std::string action = row.value("action", "");
  auto has = [&](const char* k) { return d.contains(k) && d[k].is_number(); };
  if (action == "recovery" && has("recovery_s")) {
    return fmt::format("running again after {:.0f} s ({})", d["recovery_s"].get<double>(), Str(d.value("cause", json())));
  }
  for (const char* k : {"reason", "cause"}) {
    if (d.contains(k) && d[k].is_string() && !d[k].get<std::string>().empty()) {
      return HumanizeDetail(d[k].get<std::string>(), now_ms);
    }
  }
  if (action == "priority" && has("value")) {
    return has("previous_value") ? fmt::format("{} -> {}", d["previous_value"].dump(), d["value"].dump())
                                 : d["value"].dump();
  }
  if (action == "place" && d.contains("pods") && d["pods"].is_array()) {
    std::vector<std::string> nodes;
    for (const json& p : d["pods"]) {
      const std::string n = p.value("node", "");
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
    }
    return fmt::format("on {}{}", fmt::join(nodes, ", "),
                       has("wait_s") ? fmt::format(" after {:.1f} s waiting", d["wait_s"].get<double>()) : "");
  }
  if (action == "scale" && has("from") && has("to")) {
    return fmt::format("{} -> {} replicas{}", d["from"].dump(), d["to"].dump(),
                       has("spares") && d["spares"].get<int>() > 0 ? fmt::format(", {} spare", d["spares"].dump()) : "");
  }
  if (action == "ready" && has("rank")) {
    return fmt::format("rank {}{}", d["rank"].dump(),
                       has("cold_start_ms") ? fmt::format(", loaded in {:.1f} s", d["cold_start_ms"].get<double>() / 1000)
                                            : "");
  }
  if (action == "admit" && has("gpus")) return fmt::format("{} GPUs, queue {}", d["gpus"].dump(), Str(d.value("queue", json())));
  if (action == "register" && d.contains("node")) {
    return fmt::format("{}: {} x {} in pool {}", Str(d["node"]), Str(d.value("gpus", json())),
                       Str(d.value("gpu_model", json())), Str(d.value("pool", json())));
  }
  if ((action == "loan" || action == "return") && d.contains("node")) {
    return fmt::format("{} ({} mode)", Str(d["node"]), Str(d.value("mode", json())));
  }
  return "";
}

std::string Detail(const json& j, int64_t now_ms) {
  return j.is_string() ? HumanizeDetail(j.get<std::string>(), now_ms) : Str(j);
}

int Gpus(const json& w) {
  const json& r = Field(w, {"replicas"});
  const json& g = Field(w, {"gpus_per_replica"});
  return r.is_number() && g.is_number() ? r.get<int>() * g.get<int>() : 0;
}

// When it started (running) or is expected to (waiting), relative to now.
std::string StartColumn(const json& w, int64_t now_ms) {
  if (int64_t s = Ms(Field(w, {"allocation", "start_time_ms"}))) return Relative(s, now_ms);
  if (int64_t e = Ms(Field(w, {"wait", "estimated_start_ms"}))) return Relative(e, now_ms);
  return "-";
}

void PrintWorkloads(const json& list, bool wide) {
  const int64_t now = WallNowMs();
  std::vector<std::string> header = {"ID", "NAME", "TENANT", "PROJECT", "QUEUE", "KIND", "STATE",
                                     "GPUS", "PRIORITY", "AGE", "START", "REASON"};
  if (wide) header.insert(header.end(), {"NODES", "SUBMITTED-BY", "DETAIL"});
  Table t(header);
  for (const json& w : list) {
    std::string reason = Str(Field(w, {"wait", "reason"}));
    if (Field(w, {"state"}) == "awaiting_approval") reason = "awaiting_approval";
    const int64_t submitted = Ms(Field(w, {"submit_time_ms"}));
    std::vector<std::string> row = {
        Str(Field(w, {"id"})), Str(Field(w, {"name"})), Str(Field(w, {"tenant"})),
        Str(Field(w, {"project"})), Str(Field(w, {"queue"})), Str(Field(w, {"kind"})),
        Str(Field(w, {"state"})), std::to_string(Gpus(w)), Str(Field(w, {"priority", "value"})),
        submitted > 0 ? HumanDuration(std::max<int64_t>(0, now - submitted)) : "-", StartColumn(w, now),
        reason};
    if (wide) {
      std::set<std::string> nodes;
      for (const json& p : Field(w, {"allocation", "pods"})) nodes.insert(Str(Field(p, {"node"})));
      std::string joined;
      for (const std::string& n : nodes) joined += (joined.empty() ? "" : ",") + n;
      row.push_back(joined.empty() ? "-" : joined);
      row.push_back(Str(Field(w, {"submitted_by"})));
      row.push_back(Field(w, {"wait", "detail"}).is_string() ? Detail(Field(w, {"wait", "detail"}), now) : "-");
    }
    t.Add(std::move(row));
  }
  std::cout << t.Render();
}

void PrintWorkload(const json& w) {
  const int64_t now = WallNowMs();
  std::cout << fmt::format("ID:        {}\nName:      {}\nKind:      {}\nState:     {}\n", Str(w["id"]),
                           Str(w["name"]), Str(w["kind"]), Str(w["state"]));
  std::cout << fmt::format("Tenant:    {}  Project: {}  Queue: {}\n", Str(w["tenant"]), Str(w["project"]),
                           Str(w["queue"]));
  std::cout << fmt::format("Size:      {} x {} GPUs (min {}, max {})\n", Str(w["replicas"]),
                           Str(w["gpus_per_replica"]), Str(Field(w, {"min_replicas"})),
                           Str(Field(w, {"max_replicas"})));
  std::cout << fmt::format("Priority:  {} ({})\n", Str(Field(w, {"priority", "value"})),
                           Str(Field(w, {"priority", "preemptibility"})));
  std::cout << fmt::format("Submitted: {} by {}\n", TimeAndRelative(Ms(Field(w, {"submit_time_ms"})), now),
                           Str(Field(w, {"submitted_by"})));
  if (Field(w, {"allocation"}).is_object()) {
    std::cout << fmt::format("Started:   {}\n", TimeAndRelative(Ms(Field(w, {"allocation", "start_time_ms"})), now));
    std::cout << "Pods:\n";
    for (const json& p : Field(w, {"allocation", "pods"})) {
      std::cout << fmt::format("  rank {}: {} GPUs {}\n", Str(p["rank"]), Str(p["node"]), p["gpus"].dump());
    }
  }
  if (Str(w["kind"]) == "inference") {
    // What a service owner looks for first: load and latency against target.
    const json& target = Field(w, {"target_p99_ms"});
    const std::string against =
        target.is_number() && target.get<double>() > 0 ? fmt::format(" (target P99 {} ms)", Str(target)) : "";
    const json& load = Field(w, {"load"});
    if (load.is_object() && (load.value("rps", 0.0) > 0 || load.value("slo_samples", 0) > 0)) {
      std::cout << fmt::format("Load:      {:.1f} req/s, P95 {:.0f} ms, P99 {:.0f} ms{}\n", load.value("rps", 0.0),
                               load.value("p95_ms", 0.0), load.value("p99_ms", 0.0), against);
    } else {
      std::cout << fmt::format("Load:      none reported yet{}\n", against);
    }
  }
  if (Field(w, {"wait"}).is_object()) {
    std::cout << fmt::format("Waiting:   {}: {}\n", Str(Field(w, {"wait", "reason"})), Detail(Field(w, {"wait", "detail"}), now));
    if (int64_t e = Ms(Field(w, {"wait", "estimated_start_ms"}))) {
      std::cout << fmt::format("Estimated start: {}\n", TimeAndRelative(e, now));
    }
  }
}

// JSON as YAML, keys in the API's order, for `-o yaml`.
YAML::Node ToYaml(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      YAML::Node n(YAML::NodeType::Map);
      for (const auto& [k, v] : j.items()) n[k] = ToYaml(v);
      return n;
    }
    case json::value_t::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const json& v : j) n.push_back(ToYaml(v));
      return n;
    }
    case json::value_t::null:
      return YAML::Node(YAML::NodeType::Null);
    case json::value_t::string:
      return YAML::Node(j.get<std::string>());
    case json::value_t::boolean:
      return YAML::Node(j.get<bool>());
    case json::value_t::number_integer:
      return YAML::Node(j.get<int64_t>());
    case json::value_t::number_unsigned:
      return YAML::Node(j.get<uint64_t>());
    default:
      return YAML::Node(j.get<double>());
  }
}

void Output(const ClientFlags& f, const json& j, const std::function<void(const json&)>& table) {
  if (f.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else if (f.output == "yaml") {
    YAML::Emitter out;
    out << ToYaml(j);
    std::cout << out.c_str() << "\n";
  } else {
    table(j);
  }
}

void AddCommon(CLI::App* cmd, const std::shared_ptr<ClientFlags>& f) {
  cmd->add_option("--server", f->server,
                  "Server base URL, e.g. http://127.0.0.1:8080 (a trailing /v1 is fine), or a comma-separated "
                  "list of the replicas' URLs: requests go to the leader (env TIDAL_SERVER, or the config file)");
  cmd->add_option("--token", f->token, "Bearer token (env TIDAL_TOKEN, or the config file)");
  cmd->add_option("--ca-file", f->ca_file,
                  "PEM CA an https:// server's certificate must chain to (env TIDAL_CA_FILE, or "
                  "ca_file in the config file; default: the system's CAs)");
  cmd->add_option("-o,--output", f->output, "table, wide (more columns), json or yaml")
      ->check(CLI::IsMember({"table", "wide", "json", "yaml"}));
  cmd->add_flag("--stale", f->stale,
                "Reads may be answered by any replica, from a copy up to a few seconds old (the leader's "
                "load stays off them; explain and logs still go to the leader)");
}

// Runs `body`, turning a failure into one line on stderr and exit 1; a
// UsageError goes on to main(), which exits 2.
void Guard(const std::function<void()>& body) {
  try {
    body();
  } catch (const CLI::ParseError&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << "tidal: error: " << e.what() << "\n";
    ExitCode() = kExitApiError;
  }
}

// `tidal loans`: a summary line, the windows of every node, the services'
// planned load, then one timeline row per node.
void PrintLoanCalendar(const json& j, int64_t now_ms) {
  StatusOr<LoanCalendar> decoded = protocol::LoanCalendarFromJson(j);
  if (!decoded.ok()) throw std::runtime_error("the server's loan calendar: " + decoded.status().message());
  const LoanCalendar& c = *decoded;
  const auto when = [&](const std::optional<Time>& t) -> std::string {
    if (!t) return "-";
    return ToMillis(*t) <= now_ms ? "now" : Relative(ToMillis(*t), now_ms);
  };
  std::cout << fmt::format("Loan calendar from {}: {} slots of {}, {} mode; notice goes {} before a return.\n",
                           Rfc3339(ToMillis(c.from)), c.slots, HumanDuration(c.slot.count()),
                           ColocationModeName(c.mode), HumanDuration(c.lookahead.count()));
  if (!c.lent_planned.empty()) {
    const auto [lo, hi] = std::minmax_element(c.lent_planned.begin(), c.lent_planned.end());
    std::cout << fmt::format("Shared nodes lent now: {} (low load {}, high load {}); over the span {} to {}.\n",
                             c.lent_planned.front(), c.lent_low_load.front(), c.lent_high_load.front(), *lo, *hi);
  }
  Table windows({"NODE", "LENT", "RETURN BY", "EARLIEST", "LATEST", "NOTICE"});
  for (const NodeLoanPlan& n : c.nodes) {
    for (const LoanWindow& w : n.windows) {
      windows.Add({n.name, when(w.lend_at), when(w.return_by), when(w.return_earliest),
                   w.return_by ? when(w.return_latest) : "-", when(w.notice_at)});
    }
  }
  std::cout << "\n";
  if (c.nodes.empty()) {
    std::cout << "No shared nodes.\n";
  } else if (std::all_of(c.nodes.begin(), c.nodes.end(), [](const NodeLoanPlan& n) { return n.windows.empty(); })) {
    std::cout << "No loans planned.\n";
  } else {
    std::cout << windows.Render();
  }
  if (!c.services.empty()) {
    Table services({"SERVICE", "PROFILE", "PEAK RPS (LOW/PLANNED/HIGH)", "REPLICAS (MIN-MAX)"});
    for (const ServiceLoadPlan& s : c.services) {
      LoadBand peak;
      for (const LoadBand& b : s.load) {
        peak.low = std::max(peak.low, b.low);
        peak.planned = std::max(peak.planned, b.planned);
        peak.high = std::max(peak.high, b.high);
      }
      const auto [lo, hi] = s.planned_replicas.empty()
                                ? std::pair(0, 0)
                                : std::pair(*std::min_element(s.planned_replicas.begin(), s.planned_replicas.end()),
                                            *std::max_element(s.planned_replicas.begin(), s.planned_replicas.end()));
      services.Add({s.name, s.profiled ? "daily" : "recent max",
                    fmt::format("{:.0f}/{:.0f}/{:.0f}", peak.low, peak.planned, peak.high),
                    fmt::format("{}-{}", lo, hi)});
    }
    std::cout << "\n" << services.Render();
  }
  if (!c.nodes.empty()) {
    std::cout << fmt::format("\nTimeline, one character per {} (L lent, l lent unless load is high, "
                             "- lent only if load is low, . kept for inference):\n",
                             HumanDuration(c.slot.count()));
    Table timeline({"NODE", "TIMELINE"});
    for (const NodeLoanPlan& n : c.nodes) timeline.Add({n.name, n.timeline});
    std::cout << timeline.Render();
  }
}

std::string Query(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string q;
  for (const auto& [k, v] : params) {
    if (v.empty()) continue;
    q += (q.empty() ? "?" : "&") + k + "=" + httplib::detail::encode_query_param(v);
  }
  return q;
}

// The time-range flags of audit and report: --since/--until (a duration
// before now, RFC 3339 or epoch ms), --from_ms/--to_ms kept as aliases.
struct TimeRange {
  std::string from, to;
  void Add(CLI::App* c) {
    c->add_option("--since,--from,--from_ms", from,
                  "From: a duration before now (2h, 30m, 7d), RFC 3339 (2026-12-01T10:00:00Z) or epoch ms");
    c->add_option("--until,--to,--to_ms", to, "Until: same forms as --since");
  }
  void AppendTo(std::vector<std::pair<std::string, std::string>>& q) const {
    const int64_t now = WallNowMs();
    for (const auto& [flag, text, key] : {std::tuple{"--since", &from, "from_ms"}, std::tuple{"--until", &to, "to_ms"}}) {
      if (text->empty()) continue;
      auto ms = ParseTimeFlag(*text, flag, now);
      if (!ms.ok()) throw UsageError(ms.status().message());
      q.emplace_back(key, std::to_string(*ms));
    }
  }
};

// A workload id argument: a positive integer, or a usage error.
// A node name, checked before it goes into a URL path.
std::string NodeNameArg(const std::string& name) {
  if (Status s = config::CheckNodeName("node", name); !s.ok()) {
    throw UsageError(s.message() + " (see `tidal nodes`)");
  }
  return name;
}

std::string WorkloadIdArg(const std::string& id) {
  if (id.empty() || id.size() > 19 || id.find_first_not_of("0123456789") != std::string::npos || id == "0" ||
      id.find_first_not_of('0') == std::string::npos) {
    throw UsageError(fmt::format("workload id '{}': expected a positive integer (see `tidal list`)", id));
  }
  return id;
}

// -w/--watch of get, list, audit and events: poll, and print again when
// the API's answer changed (not the rendering: "3s ago" changes every
// second). Ctrl-C stops it (the default SIGINT action ends the process).
struct WatchFlags {
  bool watch = false;
  int count = 0;  // stop after this many prints (0 = never); for tests and scripts
  int interval_ms = 2000;
  void Add(CLI::App* c) {
    c->add_flag("-w,--watch", watch, "Print again whenever it changes, until Ctrl-C");
    c->add_option("--watch-count", count, "With -w: stop after this many prints")
        ->check(CLI::NonNegativeNumber)
        ->group("");
    c->add_option("--watch-interval-ms", interval_ms, "With -w: how often to ask")
        ->check(CLI::Range(10, 600000))
        ->group("");
  }
};

void Watch(const WatchFlags& w, const std::function<json()>& fetch, const std::function<void(const json&)>& print) {
  json last;
  int printed = 0;
  while (true) {
    json now = fetch();
    if (printed == 0 || now != last) {
      if (printed > 0) std::cout << "\n";
      print(now);
      std::cout << std::flush;
      last = std::move(now);
      ++printed;
      if (!w.watch || (w.count > 0 && printed >= w.count)) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(w.interval_ms));
  }
}

void ListWorkloads(const ClientFlags& f, const std::map<std::string, std::string>& filters,
                   const WatchFlags& watch) {
  std::vector<std::pair<std::string, std::string>> q(filters.begin(), filters.end());
  Watch(watch, [&] { return CallJson(f, "GET", "/v1/workloads" + Query(q)); },
        [&](const json& j) { Output(f, j, [&](const json& x) { PrintWorkloads(x["workloads"], f.wide()); }); });
}

void AddListFilters(CLI::App* c, std::map<std::string, std::string>& filters) {
  for (const char* k : {"tenant", "project", "queue", "kind", "state", "limit"}) {
    c->add_option(std::string("--") + k, filters[k], std::string("Filter by ") + k);
  }
}

// The audit log's actions (docs/api.md), so that a typo is a usage error
// rather than an empty table.
const std::vector<std::string> kAuditActions = {
    "admit",   "priority", "approve", "place",  "preempt",  "reclaim",         "recovery",
    "preempt_exit", "loan", "return", "resize", "scale",    "scale_up_failed", "cancel",
    "finish",  "requeue",  "reject",  "register", "node_lost", "node_back",    "gpu_fault",
    "pod_exit", "ready", "register_refused", "access_denied", "inventory_changed", "cordon", "uncordon"};

RegisterCommand reg([](CLI::App& root) {
  // submit
  {
    auto f = std::make_shared<ClientFlags>();
    auto file = std::make_shared<std::string>();
    auto key = std::make_shared<std::string>();
    CLI::App* c = root.add_subcommand("submit", "Submit workloads from a YAML/JSON file");
    AddCommon(c, f);
    c->add_option("-f,--file", *file,
                  "Workload file (one workload, a list, or workloads: [...]); a list goes in batches of up to 1000, "
                  "each admitted whole or not at all")
        ->required();
    c->add_option("--idempotency-key", *key, "Apply at most once (a retry returns the first result)");
    c->callback([=] {
      Guard([&] {
        json out = json::array();
        std::vector<json> workloads = ReadWorkloads(*file);
        if (workloads.size() == 1) {
          httplib::Headers h;
          if (!key->empty()) h.emplace("Idempotency-Key", *key);
          out.push_back(CallJson(*f, "POST", "/v1/workloads", &workloads[0], h));
        }
        // A list goes as batches (one of them up to kMaxBatchWorkloads):
        // each is admitted whole or refused whole, in one round trip.
        const size_t per_batch = protocol::kMaxBatchWorkloads;
        const size_t batches = workloads.size() > 1 ? (workloads.size() + per_batch - 1) / per_batch : 0;
        for (size_t b = 0; b < batches; ++b) {
          protocol::WorkloadBatch batch;
          const size_t end = std::min(workloads.size(), (b + 1) * per_batch);
          for (size_t i = b * per_batch; i < end; ++i) batch.workloads.push_back(std::move(workloads[i]));
          httplib::Headers h;
          if (!key->empty()) h.emplace("Idempotency-Key", batches == 1 ? *key : fmt::format("{}-{}", *key, b));
          const json body = protocol::WorkloadBatchToJson(batch);
          auto created = protocol::WorkloadBatchFromJson(
              CallJson(*f, "POST", std::string(protocol::kWorkloadBatchPath), &body, h));
          if (!created.ok()) throw ClientError("the server's batch reply: " + created.status().message());
          for (json& w : created->workloads) out.push_back(std::move(w));
        }
        Output(*f, out, [](const json& j) {
          Table t({"ID", "NAME", "STATE", "PRIORITY"});
          for (const json& w : j) t.Add({Str(w["id"]), Str(w["name"]), Str(w["state"]), Str(w["priority"]["value"])});
          std::cout << t.Render();
        });
      });
    });
  }
  // get: `get ID`, `get workload ID`, `get workloads` (the list), as kubectl
  {
    auto f = std::make_shared<ClientFlags>();
    auto args = std::make_shared<std::vector<std::string>>();
    auto filters = std::make_shared<std::map<std::string, std::string>>();
    auto watch = std::make_shared<WatchFlags>();
    CLI::App* c = root.add_subcommand("get", "Show one workload (get ID, get workload ID) or list them (get workloads)");
    AddCommon(c, f);
    AddListFilters(c, *filters);
    watch->Add(c);
    c->add_option("what", *args, "ID, `workload ID`, or `workloads`")->required()->expected(1, 2);
    c->callback([=] {
      Guard([&] {
        std::vector<std::string> rest = *args;
        const bool plural = rest.front() == "workloads";
        if (plural || rest.front() == "workload") rest.erase(rest.begin());
        if (rest.empty()) {
          if (!plural) throw UsageError("get workload: which one? (get workload ID, or get workloads)");
          ListWorkloads(*f, *filters, *watch);
          return;
        }
        if (rest.size() > 1) throw UsageError("get: expected one workload id");
        const std::string id = WorkloadIdArg(rest.front());
        Watch(*watch, [&] { return CallJson(*f, "GET", "/v1/workloads/" + id); },
              [&](const json& j) { Output(*f, j, PrintWorkload); });
      });
    });
  }
  // cancel / approve / explain
  for (const char* name : {"cancel", "approve", "explain"}) {
    auto f = std::make_shared<ClientFlags>();
    auto id = std::make_shared<std::string>();
    const std::string verb = name;
    const std::string help = verb == "cancel" ? "Cancel a workload"
                             : verb == "approve" ? "Approve a workload awaiting approval (admin)"
                                                 : "Explain why a workload waits (reason, numbers, priority)";
    CLI::App* c = root.add_subcommand(verb, help);
    AddCommon(c, f);
    c->add_option("id", *id, "Workload id")->required();
    c->callback([=] {
      Guard([&] {
        const std::string path = "/v1/workloads/" + WorkloadIdArg(*id);
        if (verb == "explain") {
          Output(*f, CallJson(*f, "GET", path + "/explain"), [](const json& j) {
            const int64_t now = WallNowMs();
            std::cout << fmt::format("Workload {} ({}) is {}\n", Str(j["id"]), Str(j["name"]), Str(j["state"]));
            const std::string reason = Str(Field(j, {"reason"}));
            std::cout << fmt::format("Reason:   {}\nDetail:   {}\n", reason, Detail(Field(j, {"detail"}), now));
            // For running work the API's estimated_start_ms is when it
            // started: not an estimate.
            const int64_t start = Ms(Field(j, {"estimated_start_ms"}));
            const std::string state = Str(j["state"]);
            if (reason == "running" || reason == "terminating") {
              std::cout << fmt::format("Started:  {}\n", TimeAndRelative(start, now));
            } else if (state != "succeeded" && state != "failed" && state != "cancelled") {
              std::cout << fmt::format("Estimated start: {}\n", TimeAndRelative(start, now));
            }
            std::cout << fmt::format("Queue:    {} ({} of {} guaranteed GPUs in use, {} borrowed)\n",
                                     Str(j["queue"]["name"]), Str(j["queue"]["allocated_gpus"]),
                                     Str(j["queue"]["guaranteed_gpus"]), Str(j["queue"]["borrowed_gpus"]));
            // Diagnosis (core/diagnosis): why it waits, why it missed its SLO.
            if (j.contains("wait_cause")) {
              std::cout << fmt::format("Wait cause: {}: {}\n", Str(j["wait_cause"]["cause"]),
                                       Str(j["wait_cause"]["detail"]));
            }
            if (j.contains("slo")) {
              const json& slo = j["slo"];
              std::string by;
              for (const auto& [cause, s] : slo["miss_s_by_cause"].items()) {
                by += fmt::format("{}{} {:.0f}s", by.empty() ? "" : ", ", cause, s.get<double>());
              }
              std::cout << fmt::format("SLO missed: {}\n", by.empty() ? "never" : by);
              if (!slo["last_miss"].is_null()) {
                std::cout << fmt::format("Last miss: {} ({})\n", Str(slo["last_miss"]["detail"]),
                                         TimeAndRelative(Ms(slo["last_miss"]["time_ms"]), now));
              }
            }
            std::cout << "Priority derivation:\n";
            for (const json& line : j["priority"]["derivation"]) std::cout << "  " << Str(line) << "\n";
          });
        } else {
          Output(*f, CallJson(*f, "POST", path + "/" + verb), [&](const json& w) {
            std::cout << fmt::format("workload {} {}: {}\n", Str(w["id"]),
                                     verb == "cancel" ? "cancel requested" : "approved", Str(w["state"]));
          });
        }
      });
    });
  }
  // cordon / uncordon
  for (const char* name : {"cordon", "uncordon"}) {
    auto f = std::make_shared<ClientFlags>();
    auto node = std::make_shared<std::string>();
    const std::string verb = name;
    CLI::App* c = root.add_subcommand(
        verb, verb == "cordon" ? "Stop placing work on a node; what runs there stays (admin)"
                               : "Place work on a node again, on its GPUs that have not failed (admin)");
    AddCommon(c, f);
    c->add_option("node", *node, "Node name")->required();
    c->callback([=] {
      Guard([&] {
        Output(*f, CallJson(*f, "POST", "/v1/nodes/" + NodeNameArg(*node) + "/" + verb), [&](const json& n) {
          std::cout << fmt::format("node {} {}", Str(n["name"]), verb == "cordon" ? "cordoned" : "uncordoned");
          if (!n["failed_gpus"].empty()) std::cout << fmt::format(" (failed GPUs kept out: {})", n["failed_gpus"].dump());
          std::cout << "\n";
        });
      });
    });
  }
  // version
  {
    CLI::App* c = root.add_subcommand("version", "Print the version and how this binary was built");
    c->callback([] {
      std::cout << kTidalVersion << "\n"
                << fmt::format("  api:       v1\n  build:     {}\n  compiler:  {}\n  c++:       {}\n  allocator: {}\n",
                               TIDAL_BUILD_TYPE, server::kTidalCompiler, __cplusplus, TIDAL_ALLOCATOR);
    });
  }
  // resize
  {
    auto f = std::make_shared<ClientFlags>();
    auto id = std::make_shared<std::string>();
    auto replicas = std::make_shared<int>(0);
    CLI::App* c = root.add_subcommand("resize", "Resize an elastic job");
    AddCommon(c, f);
    c->add_option("id", *id, "Workload id")->required();
    c->add_option("--replicas", *replicas, "New replica count")->required();
    c->callback([=] {
      Guard([&] {
        json body = {{"replicas", *replicas}};
        Output(*f, CallJson(*f, "POST", "/v1/workloads/" + WorkloadIdArg(*id) + "/resize", &body),
               [](const json& w) { std::cout << fmt::format("workload {} resized to {} replicas\n", Str(w["id"]), Str(w["replicas"])); });
      });
    });
  }
  // list
  {
    auto f = std::make_shared<ClientFlags>();
    auto filters = std::make_shared<std::map<std::string, std::string>>();
    auto watch = std::make_shared<WatchFlags>();
    CLI::App* c = root.add_subcommand("list", "List workloads (the same as get workloads)");
    AddCommon(c, f);
    AddListFilters(c, *filters);
    watch->Add(c);
    c->callback([=] { Guard([&] { ListWorkloads(*f, *filters, *watch); }); });
  }
  // dry-run: exit 3 when a workload can never start as written
  {
    auto f = std::make_shared<ClientFlags>();
    auto file = std::make_shared<std::string>();
    CLI::App* c = root.add_subcommand(
        "dry-run", "Would this workload start now? If not, what blocks it and until when (exit 3: never)");
    AddCommon(c, f);
    c->add_option("-f,--file", *file, "Workload file")->required();
    c->callback([=] {
      Guard([&] {
        json out = json::array();
        std::vector<std::string> names;
        for (const json& w : ReadWorkloads(*file)) {
          out.push_back(CallJson(*f, "POST", "/v1/dry-run", &w));
          names.push_back(Field(w, {"name"}).is_string() ? w["name"].get<std::string>() : "-");
        }
        // A rejection is final: no amount of waiting starts it.
        bool never = false;
        for (const json& j : out) never = never || Str(Field(j, {"detail"})).starts_with("rejected: ");
        Output(*f, out, [&](const json& all) {
          const int64_t now = WallNowMs();
          Table t({"NAME", "VERDICT", "PRIORITY", "WHERE", "VICTIMS", "BLOCKER", "START"});
          for (size_t i = 0; i < all.size(); ++i) {
            const json& j = all[i];
            const bool starts = Field(j, {"would_start"}) == true;
            const bool rejected = Str(Field(j, {"detail"})).starts_with("rejected: ");
            std::string where, victims;
            for (const json& p : Field(j, {"placement"})) {
              where += (where.empty() ? "" : ", ") + Str(p["node"]) + p["gpus"].dump();
            }
            for (const json& v : Field(j, {"preempts"})) {
              victims += fmt::format("{}workload {} ({}, {:.0f} GPU-s lost)", victims.empty() ? "" : ", ",
                                     Str(v["victim"]), Str(v["cause"]), v["lost_gpu_seconds"].get<double>());
            }
            std::string blocker = "-";
            if (!starts) blocker = Str(Field(j, {"reason"})) + ": " + Detail(Field(j, {"detail"}), now);
            t.Add({names[i], starts ? "starts now" : rejected ? "never" : "waits", Str(Field(j, {"priority", "value"})),
                   where.empty() ? "-" : where, victims.empty() ? "-" : victims, blocker,
                   starts ? "now" : Relative(Ms(Field(j, {"estimated_start_ms"})), now)});
          }
          std::cout << t.Render();
        });
        if (never) ExitCode() = kExitNever;
      });
    });
  }
  // queues
  {
    auto f = std::make_shared<ClientFlags>();
    CLI::App* c = root.add_subcommand("queues", "Queues and their usage");
    AddCommon(c, f);
    c->callback([=] {
      Guard([&] {
        Output(*f, CallJson(*f, "GET", "/v1/queues"), [](const json& j) {
          Table t({"QUEUE", "PARENT", "GUARANTEED", "ALLOCATED", "BORROWED", "LENT", "RUNNING", "PENDING"});
          for (const json& q : j["queues"]) {
            t.Add({Str(q["name"]), q["parent"] == "" ? "-" : Str(q["parent"]), Str(q["guaranteed_gpus"]),
                   Str(q["allocated_gpus"]), Str(q["borrowed_gpus"]), Str(q["lent_gpus"]), Str(q["running"]),
                   Str(q["pending"])});
          }
          std::cout << t.Render();
        });
      });
    });
  }
  // nodes
  {
    auto f = std::make_shared<ClientFlags>();
    CLI::App* c = root.add_subcommand("nodes", "Nodes and their GPUs");
    AddCommon(c, f);
    c->callback([=] {
      Guard([&] {
        Output(*f, CallJson(*f, "GET", "/v1/nodes"), [](const json& j) {
          Table t({"NODE", "POOL", "MODEL", "GPUS", "FREE", "HEALTH", "CORDONED", "AGENT"});
          for (const json& n : j["nodes"]) {
            t.Add({Str(n["name"]), Str(n["pool"]), Str(n["gpu_model"]), Str(n["gpu_count"]), Str(n["free_gpus"]),
                   Str(n["health"]), n["cordoned"].get<bool>() ? "yes" : "no",
                   n["lost"].get<bool>() ? "lost" : n["registered"].get<bool>() ? "up" : "-"});
          }
          std::cout << t.Render();
        });
      });
    });
  }
  // loans
  {
    auto f = std::make_shared<ClientFlags>();
    auto hours = std::make_shared<int>(24);
    auto slot = std::make_shared<int>(30);
    CLI::App* c = root.add_subcommand("loans", "The loan calendar: when each shared node is lent and when it goes back");
    AddCommon(c, f);
    c->add_option("--hours", *hours, "How far ahead to plan")->check(CLI::Range(1, 7 * 24));
    c->add_option("--slot", *slot, "Slot length in minutes")->check(CLI::Range(5, 24 * 60));
    c->callback([=] {
      Guard([&] {
        const std::string q = Query({{"hours", std::to_string(*hours)}, {"slot_minutes", std::to_string(*slot)}});
        Output(*f, CallJson(*f, "GET", "/v1/loans" + q), [](const json& j) { PrintLoanCalendar(j, WallNowMs()); });
      });
    });
  }
  // audit, and events (one workload's audit rows, as kubectl's events)
  for (const std::string verb : {"audit", "events"}) {
    auto f = std::make_shared<ClientFlags>();
    auto filters = std::make_shared<std::map<std::string, std::string>>();
    auto watch = std::make_shared<WatchFlags>();
    auto id = std::make_shared<std::string>();
    CLI::App* c = verb == "audit" ? root.add_subcommand("audit", "The audit log")
                                  : root.add_subcommand("events", "What happened to one workload (its audit rows)");
    AddCommon(c, f);
    auto range = std::make_shared<TimeRange>();
    if (verb == "audit") {
      c->add_option("--workload", (*filters)["workload"], "Filter by workload");
    } else {
      c->add_option("id", *id, "Workload id")->required();
    }
    for (const char* k : {"tenant", "limit"}) {
      c->add_option(std::string("--") + k, (*filters)[k], std::string("Filter by ") + k);
    }
    c->add_option("--action", (*filters)["action"], "Filter by action")->check(CLI::IsMember(kAuditActions));
    range->Add(c);
    watch->Add(c);
    c->callback([=] {
      Guard([&] {
        if (!id->empty()) (*filters)["workload"] = WorkloadIdArg(*id);
        std::vector<std::pair<std::string, std::string>> q(filters->begin(), filters->end());
        range->AppendTo(q);
        Watch(*watch, [&] { return CallJson(*f, "GET", "/v1/audit" + Query(q)); }, [&](const json& reply) {
          Output(*f, reply, [](const json& j) {
            const int64_t now = WallNowMs();
            Table t({"SEQ", "TIME", "AGE", "ACTOR", "ACTION", "WORKLOAD", "TENANT", "DETAIL"});
            for (const json& a : j["audit"]) {
              const std::string detail = AuditDetail(a, now);
              t.Add({Str(a["seq"]), Rfc3339(Ms(a["time_ms"])), Relative(Ms(a["time_ms"]), now), Str(a["actor"]), Str(a["action"]),
                     Ms(a["workload"]) > 0 ? Str(a["workload"]) : "-", a["tenant"] == "" ? "-" : Str(a["tenant"]),
                     detail.empty() ? "-" : detail});
            }
            std::cout << t.Render();
          });
        });
      });
    });
  }
  // logs: a pod's output as its agent uploaded it; -f polls on from the
  // last offset until the workload has ended and nothing more comes.
  {
    auto f = std::make_shared<ClientFlags>();
    auto id = std::make_shared<std::string>();
    auto rank = std::make_shared<int>(0);
    auto follow = std::make_shared<bool>(false);
    auto poll_ms = std::make_shared<int>(1000);
    CLI::App* c = root.add_subcommand(
        "logs", "A pod's stdout and stderr as its agent uploaded them (the server keeps the last 1 MiB per rank)");
    AddCommon(c, f);
    c->add_option("id", *id, "Workload id")->required();
    c->add_option("--rank", *rank, "Which pod (rank) of the workload")->check(CLI::NonNegativeNumber);
    c->add_flag("-f,--follow", *follow, "Keep printing new output until the workload has ended (Ctrl-C stops)");
    c->add_option("--poll-interval-ms", *poll_ms, "With -f: how often to ask for more")
        ->check(CLI::Range(10, 60000))
        ->group("");
    c->callback([=] {
      Guard([&] {
        const std::string path = "/v1/workloads/" + WorkloadIdArg(*id) + "/logs";
        int64_t offset = 0;
        bool first = true;
        int quiet_after_end = 0;
        while (true) {
          const json reply =
              CallJson(*f, "GET", path + Query({{"rank", std::to_string(*rank)}, {"offset", std::to_string(offset)}}));
          auto page = protocol::PodLogPageFromJson(reply);
          if (!page.ok()) throw ClientError("the server's log page: " + page.status().message());
          if (f->output == "json" || f->output == "yaml") {
            Output(*f, reply, [](const json&) {});
          } else {
            if (first && page->truncated) {
              std::cerr << fmt::format("tidal: earlier output of rank {} is gone (the server keeps the last 1 MiB)\n", *rank);
            }
            std::cout << page->data << std::flush;
          }
          first = false;
          offset = page->next_offset;
          if (!*follow) break;
          if (page->data.empty()) {
            // Ended, and one more poll brought nothing: the agent's last
            // upload (a sync after the exit) has come.
            const std::string state = Str(Field(CallJson(*f, "GET", "/v1/workloads/" + *id), {"state"}));
            const bool ended = state == "succeeded" || state == "failed" || state == "cancelled";
            quiet_after_end = ended ? quiet_after_end + 1 : 0;
            if (quiet_after_end >= 3) break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(*poll_ms));
        }
      });
    });
  }
  // report
  {
    auto f = std::make_shared<ClientFlags>();
    auto filters = std::make_shared<std::map<std::string, std::string>>();
    auto csv = std::make_shared<bool>(false);
    CLI::App* c = root.add_subcommand("report", "Usage, preemption and governance report");
    AddCommon(c, f);
    auto range = std::make_shared<TimeRange>();
    range->Add(c);
    for (const char* k : {"tenant", "project"}) {
      c->add_option(std::string("--") + k, (*filters)[k], std::string("Filter by ") + k);
    }
    c->add_flag("--csv", *csv, "CSV instead of a table");
    c->callback([=] {
      Guard([&] {
        std::vector<std::pair<std::string, std::string>> q(filters->begin(), filters->end());
        range->AppendTo(q);
        if (*csv && f->output != "table") {
          throw UsageError(fmt::format("--csv and -o {} both choose the output: give one", f->output));
        }
        if (*csv) {
          q.emplace_back("format", "csv");
          std::cout << Call(*f, "GET", "/v1/reports" + Query(q), nullptr);
          return;
        }
        Output(*f, CallJson(*f, "GET", "/v1/reports" + Query(q)), [](const json& j) {
          Table t({"TENANT", "PROJECT", "GPU-H", "COST", "HIGH-PRIO-GPU-H", "PREEMPT(CAUSED/SUFFERED)", "LOST-GPU-H", "BORROWED-GPU-H", "WAIT-P95-S"});
          for (const json& r : j["rows"]) {
            double total = 0;
            for (const auto& [k, v] : r["gpu_hours"].items()) total += v.get<double>();
            t.Add({Str(r["tenant"]), Str(r["project"]), fmt::format("{:.2f}", total), fmt::format("{:.2f}", r["cost"].get<double>()),
                   fmt::format("{:.2f}", r["high_priority"]["gpu_hours"].get<double>()),
                   fmt::format("{}/{}", r["preemptions_caused"].get<int>(), r["preemptions_suffered"].get<int>()),
                   fmt::format("{:.2f}", r["lost_gpu_hours"].get<double>()),
                   fmt::format("{:.2f}", r["borrowed_gpu_hours"].get<double>()),
                   fmt::format("{:.1f}", r["queue_wait_s"]["p95"].get<double>())});
          }
          std::cout << t.Render();
          if (!j["findings"].empty()) {
            std::cout << "\nFindings:\n";
            for (const json& x : j["findings"]) std::cout << "  [" << Str(x["kind"]) << "] " << Str(x["message"]) << "\n";
          }
          if (!j["scale_ups"].empty()) {
            std::cout << "\nScale-ups:\n";
            for (const json& s : j["scale_ups"]) {
              std::cout << fmt::format("  {} {}->{}: {}{}{}\n", Str(s["name"]), Str(s["from"]), Str(s["to"]),
                                       Str(s["cause"]), s["slow"].get<bool>() ? " (slow)" : "",
                                       Str(s["detail"]).empty() ? "" : ": " + Str(s["detail"]));
            }
          }
        });
      });
    });
  }
});

}  // namespace
}  // namespace tidal::cli
