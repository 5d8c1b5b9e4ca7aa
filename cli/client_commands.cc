// The `tidal` API client: submit, get, list, cancel, explain, dry-run,
// queues, nodes, audit, report, approve, resize. Server and token come from
// --server/--token, then TIDAL_SERVER/TIDAL_TOKEN, then
// ~/.config/tidal/config.yaml (`server:` and `token:`), like kubectl and gh.
// Output is a table unless `-o json`. Any error is one line and exit 1.
#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/client_table.h"
#include "cli/command_registry.h"
#include "config/yaml_document.h"

namespace tidal::cli {
namespace {

using nlohmann::json;

struct ClientFlags {
  std::string server;
  std::string token;
  std::string output = "table";
};

class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Flags, then environment, then the config file.
std::pair<std::string, std::string> ResolveTarget(const ClientFlags& f) {
  std::string server = f.server, token = f.token;
  if (server.empty()) {
    if (const char* s = std::getenv("TIDAL_SERVER")) server = s;
  }
  if (token.empty()) {
    if (const char* t = std::getenv("TIDAL_TOKEN")) token = t;
  }
  if (server.empty() || token.empty()) {
    std::string path;
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) {
      path = std::string(x) + "/tidal/config.yaml";
    } else if (const char* h = std::getenv("HOME")) {
      path = std::string(h) + "/.config/tidal/config.yaml";
    }
    if (!path.empty() && std::filesystem::exists(path)) {
      auto doc = config::YamlDocument::Load(path);
      if (!doc.ok()) throw ClientError(doc.status().message());
      const json& root = doc->root();
      if (root.is_object()) {
        if (server.empty() && root.contains("server") && root["server"].is_string()) server = root["server"];
        if (token.empty() && root.contains("token") && root["token"].is_string()) token = root["token"];
      }
    }
  }
  if (server.empty()) server = "http://127.0.0.1:8080";
  if (server.find("://") == std::string::npos) server = "http://" + server;
  return {server, token};
}

// One request; returns the parsed JSON body (or the raw text for CSV).
std::string Call(const ClientFlags& f, const std::string& method, const std::string& path,
                 const json* body, const httplib::Headers& extra = {}) {
  auto [server, token] = ResolveTarget(f);
  httplib::Client client(server);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  client.set_tcp_nodelay(true);
  httplib::Headers headers = extra;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  httplib::Result res = method == "GET"
                            ? client.Get(path.c_str(), headers)
                            : client.Post(path.c_str(), headers, body ? body->dump() : "{}",
                                          "application/json");
  if (!res) {
    throw ClientError(fmt::format("cannot reach {}: {}", server, httplib::to_string(res.error())));
  }
  if (res->status >= 300) {
    json err = json::parse(res->body, nullptr, false);
    std::string msg = res->body;
    if (err.is_object() && err.contains("error") && err["error"].contains("message")) {
      msg = err["error"]["message"].get<std::string>();
    }
    throw ClientError(fmt::format("{} (HTTP {})", msg, res->status));
  }
  return res->body;
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
  if (!doc.ok()) throw ClientError(doc.status().message());
  const json& root = doc->root();
  std::vector<json> out;
  if (root.is_array()) {
    for (const json& w : root) out.push_back(w);
  } else if (root.is_object() && root.contains("workloads")) {
    for (const json& w : root["workloads"]) out.push_back(w);
  } else if (root.is_object()) {
    out.push_back(root);
  } else {
    throw ClientError(file + ": expected a workload object or a list of workloads");
  }
  return out;
}

std::string Str(const json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

std::string Millis(const json& j) {
  if (!j.is_number() || j.get<int64_t>() <= 0) return "-";
  const std::time_t t = j.get<int64_t>() / 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void PrintWorkloads(const json& list) {
  Table t({"ID", "NAME", "TENANT", "PROJECT", "QUEUE", "KIND", "STATE", "GPUS", "PRIORITY", "REASON"});
  for (const json& w : list) {
    std::string reason = "-";
    if (w.contains("wait") && w["wait"].is_object()) reason = Str(w["wait"]["reason"]);
    if (w["state"] == "awaiting_approval") reason = "awaiting_approval";
    t.Add({Str(w["id"]), Str(w["name"]), Str(w["tenant"]), Str(w["project"]), Str(w["queue"]),
           Str(w["kind"]), Str(w["state"]),
           std::to_string(w["replicas"].get<int>() * w["gpus_per_replica"].get<int>()),
           Str(w["priority"]["value"]), reason});
  }
  std::cout << t.Render();
}

void PrintWorkload(const json& w) {
  std::cout << fmt::format("ID:        {}\nName:      {}\nKind:      {}\nState:     {}\n", Str(w["id"]),
                           Str(w["name"]), Str(w["kind"]), Str(w["state"]));
  std::cout << fmt::format("Tenant:    {}  Project: {}  Queue: {}\n", Str(w["tenant"]), Str(w["project"]),
                           Str(w["queue"]));
  std::cout << fmt::format("Size:      {} x {} GPUs (min {}, max {})\n", Str(w["replicas"]),
                           Str(w["gpus_per_replica"]), Str(w["min_replicas"]), Str(w["max_replicas"]));
  std::cout << fmt::format("Priority:  {} ({})\n", Str(w["priority"]["value"]), Str(w["priority"]["preemptibility"]));
  std::cout << fmt::format("Submitted: {} by {}\n", Millis(w["submit_time_ms"]), Str(w["submitted_by"]));
  if (w["allocation"].is_object()) {
    std::cout << "Pods:\n";
    for (const json& p : w["allocation"]["pods"]) {
      std::cout << fmt::format("  rank {}: {} GPUs {}\n", Str(p["rank"]), Str(p["node"]), p["gpus"].dump());
    }
  }
  if (w["wait"].is_object()) {
    std::cout << fmt::format("Waiting:   {}: {}\n", Str(w["wait"]["reason"]), Str(w["wait"]["detail"]));
  }
}

void Output(const ClientFlags& f, const json& j, const std::function<void(const json&)>& table) {
  if (f.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    table(j);
  }
}

void AddCommon(CLI::App* cmd, const std::shared_ptr<ClientFlags>& f) {
  cmd->add_option("--server", f->server, "API address (env TIDAL_SERVER, or server: in ~/.config/tidal/config.yaml)");
  cmd->add_option("--token", f->token, "Bearer token (env TIDAL_TOKEN, or token: in the config file)");
  cmd->add_option("-o,--output", f->output, "table or json")->check(CLI::IsMember({"table", "json"}));
}

// Runs `body`, turning any failure into one line on stderr and exit 1.
void Guard(const std::function<void()>& body) {
  try {
    body();
  } catch (const ClientError& e) {
    std::cerr << "tidal: error: " << e.what() << "\n";
    ExitCode() = 1;
  } catch (const std::exception& e) {
    std::cerr << "tidal: error: " << e.what() << "\n";
    ExitCode() = 1;
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

RegisterCommand reg([](CLI::App& root) {
  // submit
  {
    auto f = std::make_shared<ClientFlags>();
    auto file = std::make_shared<std::string>();
    auto key = std::make_shared<std::string>();
    CLI::App* c = root.add_subcommand("submit", "Submit workloads from a YAML/JSON file");
    AddCommon(c, f);
    c->add_option("-f,--file", *file, "Workload file (one workload, a list, or workloads: [...])")->required();
    c->add_option("--idempotency-key", *key, "Apply at most once (a retry returns the first result)");
    c->callback([=] {
      Guard([&] {
        json out = json::array();
        const auto workloads = ReadWorkloads(*file);
        for (size_t i = 0; i < workloads.size(); ++i) {
          httplib::Headers h;
          if (!key->empty()) h.emplace("Idempotency-Key", workloads.size() == 1 ? *key : fmt::format("{}-{}", *key, i));
          out.push_back(CallJson(*f, "POST", "/v1/workloads", &workloads[i], h));
        }
        Output(*f, out, [](const json& j) {
          Table t({"ID", "NAME", "STATE", "PRIORITY"});
          for (const json& w : j) t.Add({Str(w["id"]), Str(w["name"]), Str(w["state"]), Str(w["priority"]["value"])});
          std::cout << t.Render();
        });
      });
    });
  }
  // get / cancel / approve / explain
  for (const char* name : {"get", "cancel", "approve", "explain"}) {
    auto f = std::make_shared<ClientFlags>();
    auto id = std::make_shared<std::string>();
    const std::string verb = name;
    const std::string help = verb == "get" ? "Show one workload" : verb == "cancel" ? "Cancel a workload"
                             : verb == "approve" ? "Approve a workload awaiting approval (admin)"
                                                 : "Explain why a workload waits (reason, numbers, priority)";
    CLI::App* c = root.add_subcommand(verb, help);
    AddCommon(c, f);
    c->add_option("id", *id, "Workload id")->required();
    c->callback([=] {
      Guard([&] {
        const std::string path = "/v1/workloads/" + httplib::detail::encode_query_param(*id);
        if (verb == "get") {
          Output(*f, CallJson(*f, "GET", path), PrintWorkload);
        } else if (verb == "explain") {
          Output(*f, CallJson(*f, "GET", path + "/explain"), [](const json& j) {
            std::cout << fmt::format("Workload {} ({}) is {}\n", Str(j["id"]), Str(j["name"]), Str(j["state"]));
            std::cout << fmt::format("Reason:   {}\nDetail:   {}\nEstimated start: {}\n", Str(j["reason"]),
                                     Str(j["detail"]), Millis(j["estimated_start_ms"]));
            std::cout << fmt::format("Queue:    {} ({} of {} guaranteed GPUs in use, {} borrowed)\n",
                                     Str(j["queue"]["name"]), Str(j["queue"]["allocated_gpus"]),
                                     Str(j["queue"]["guaranteed_gpus"]), Str(j["queue"]["borrowed_gpus"]));
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
        Output(*f, CallJson(*f, "POST", "/v1/workloads/" + httplib::detail::encode_query_param(*id) + "/resize", &body),
               [](const json& w) { std::cout << fmt::format("workload {} resized to {} replicas\n", Str(w["id"]), Str(w["replicas"])); });
      });
    });
  }
  // list
  {
    auto f = std::make_shared<ClientFlags>();
    auto filters = std::make_shared<std::map<std::string, std::string>>();
    CLI::App* c = root.add_subcommand("list", "List workloads");
    AddCommon(c, f);
    for (const char* k : {"tenant", "project", "queue", "kind", "state", "limit"}) {
      c->add_option(std::string("--") + k, (*filters)[k], std::string("Filter by ") + k);
    }
    c->callback([=] {
      Guard([&] {
        std::vector<std::pair<std::string, std::string>> q(filters->begin(), filters->end());
        json j = CallJson(*f, "GET", "/v1/workloads" + Query(q));
        Output(*f, j, [](const json& x) { PrintWorkloads(x["workloads"]); });
      });
    });
  }
  // dry-run
  {
    auto f = std::make_shared<ClientFlags>();
    auto file = std::make_shared<std::string>();
    CLI::App* c = root.add_subcommand("dry-run", "Would this workload start now? If not, why and when");
    AddCommon(c, f);
    c->add_option("-f,--file", *file, "Workload file")->required();
    c->callback([=] {
      Guard([&] {
        json out = json::array();
        for (const json& w : ReadWorkloads(*file)) out.push_back(CallJson(*f, "POST", "/v1/dry-run", &w));
        Output(*f, out, [](const json& all) {
          for (const json& j : all) {
            if (j["would_start"].get<bool>()) {
              std::string where;
              for (const json& p : j["placement"]) where += (where.empty() ? "" : ", ") + Str(p["node"]) + p["gpus"].dump();
              std::cout << "would start now on " << where << "\n";
              for (const json& v : j["preempts"]) {
                std::cout << fmt::format("  preempting workload {} ({}), losing {:.0f} GPU-seconds\n", Str(v["victim"]),
                                         Str(v["cause"]), v["lost_gpu_seconds"].get<double>());
              }
            } else {
              std::cout << fmt::format("would wait: {}: {} (estimated start {})\n", Str(j["reason"]), Str(j["detail"]),
                                       Millis(j["estimated_start_ms"]));
            }
            std::cout << "priority " << Str(j["priority"]["value"]) << "\n";
          }
        });
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
  // audit
  {
    auto f = std::make_shared<ClientFlags>();
    auto filters = std::make_shared<std::map<std::string, std::string>>();
    CLI::App* c = root.add_subcommand("audit", "The audit log");
    AddCommon(c, f);
    for (const char* k : {"workload", "action", "tenant", "from_ms", "to_ms", "limit"}) {
      c->add_option(std::string("--") + k, (*filters)[k], std::string("Filter by ") + k);
    }
    c->callback([=] {
      Guard([&] {
        std::vector<std::pair<std::string, std::string>> q(filters->begin(), filters->end());
        Output(*f, CallJson(*f, "GET", "/v1/audit" + Query(q)), [](const json& j) {
          Table t({"SEQ", "TIME", "ACTOR", "ACTION", "WORKLOAD", "TENANT", "DETAIL"});
          for (const json& a : j["audit"]) {
            std::string detail = a["detail"].is_object() && a["detail"].contains("reason") ? Str(a["detail"]["reason"]) : "";
            if (detail.empty() && a["detail"].is_object() && a["detail"].contains("cause")) detail = Str(a["detail"]["cause"]);
            t.Add({Str(a["seq"]), Millis(a["time_ms"]), Str(a["actor"]), Str(a["action"]),
                   a["workload"].get<uint64_t>() ? Str(a["workload"]) : "-", a["tenant"] == "" ? "-" : Str(a["tenant"]),
                   detail.empty() ? "-" : detail});
          }
          std::cout << t.Render();
        });
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
    for (const char* k : {"tenant", "project", "from_ms", "to_ms"}) {
      c->add_option(std::string("--") + k, (*filters)[k], std::string("Filter by ") + k);
    }
    c->add_flag("--csv", *csv, "CSV instead of a table");
    c->callback([=] {
      Guard([&] {
        std::vector<std::pair<std::string, std::string>> q(filters->begin(), filters->end());
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
              std::cout << fmt::format("  {} {}->{}: capacity {:.0f}s, victims' grace {:.0f}s, model load {:.0f}s, cold start {:.0f}s: {}\n",
                                       Str(s["name"]), Str(s["from"]), Str(s["to"]), s["waiting_for_capacity_s"].get<double>(),
                                       s["victims_grace_s"].get<double>(), s["model_load_s"].get<double>(),
                                       s["cold_start_s"].get<double>(), Str(s["cause"]));
            }
          }
        });
      });
    });
  }
});

}  // namespace
}  // namespace tidal::cli
