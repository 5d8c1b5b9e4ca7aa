// `tidal sim replay --store sqlite:PATH [--cluster FILE] [--policy FILE]`:
// replays a server's edit journal (sim/journal_replay.h) and reports every
// edit the replay makes differently. Exit 0 identical, 1 any difference (or
// an unreadable store), 2 a wrong command line. With --cluster or --policy
// different from the store's, it is a what-if: the journal's figures next to
// the replay's under the new configuration, exit 0.
#include "cli/sim_replay_command.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "cli/command_registry.h"
#include "server/store.h"
#include "sim/journal_replay.h"

namespace tidal::cli {
namespace {

struct ReplayArgs {
  std::string store;
  std::string cluster;
  std::string policy;
  int max_differences = 50;
};

StatusOr<std::string> ReadFile(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(fmt::format("{}: cannot read '{}'", flag, path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The configuration text to replay under: the override file, or the store's
// meta. `what_if` is set when an override differs from the meta.
StatusOr<std::string> ConfigText(server::Store& store, const char* key, const std::string& override_path,
                                 std::string_view flag, bool* what_if) {
  auto meta = store.ReadMeta(key);
  if (!meta.ok()) return meta.status();
  if (override_path.empty()) {
    if (!meta->has_value()) {
      return InvalidArgument(fmt::format("the store has no meta '{}' (written by the server); give {} FILE", key, flag));
    }
    return **meta;
  }
  TIDAL_ASSIGN_OR_RETURN(std::string text, ReadFile(override_path, flag));
  if (meta->has_value()) {
    TIDAL_ASSIGN_OR_RETURN(nlohmann::json given, sim::ConfigJson(text, override_path));
    TIDAL_ASSIGN_OR_RETURN(nlohmann::json stored, sim::ConfigJson(**meta, std::string("meta ") + key));
    if (given != stored) *what_if = true;
  }
  return text;
}

void PrintTallies(const sim::ReplayReport& r) {
  const auto row = [](std::string_view metric, const std::string& journal, const std::string& replay) {
    std::cout << fmt::format("  {:<32} {:>10} {:>10}\n", metric, journal, replay);
  };
  std::cout << fmt::format("  {:<32} {:>10} {:>10}\n", "metric", "journal", "replay");
  row("placements", std::to_string(r.journal.placements), std::to_string(r.replay.placements));
  std::map<std::string, int> causes;
  for (const auto& [cause, n] : r.journal.preemptions) causes[cause] = 0;
  for (const auto& [cause, n] : r.replay.preemptions) causes[cause] = 0;
  for (const auto& [cause, unused] : causes) {
    const auto count = [&](const sim::ReplayTally& t) {
      const auto it = t.preemptions.find(cause);
      return std::to_string(it == t.preemptions.end() ? 0 : it->second);
    };
    row("preemptions (" + cause + ")", count(r.journal), count(r.replay));
  }
  row("mean queue wait (s)", fmt::format("{:.1f}", r.journal.MeanWait_s()), fmt::format("{:.1f}", r.replay.MeanWait_s()));
  row("P95 queue wait (s)", fmt::format("{:.1f}", r.journal.P95Wait_s()), fmt::format("{:.1f}", r.replay.P95Wait_s()));
  row("loans", std::to_string(r.journal.loans), std::to_string(r.replay.loans));
  row("returns", std::to_string(r.journal.returns), std::to_string(r.replay.returns));
}

int Fail(const Status& s) {
  std::cerr << "tidal sim replay: " << s.ToString() << "\n";
  return s.code() == StatusCode::kInvalidArgument ? kExitUsage : 1;
}

int RunReplay(const ReplayArgs& a) {
  // Opening a store creates a missing file: a mistyped path would replay an
  // empty history instead of saying so.
  constexpr std::string_view kSqlite = "sqlite:";
  if (a.store.rfind(kSqlite, 0) == 0 && !std::filesystem::exists(a.store.substr(kSqlite.size()))) {
    return Fail(InvalidArgument(fmt::format("--store: no such file '{}'", a.store.substr(kSqlite.size()))));
  }
  auto store = server::OpenStore(a.store);
  if (!store.ok()) return Fail(store.status());
  bool what_if = false;
  auto cluster_text = ConfigText(**store, server::kMetaCluster, a.cluster, "--cluster", &what_if);
  if (!cluster_text.ok()) return Fail(cluster_text.status());
  auto policy_text = ConfigText(**store, server::kMetaPolicy, a.policy, "--policy", &what_if);
  if (!policy_text.ok()) return Fail(policy_text.status());
  auto cluster = sim::ParseClusterText(*cluster_text, a.cluster.empty() ? "meta cluster" : a.cluster);
  if (!cluster.ok()) return Fail(cluster.status());
  auto policy = sim::ParsePolicyText(*policy_text, a.policy.empty() ? "meta policy" : a.policy);
  if (!policy.ok()) return Fail(policy.status());

  sim::JournalReplay replay(*cluster, *policy);
  // A store it cannot read to the end is exit 1, not a wrong command line.
  if (Status s = sim::ReplayStore(**store, *cluster, replay); !s.ok()) {
    std::cerr << "tidal sim replay: " << s.ToString() << "\n";
    return 1;
  }
  const sim::ReplayReport report = replay.Finish();

  if (report.snapshot_seq > 0) {
    std::cout << fmt::format("started from the snapshot at seq {}\n", report.snapshot_seq);
  } else {
    std::cout << "started from the first record\n";
  }
  std::cout << fmt::format(
      "records read: {}\nserver starts: {}\npasses replayed: {}\nedits compared: {}\nworld edits applied: {}\n",
      report.records, report.restarts, report.passes, report.compared, report.world_edits);
  if (!report.refused.empty()) {
    std::cout << fmt::format("world edits refused by the replayed state: {}\n", report.refused.size());
    for (size_t i = 0; i < report.refused.size() && i < static_cast<size_t>(a.max_differences); ++i) {
      std::cout << "  " << report.refused[i] << "\n";
    }
  }
  if (what_if) {
    std::cout << fmt::format("what-if: the configuration differs from the store's; {} edits differ\n",
                             report.differences.size());
    PrintTallies(report);
    return 0;
  }
  if (report.identical()) {
    std::cout << "identical: the replay made every journaled edit\n";
    return 0;
  }
  std::cout << fmt::format("differences: {}\n", report.differences.size());
  for (size_t i = 0; i < report.differences.size() && i < static_cast<size_t>(a.max_differences); ++i) {
    std::cout << "  " << report.differences[i].ToString() << "\n";
  }
  if (report.differences.size() > static_cast<size_t>(a.max_differences)) {
    std::cout << fmt::format("  ... and {} more (--max-differences)\n",
                             report.differences.size() - static_cast<size_t>(a.max_differences));
  }
  return 1;
}

}  // namespace

void AddSimReplayCommand(CLI::App* sim) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = sim->add_subcommand(
      "replay", "Replay a server's edit journal and report every edit it makes differently (docs/simulator.md)");
  cmd->add_option("--store", args->store, "The server's store, sqlite:PATH")->required();
  cmd->add_option("--cluster", args->cluster, "Cluster file; default: the one the store's history ran under");
  cmd->add_option("--policy", args->policy, "Policy file; default: the one the store's history ran under");
  cmd->add_option("--max-differences", args->max_differences, "Print at most this many differences")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { ExitCode() = RunReplay(*args); });
}

}  // namespace tidal::cli
