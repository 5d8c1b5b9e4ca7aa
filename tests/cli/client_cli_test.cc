// Golden tests of the `tidal` client commands against a real server: the
// table output of each command is compared with tests/cli/golden/*.txt
// (TIDAL_UPDATE_GOLDEN=1 rewrites them). Also: where the server address and
// token come from, and that errors are one line with a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "protocol/leader_redirect.h"
#include "protocol/pod_log.h"
#include "tests/support/server_fixture.h"
#include "tests/support/stub_replica.h"

namespace tidal::testing {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("TIDAL_SOURCE_DIR");
  return s ? s : ".";
}

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->running());
    server_->RegisterClusterNodes();
    home_ = server_->dir() + "/home";
    std::filesystem::create_directories(home_);
  }

  // Runs `tidal ARGS` with the given environment additions.
  CliRun Tidal(const std::string& args, const std::string& token = kResearchToken, bool use_env = true) {
    const std::string out = server_->dir() + "/cli.out", err = server_->dir() + "/cli.err";
    std::string env = "env -u TIDAL_SERVER -u TIDAL_TOKEN -u TIDAL_CONFIG HOME=" + home_ + " XDG_CONFIG_HOME= " + extra_env_;
    if (use_env) env += "TIDAL_SERVER=" + server_->url() + " TIDAL_TOKEN=" + token + " ";
    const std::string cmd = env + server_->tidal_binary() + " " + args + " > " + out + " 2> " + err;
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Read(out);
    r.err = Read(err);
    return r;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Ages and relative times ("0s", "3s ago", "in 2m") and RFC 3339 instants
  // depend on when the test runs: they become <age>, <ago>, <in> and <time>,
  // and tables are re-aligned after, so the goldens keep their layout.
  static std::string MaskTimes(const std::string& text, bool table) {
    static const std::regex kTime(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
    static const std::regex kAgo(R"(\b(\d+[smhdy])+ ago\b)");
    static const std::regex kIn(R"(\bin (\d+[smhdy])+\b)");
    static const std::regex kAge(R"((^|  )(\d+[smhdy])+(?=  |$))");
    std::string out = std::regex_replace(text, kTime, "<time>");
    out = std::regex_replace(out, kAgo, "<ago>");
    out = std::regex_replace(out, kIn, "<in>");
    std::string masked, line;
    std::istringstream lines(out);
    std::vector<std::vector<std::string>> rows;
    while (std::getline(lines, line)) {
      line = std::regex_replace(line, kAge, "$1<age>");
      if (!table) {
        masked += line + "\n";
        continue;
      }
      // Cells are separated by two or more spaces (client_table.h).
      std::vector<std::string> cells;
      static const std::regex kGap("  +");
      std::sregex_token_iterator it(line.begin(), line.end(), kGap, -1), end;
      for (; it != end; ++it) cells.push_back(*it);
      rows.push_back(cells);
    }
    std::vector<size_t> width;
    for (const auto& r : rows) {
      width.resize(std::max(width.size(), r.size()));
      for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    }
    for (const auto& r : rows) {
      std::string l;
      for (size_t i = 0; i < r.size(); ++i) {
        l += r[i];
        if (i + 1 < r.size()) l += std::string(width[i] - r[i].size() + 2, ' ');
      }
      masked += l + "\n";
    }
    return masked;
  }

  void ExpectGolden(const std::string& name, const std::string& raw, bool table = true) {
    const std::string actual = MaskTimes(raw, table);
    const std::string path = SourceDir() + "/tests/cli/golden/" + name + ".txt";
    if (std::getenv("TIDAL_UPDATE_GOLDEN")) std::ofstream(path) << actual;
    EXPECT_EQ(actual, Read(path)) << "golden " << path << " (TIDAL_UPDATE_GOLDEN=1 to rewrite)";
  }

  // Waits until every workload went through a scheduling pass.
  void WaitForPass() {
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      const nlohmann::json list = server_->Get("/v1/workloads", kAdminToken).json();
      for (const auto& w : list["workloads"]) {
        all = all && (w["state"] != "pending" || !w["wait"].is_null());
      }
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::unique_ptr<ServerProcess> server_;
  std::string home_;
  std::string extra_env_;  // "K=V " pairs for the next runs
};

TEST_F(CliTest, SubmitListExplainQueuesMatchGolden) {
  CliRun submit = Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml");
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  ExpectGolden("submit", submit.out);
  WaitForPass();
  ExpectGolden("list", Tidal("list").out);
  ExpectGolden("list_debug", Tidal("list --kind debug").out);
  ExpectGolden("explain_awaiting", Tidal("explain 1").out, /*table=*/false);
  ExpectGolden("queues", Tidal("queues").out);
  CliRun approve = Tidal("approve 1", kAdminToken);
  EXPECT_EQ(approve.exit_code, 0) << approve.err;
  ExpectGolden("approve", approve.out);
  CliRun cancel = Tidal("cancel 3");
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  ExpectGolden("cancel", cancel.out);
}

TEST_F(CliTest, CordonAndUncordonANode) {
  CliRun cordon = Tidal("cordon trn-rack-a-1", kAdminToken);
  ASSERT_EQ(cordon.exit_code, 0) << cordon.err;
  EXPECT_EQ(cordon.out, "node trn-rack-a-1 cordoned\n");
  CliRun shown = Tidal("nodes -o json");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const nlohmann::json nodes = nlohmann::json::parse(shown.out);
  for (const auto& n : nodes["nodes"]) {
    EXPECT_EQ(n["cordoned"].get<bool>(), n["name"] == "trn-rack-a-1") << n["name"];
  }
  CliRun uncordon = Tidal("uncordon trn-rack-a-1", kAdminToken);
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.err;
  EXPECT_EQ(uncordon.out, "node trn-rack-a-1 uncordoned\n");
  // A user may not; a name that could not be a node's is a usage error,
  // refused before it reaches a URL.
  CliRun denied = Tidal("cordon trn-rack-a-1");
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_EQ(denied.err, "tidal: error: role user may not call this endpoint (needs admin) (HTTP 403)\n");
  CliRun odd = Tidal("cordon '../workloads?x=1'", kAdminToken);
  EXPECT_EQ(odd.exit_code, 2) << odd.err;
  EXPECT_NE(odd.err.find("node"), std::string::npos) << odd.err;
}

TEST_F(CliTest, JsonOutputIsTheApiObject) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  CliRun get = Tidal("get 2 -o json");
  ASSERT_EQ(get.exit_code, 0) << get.err;
  auto j = nlohmann::json::parse(get.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << get.out;
  EXPECT_EQ(j["name"], "vision-ft");
  EXPECT_EQ(j["priority"]["derivation"].back(), "total 500");
}

TEST_F(CliTest, ErrorsAreOneLineWithNonZeroExit) {
  CliRun missing = Tidal("get 99");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "tidal: error: workload 99 not found (HTTP 404)\n");
  CliRun denied = Tidal("approve 1");
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_EQ(denied.err, "tidal: error: role user may not call this endpoint (needs admin) (HTTP 403)\n");
  CliRun unauth = Tidal("list", "wrong-token");
  EXPECT_EQ(unauth.exit_code, 1);
  EXPECT_EQ(unauth.err, "tidal: error: unknown token (HTTP 401)\n");
  std::ofstream(server_->dir() + "/bad.yaml") << "name: x\nproject: vision\nreplicas: -3\n";
  CliRun bad = Tidal("submit -f " + server_->dir() + "/bad.yaml");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "tidal: error: replicas: expected an integer from 1 to 4096, got -3 (HTTP 400)\n");
  CliRun nowhere = Tidal("list --server http://127.0.0.1:1");
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_EQ(std::count(nowhere.err.begin(), nowhere.err.end(), '\n'), 1) << nowhere.err;
}

TEST_F(CliTest, AListIsSubmittedWholeOrNotAtAll) {
  // The third workload is bad: none of the three is submitted, and the
  // error names the item and its field.
  std::ofstream(server_->dir() + "/sweep.yaml")
      << "- {name: lr-1, project: vision, gpus_per_replica: 1}\n"
         "- {name: lr-2, project: vision, gpus_per_replica: 1}\n"
         "- {name: lr-3, project: vision, gpus_per_replica: 1, replicas: -3}\n";
  CliRun bad = Tidal("submit -f " + server_->dir() + "/sweep.yaml");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "tidal: error: workloads[2].replicas: expected an integer from 1 to 4096, got -3 (HTTP 400)\n");
  EXPECT_EQ(server_->Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 0u);
  // Fixed, it goes in one request, with one key for the whole list.
  std::ofstream(server_->dir() + "/sweep.yaml")
      << "- {name: lr-1, project: vision, gpus_per_replica: 1}\n"
         "- {name: lr-2, project: vision, gpus_per_replica: 1}\n"
         "- {name: lr-3, project: vision, gpus_per_replica: 1}\n";
  CliRun ok = Tidal("submit --idempotency-key sweep -o json -f " + server_->dir() + "/sweep.yaml");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  CliRun again = Tidal("submit --idempotency-key sweep -o json -f " + server_->dir() + "/sweep.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const nlohmann::json first = nlohmann::json::parse(ok.out), second = nlohmann::json::parse(again.out);
  ASSERT_EQ(first.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first[i]["name"], "lr-" + std::to_string(i + 1));
    EXPECT_EQ(second[i]["id"], first[i]["id"]);
  }
  EXPECT_EQ(server_->Get("/v1/workloads", kAdminToken).json()["workloads"].size(), 3u);
}

TEST_F(CliTest, GetOnAServiceShowsItsLoadAgainstTarget) {
  // No agent reports load here: the line says so, with the target.
  std::ofstream(server_->dir() + "/chat.yaml")
      << "name: chat\nproject: chat-serving\nkind: inference\ngpus_per_replica: 1\n"
         "target_p99_ms: 500\nreplica_capacity_rps: 10\n";
  CliRun chat = Tidal("submit -f " + server_->dir() + "/chat.yaml", kAdminToken);
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  std::string chat_id;
  const nlohmann::json list = server_->Get("/v1/workloads", kAdminToken).json();
  for (const nlohmann::json& w : list["workloads"]) {
    if (w["name"] == "chat") chat_id = std::to_string(w["id"].get<uint64_t>());
  }
  ASSERT_FALSE(chat_id.empty()) << list.dump();
  CliRun chat_get = Tidal("get " + chat_id, kAdminToken);
  EXPECT_NE(chat_get.out.find("Load:      none reported yet (target P99 500 ms)\n"), std::string::npos) << chat_get.out;
}

TEST_F(CliTest, AddressAndTokenFromFlagsEnvOrConfigFile) {
  // Config file only.
  std::filesystem::create_directories(home_ + "/.config/tidal");
  std::ofstream(home_ + "/.config/tidal/config.yaml")
      << "server: " << server_->url() << "\ntoken: " << kAdsToken << "\n";
  CliRun from_file = Tidal("queues -o json", "", /*use_env=*/false);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  // Flags win over the file: the research token sees research's workloads.
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  CliRun ads = Tidal("list -o json", "", false);
  EXPECT_TRUE(nlohmann::json::parse(ads.out)["workloads"].empty()) << ads.out;
  CliRun flags = Tidal(std::string("list -o json --token ") + kResearchToken, "", false);
  EXPECT_EQ(nlohmann::json::parse(flags.out)["workloads"].size(), 3u) << flags.out << flags.err;
  // The environment wins over the file too.
  CliRun env = Tidal("list -o json", kResearchToken, true);
  EXPECT_EQ(nlohmann::json::parse(env.out)["workloads"].size(), 3u);
}

// `tidal up` and colleagues print the API address with its /v1; the CLI
// takes either that or the bare base URL.
TEST_F(CliTest, ServerUrlMayEndInV1) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  for (const std::string suffix : {"/v1", "/v1/", "/"}) {
    CliRun r = Tidal("list -o json --server " + server_->url() + suffix);
    EXPECT_EQ(r.exit_code, 0) << suffix << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out, nullptr, false)["workloads"].size(), 3u) << suffix << r.out;
  }
}

TEST_F(CliTest, ConnectionErrorsSayWhy) {
  CliRun r = Tidal("list --server http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tidal: error: cannot reach http://127.0.0.1:1: could not connect (connection refused"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TIDAL_SERVER"), std::string::npos) << r.err;
}

// A replicated control plane (issue #13): --server, TIDAL_SERVER and the
// config file take the replicas' URLs, and requests go to the leader (the
// real server here; the other replicas are stubs).
TEST_F(CliTest, FollowsTheLeaderAmongTheServersListed) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  StubReplica follower(StubReplica::NotLeader(server_->url()));
  StubReplica electing(StubReplica::NotLeader(""));
  RefusingPort gone;
  auto workloads = [](const CliRun& r) { return nlohmann::json::parse(r.out, nullptr, false)["workloads"].size(); };
  // The leader a replica names goes before the rest of the list.
  CliRun named = Tidal("list -o json --server " + follower.url() + "," + electing.url() + "," + server_->url());
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(workloads(named), 3u) << named.out;
  EXPECT_EQ(follower.requests().size(), 1u);
  EXPECT_TRUE(electing.requests().empty());
  // A killed leader's address, a replica in an election: the next server.
  extra_env_ = "TIDAL_SERVER=" + gone.url() + "," + electing.url() + "," + server_->url() +
               " TIDAL_TOKEN=" + kResearchToken + " ";
  CliRun next = Tidal("list -o json", "", /*use_env=*/false);
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(workloads(next), 3u) << next.out;
  EXPECT_EQ(electing.requests().size(), 1u);
  // The config file's server too, each URL written as one server may be.
  extra_env_.clear();
  std::filesystem::create_directories(home_ + "/.config/tidal");
  std::ofstream(home_ + "/.config/tidal/config.yaml")
      << "server: " << follower.url() << "/v1, " << server_->url().substr(7) << "/v1/\ntoken: " << kResearchToken
      << "\n";
  CliRun from_file = Tidal("list -o json", "", false);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(workloads(from_file), 3u) << from_file.out;
}

// --stale: a follower that serves reads from its copy answers the CLI's
// reads (docs/operations.md "High availability"); without it, and for
// every write, the CLI still goes to the leader.
TEST_F(CliTest, StaleReadsMayComeFromAFollower) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  const StubReplica::Handler not_leader = StubReplica::NotLeader(server_->url());
  // A follower whose copy holds one workload: it answers only a read that
  // accepts staleness.
  StubReplica follower([&](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" && req.get_header_value(protocol::kConsistencyHeader) == protocol::kConsistencyStale) {
      res.set_header(protocol::kReplicaHeader, "follower");
      res.set_content(R"({"workloads": [{"id": 1, "name": "from-the-copy"}]})", "application/json");
      return;
    }
    not_leader(req, res);
  });
  auto workloads = [](const CliRun& r) { return nlohmann::json::parse(r.out, nullptr, false)["workloads"].size(); };
  const std::string servers = " --server " + follower.url() + "," + server_->url();
  CliRun stale = Tidal("list -o json --stale" + servers);
  EXPECT_EQ(stale.exit_code, 0) << stale.err;
  EXPECT_EQ(workloads(stale), 1u) << stale.out;
  CliRun fresh = Tidal("list -o json" + servers);
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(workloads(fresh), 3u) << fresh.out;
  // A write with --stale still goes to the leader.
  CliRun write = Tidal("submit --stale -f " + SourceDir() + "/tests/cli/workloads.yaml" + servers);
  EXPECT_EQ(write.exit_code, 0) << write.err;
  EXPECT_EQ(workloads(Tidal("list -o json" + servers)), 6u);
}

TEST_F(CliTest, SaysSoWhenNoServerListedLeads) {
  StubReplica electing(StubReplica::NotLeader(""));
  // A replica names a "leader" that is not listed: not followed, so that
  // a confused or hostile replica cannot have the token sent elsewhere.
  StubReplica liar(StubReplica::NotLeader(server_->url()));
  RefusingPort gone;
  CliRun none = Tidal("list --server " + electing.url() + "," + liar.url() + "," + gone.url());
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err.rfind(fmt::format("tidal: error: no leader among {}, {}, {}: {}: not the leader (", electing.url(),
                                       liar.url(), gone.url(), electing.url()),
                           0),
            0u)
      << none.err;
  EXPECT_NE(none.err.find(fmt::format("; it names {}, which is not in the list; {}: could not connect", server_->url(),
                                      gone.url())),
            std::string::npos)
      << none.err;
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
  // One server: its error, as without replicas.
  CliRun one = Tidal("list --server " + liar.url());
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_EQ(one.err, "tidal: error: this replica does not lead (HTTP 503)\n");
}

// A replica whose connection breaks once the request is in may have
// applied it: a submit goes to no other replica unless it has an
// idempotency key. A read is sent again.
TEST_F(CliTest, ARequestThatMayHaveBeenAppliedIsNotSentAgain) {
  StubReplica dying([](const httplib::Request&, httplib::Response& res) {
    res.set_content_provider(100, "application/json", [](size_t, size_t, httplib::DataSink&) { return false; });
  });
  const std::string servers = " --server " + dying.url() + "," + server_->url();
  std::ofstream(server_->dir() + "/one.yaml") << "name: once\nproject: vision\ngpus_per_replica: 1\n";
  auto submitted = [&] { return server_->Get("/v1/workloads", kAdminToken).json()["workloads"].size(); };
  CliRun unkeyed = Tidal("submit -f " + server_->dir() + "/one.yaml" + servers);
  EXPECT_EQ(unkeyed.exit_code, 1);
  EXPECT_NE(unkeyed.err.find("not sent to another server"), std::string::npos) << unkeyed.err;
  EXPECT_EQ(submitted(), 0u);
  CliRun keyed = Tidal("submit --idempotency-key k1 -f " + server_->dir() + "/one.yaml" + servers);
  EXPECT_EQ(keyed.exit_code, 0) << keyed.err;
  EXPECT_EQ(submitted(), 1u);
  CliRun read = Tidal("list -o json" + servers);
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(dying.requests().size(), 3u);
}

TEST_F(CliTest, UsageErrorsExitTwoAndHelpDocumentsExitCodes) {
  CliRun help = Tidal("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Exit status: 0 ok; 1 "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("2 a usage error"), std::string::npos) << help.out;
  EXPECT_EQ(Tidal("").exit_code, 2);                        // no subcommand
  EXPECT_EQ(Tidal("list --no-such-flag").exit_code, 2);     // CLI11 said 109
  EXPECT_EQ(Tidal("cancel").exit_code, 2);                  // missing id: 106
  EXPECT_EQ(Tidal("list -o xml").exit_code, 2);             // CLI11 said 105
  CliRun id = Tidal("get abc");
  EXPECT_EQ(id.exit_code, 2);
  EXPECT_NE(id.err.find("workload id 'abc': expected a positive integer"), std::string::npos) << id.err;
  CliRun action = Tidal("audit --action bogus");
  EXPECT_EQ(action.exit_code, 2);
  EXPECT_NE(action.err.find("preempt_exit"), std::string::npos) << action.err;  // lists the valid ones
  CliRun csv = Tidal("report --csv -o json");
  EXPECT_EQ(csv.exit_code, 2);
  EXPECT_NE(csv.err.find("--csv and -o json"), std::string::npos) << csv.err;
  CliRun since = Tidal("audit --since yesterday");
  EXPECT_EQ(since.exit_code, 2);
  EXPECT_NE(since.err.find("--since 'yesterday': expected epoch milliseconds, an RFC 3339 time"),
            std::string::npos) << since.err;
}

TEST_F(CliTest, VersionCommand) {
  CliRun v = Tidal("version");
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(v.out.starts_with("tidal 0.1.0\n")) << v.out;
  EXPECT_NE(v.out.find("  build:     "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("  compiler:  "), std::string::npos) << v.out;
  // The suite's build is sanitized: the sanitizers' allocator, not jemalloc.
  EXPECT_NE(v.out.find("  allocator: sanitizer\n"), std::string::npos) << v.out;
}

TEST_F(CliTest, GetVerbsAndOutputFormats) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  CliRun all = Tidal("get workloads -o json");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out, nullptr, false)["workloads"].size(), 3u) << all.out;
  CliRun debug = Tidal("get workloads --kind debug -o json");
  EXPECT_EQ(nlohmann::json::parse(debug.out, nullptr, false)["workloads"].size(), 1u) << debug.out;
  CliRun one = Tidal("get workload 2 -o json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out, nullptr, false)["name"], "vision-ft") << one.out;
  CliRun yaml = Tidal("get 2 -o yaml");
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_NE(yaml.out.find("name: vision-ft\n"), std::string::npos) << yaml.out;
  EXPECT_NE(yaml.out.find("- total 500\n"), std::string::npos) << yaml.out;  // the derivation, a list
  EXPECT_EQ(Tidal("get workload").exit_code, 2);
  WaitForPass();
  CliRun wide = Tidal("list -o wide");
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  const std::string header = wide.out.substr(0, wide.out.find('\n'));
  EXPECT_TRUE(std::regex_search(header, std::regex("REASON +NODES +SUBMITTED-BY +DETAIL$"))) << header;
  // The same table; a second may pass between the two calls.
  EXPECT_EQ(MaskTimes(Tidal("get workloads").out, true), MaskTimes(Tidal("list").out, true));
}

// `tidal loans`: the summary, a row per loan window and per node timeline;
// -o json is the API's calendar; a bad flag is a usage error.
TEST_F(CliTest, LoansShowsTheCalendar) {
  CliRun human = Tidal("loans --hours 2");
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_TRUE(human.out.starts_with("Loan calendar from ")) << human.out;
  EXPECT_NE(human.out.find(" 4 slots of 30m, predictive mode"), std::string::npos) << human.out;
  EXPECT_TRUE(std::regex_search(human.out, std::regex(R"(\nshr-\S+ +now +- )"))) << human.out;
  EXPECT_TRUE(std::regex_search(human.out, std::regex(R"(\nshr-\S+ +LLLL\n)"))) << human.out;
  CliRun j = Tidal("loans --hours 3 --slot 60 -o json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out, nullptr, false)["slots"], 3) << j.out;
  EXPECT_EQ(Tidal("loans --hours 0").exit_code, 2);
  EXPECT_EQ(Tidal("loans --slot 1").exit_code, 2);
}

// No epoch numbers in human output: instants are RFC 3339 with "ago", ages
// are kubectl-style, and a running workload shows when it started.
TEST_F(CliTest, HumanOutputShowsTimesNotEpochNumbers) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  WaitForPass();
  const std::regex epoch(R"(\d{10,})");
  CliRun list = Tidal("list");
  EXPECT_NE(list.out.find("PRIORITY  AGE  START"), std::string::npos) << list.out;
  // notebook (3) runs: its START is relative, e.g. "0s ago".
  EXPECT_TRUE(std::regex_search(list.out, std::regex(R"(\n3 .* \d+s +\d+s ago +-\n)"))) << list.out;
  CliRun get = Tidal("get 3");
  EXPECT_TRUE(std::regex_search(get.out, std::regex(R"(Submitted: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+s ago\) by )")))
      << get.out;
  EXPECT_NE(get.out.find("Started:   "), std::string::npos) << get.out;
  CliRun explain = Tidal("explain 3");
  EXPECT_EQ(explain.out.find("Estimated start"), std::string::npos) << explain.out;
  EXPECT_TRUE(std::regex_search(explain.out, std::regex(R"(Started:  \S+Z \(\d+s ago\))"))) << explain.out;
  EXPECT_TRUE(std::regex_search(explain.out, std::regex(R"(running on 1 GPUs since \S+Z \(\d+s ago\))")))
      << explain.out;
  for (const CliRun* r : {&list, &get, &explain}) {
    EXPECT_FALSE(std::regex_search(r->out, epoch)) << r->out;
  }
  CliRun audit = Tidal("audit", kAdminToken);
  EXPECT_FALSE(std::regex_search(audit.out, epoch)) << audit.out;
}

TEST_F(CliTest, TimeFlagsTakeDurationsAndRfc3339) {
  ASSERT_EQ(Tidal("submit -f " + SourceDir() + "/tests/cli/workloads.yaml").exit_code, 0);
  // The first pass audits placements: counted before it, the total could
  // grow between two queries.
  WaitForPass();
  auto rows = [&](const std::string& flags) {
    CliRun r = Tidal("audit -o json " + flags, kAdminToken);
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.err;
    return nlohmann::json::parse(r.out, nullptr, false)["audit"].size();
  };
  const size_t total = rows("");
  ASSERT_GT(total, 0u);
  EXPECT_EQ(rows("--since 1h"), total);
  EXPECT_EQ(rows("--since 2000-01-01T00:00:00Z"), total);
  EXPECT_EQ(rows("--from_ms 946684800000"), total);  // 2000-01-01, the old alias
  EXPECT_EQ(rows("--until 2000-01-01T02:00:00+02:00"), 0u);
  EXPECT_EQ(Tidal("report --since 2h -o json", kAdminToken).exit_code, 0);
}

TEST_F(CliTest, DryRunNamesTheBlockerAndExitsThreeWhenItCanNeverStart) {
  std::ofstream(server_->dir() + "/tpu.yaml")
      << "name: tpu-job\nproject: vision\ngpus_per_replica: 1\ngpu_models: {required: [TPU-v5]}\n";
  CliRun refused = Tidal("submit -f " + server_->dir() + "/tpu.yaml");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("gpu_models.required: no node has TPU-v5"), std::string::npos) << refused.err;
  CliRun never = Tidal("dry-run -f " + server_->dir() + "/tpu.yaml");
  EXPECT_EQ(never.exit_code, 3) << never.out << never.err;
  EXPECT_NE(never.out.find("NAME     VERDICT"), std::string::npos) << never.out;
  EXPECT_NE(never.out.find("tpu-job  never"), std::string::npos) << never.out;
  EXPECT_NE(never.out.find("rejected: "), std::string::npos) << never.out;
  std::ofstream(server_->dir() + "/small.yaml") << "name: small\nproject: vision\ngpus_per_replica: 1\n";
  CliRun starts = Tidal("dry-run -f " + server_->dir() + "/small.yaml");
  EXPECT_EQ(starts.exit_code, 0) << starts.err;
  EXPECT_NE(starts.out.find("small  starts now"), std::string::npos) << starts.out;
}

// `tidal logs` prints what the node uploaded; `-f` prints what comes later
// and ends once the workload has ended. The node's side is played here with
// the protocol codec, as an agent would.
TEST_F(CliTest, LogsPrintsAndFollowsWhatTheNodeUploaded) {
  nlohmann::json reg = {{"name", "gpu-logs"}, {"pool", "training"}, {"gpu_model", "A100-80GB"},
                        {"gpu_memory_gib", 80}, {"gpus", nlohmann::json::array({nlohmann::json{{"index", 0}}})},
                        {"labels", {{"host", "gpu-logs"}}}};
  HttpReply r = server_->PostJson("/v1/agent/register", kAdminToken, reg);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string node_token = r.json()["credential"];
  std::ofstream(server_->dir() + "/logged.yaml")
      << "name: logged\nproject: vision\ngpus_per_replica: 1\nnode_selector: {host: gpu-logs}\ncommand: [/bin/true]\n";
  ASSERT_EQ(Tidal("submit -f " + server_->dir() + "/logged.yaml").exit_code, 0);
  const std::string id = "1";
  for (int i = 0; i < 300 && server_->Get("/v1/workloads/1", kAdminToken).json()["state"] != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto upload = [&](const std::string& data) {
    protocol::PodLogBatch b{{{{1, 0, 0}, data}}};
    HttpReply u = server_->PostJson("/v1/agent/nodes/gpu-logs/pods/logs", node_token, protocol::PodLogBatchToJson(b));
    ASSERT_EQ(u.status, 200) << u.body;
    ASSERT_EQ(u.json()["accepted"], 1) << u.body;
  };
  upload("step 1\n");
  CliRun once = Tidal("logs " + id);
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_EQ(once.out, "step 1\n");
  EXPECT_EQ(Tidal("logs " + id, kAdsToken).exit_code, 1);  // another tenant's workload
  EXPECT_EQ(Tidal("logs " + id + " --rank -1").exit_code, 2);

  // -f: the first line, then what is uploaded while it follows, then the end.
  const std::string cmd = "env -u TIDAL_CONFIG HOME=" + home_ + " TIDAL_SERVER=" + server_->url() +
                          " TIDAL_TOKEN=" + kResearchToken + " " + server_->tidal_binary() + " logs " + id +
                          " -f --poll-interval-ms 20";
  FILE* follow = ::popen(cmd.c_str(), "r");
  ASSERT_NE(follow, nullptr);
  char line[256];
  ASSERT_NE(std::fgets(line, sizeof(line), follow), nullptr);
  EXPECT_STREQ(line, "step 1\n");
  upload("step 2\n");
  ASSERT_NE(std::fgets(line, sizeof(line), follow), nullptr);  // blocks until -f printed it
  EXPECT_STREQ(line, "step 2\n");
  upload("done\n");
  HttpReply st = server_->PostJson(
      "/v1/agent/nodes/gpu-logs/pods/status", node_token,
      nlohmann::json{{"events", nlohmann::json::array({nlohmann::json{{"workload", 1}, {"rank", 0}, {"phase", "exited"}, {"exit_code", 0}}})}});
  ASSERT_EQ(st.status, 200) << st.body;
  std::string rest;
  while (std::fgets(line, sizeof(line), follow)) rest += line;  // EOF: -f ended by itself
  EXPECT_EQ(rest, "done\n");
  const int status = ::pclose(follow);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// -w prints again when the answer changes and --watch-count ends it; the
// test reads the output as it comes (a pipe), so it waits on the output, not
// on time.
TEST_F(CliTest, WatchPrintsAgainWhenTheAnswerChanges) {
  auto start = [&](const std::string& args) {
    const std::string cmd = "env -u TIDAL_CONFIG HOME=" + home_ + " TIDAL_SERVER=" + server_->url() +
                            " TIDAL_TOKEN=" + kResearchToken + " " + server_->tidal_binary() + " " + args;
    return ::popen(cmd.c_str(), "r");
  };
  auto read_until = [](FILE* in, const std::string& needle) {
    std::string got;
    char line[512];
    while (got.find(needle) == std::string::npos && std::fgets(line, sizeof(line), in)) got += line;
    return got;
  };
  for (const std::string args : {"list -w --watch-count 2 --watch-interval-ms 20",
                                 "get workloads -w --watch-count 2 --watch-interval-ms 20 --project vision",
                                 "audit -w --watch-count 2 --watch-interval-ms 20 --action admit"}) {
    // Nothing changes on its own while it watches: every workload so far runs.
    nlohmann::json before;
    for (int i = 0; i < 300; ++i) {
      before = server_->Get("/v1/workloads", kAdminToken).json();
      bool all_running = true;
      for (const auto& w : before["workloads"]) all_running = all_running && w["state"] == "running";
      if (all_running) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FILE* watch = start(args);
    ASSERT_NE(watch, nullptr);
    // The first print: the header (the workloads so far).
    const std::string first = read_until(watch, "\n");
    EXPECT_TRUE(first.starts_with("ID ") || first.starts_with("SEQ ")) << args << ": " << first;
    const std::string name = "watched-" + std::to_string(before["workloads"].size());
    std::ofstream(server_->dir() + "/w.yaml") << "name: " << name << "\nproject: vision\ngpus_per_replica: 1\n";
    ASSERT_EQ(Tidal("submit -f " + server_->dir() + "/w.yaml").exit_code, 0);
    const std::string rest = read_until(watch, "\x01");  // to EOF: the second print ends it
    if (args.starts_with("audit")) {
      // One admit row per workload: k in the first print, k + 1 in the second.
      const std::string all = first + rest;
      size_t admits = 0;
      for (size_t at = all.find(" admit "); at != std::string::npos; at = all.find(" admit ", at + 1)) ++admits;
      EXPECT_EQ(admits, 2 * before["workloads"].size() + 1) << all;
    } else {
      EXPECT_NE(rest.find(name), std::string::npos) << args << ": " << rest;
    }
    const int status = ::pclose(watch);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << args;
  }
  // events ID: one workload's rows.
  CliRun events = Tidal("events 1");
  EXPECT_EQ(events.exit_code, 0) << events.err;
  EXPECT_NE(events.out.find("admit"), std::string::npos) << events.out;
  // Rows without a reason say what their action records.
  EXPECT_TRUE(std::regex_search(events.out, std::regex(R"( admit +1 .* \d+ GPUs, queue \S+\n)"))) << events.out;
  EXPECT_TRUE(std::regex_search(events.out, std::regex(R"( priority +1 .* \d+\n)"))) << events.out;
  EXPECT_TRUE(std::regex_search(events.out, std::regex(R"( place +1 .* on \S+ after \d+\.\d s waiting\n)")))
      << events.out;
  EXPECT_EQ(Tidal("events x").exit_code, 2);
}

// The bash script offers every subcommand `tidal --help` lists (it is
// generated from the same app tree), parses, and completes.
TEST(CliCompletionTest, BashScriptHasEverySubcommandParsesAndCompletes) {
  const char* bin_dir = std::getenv("TIDAL_BINARY_DIR");
  const std::string tidal = std::string(bin_dir ? bin_dir : ".") + "/tidal";
  const std::string dir = std::filesystem::temp_directory_path() / ("tidal_completion_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto run = [&](const std::string& cmd) {
    const int status = std::system((cmd + " > " + dir + "/out 2>&1").c_str());
    std::ifstream in(dir + "/out");
    std::stringstream ss;
    ss << in.rdbuf();
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str());
  };
  auto [rc, script] = run(tidal + " completion bash");
  ASSERT_EQ(rc, 0) << script;
  std::ofstream(dir + "/tidal.bash") << script;
  auto [help_rc, help] = run(tidal + " --help");
  ASSERT_EQ(help_rc, 0);
  // CLI11's help: "SUBCOMMANDS:" (or "Subcommands:"), then "  name  description".
  std::istringstream lines(help);
  std::vector<std::string> subcommands;
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "SUBCOMMANDS:" || line == "Subcommands:") {
      in_list = true;
    } else if (in_list && line.starts_with("  ") && line.size() > 2 && line[2] != ' ') {
      subcommands.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list && !line.empty() && !line.starts_with(" ")) {
      in_list = false;
    }
  }
  ASSERT_GT(subcommands.size(), 10u) << help;
  for (const std::string& sub : subcommands) {
    EXPECT_NE(script.find("\"/" + sub + "\")"), std::string::npos) << sub << " missing from\n" << script;
  }
  EXPECT_EQ(run("bash -n " + dir + "/tidal.bash").first, 0);
  // Completing `tidal log<TAB>`, `tidal logs 1 --r<TAB>` and `tidal sim re<TAB>`.
  auto complete = [&](const std::string& words, int cword) {
    return run("bash -c 'source " + dir + "/tidal.bash; COMP_WORDS=(" + words + "); COMP_CWORD=" +
               std::to_string(cword) + "; _tidal; echo \"${COMPREPLY[*]}\"'").second;
  };
  EXPECT_EQ(complete("tidal lo", 1), "loans logs\n");
  EXPECT_EQ(complete("tidal log", 1), "logs\n");
  EXPECT_EQ(complete("tidal logs 1 --ra", 3), "--rank\n");
  EXPECT_EQ(complete("tidal sim repl", 2), "replay\n");
  auto [zsh_rc, zsh] = run(tidal + " completion zsh");
  EXPECT_EQ(zsh_rc, 0);
  EXPECT_NE(zsh.find("bashcompinit"), std::string::npos);
  EXPECT_EQ(run(tidal + " completion fish").first, 2);
  std::filesystem::remove_all(dir);
}

TEST_F(CliTest, ConfigFileContextsAndUnknownKeys) {
  const std::string path = server_->dir() + "/cli-config.yaml";
  std::ofstream(path) << "server: http://127.0.0.1:1\ntoken: nope\ncurrent_context: local\n"
                      << "contexts:\n  local: {server: " << server_->url() << "/v1, token: " << kAdsToken << "}\n";
  extra_env_ = "TIDAL_CONFIG=" + path + " ";
  CliRun ok = Tidal("queues -o json", "", /*use_env=*/false);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  std::ofstream(path) << "server: " << server_->url() << "\ntoken: " << kAdsToken << "\ntokn: typo\n";
  CliRun bad = Tidal("queues", "", false);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown key 'tokn'"), std::string::npos) << bad.err;
  std::ofstream(path) << "contexts:\n  a: {server: x, tokn: y}\n";
  CliRun nested = Tidal("queues", "", false);
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_NE(nested.err.find("contexts.a: unknown key 'tokn'"), std::string::npos) << nested.err;
}

}  // namespace
}  // namespace tidal::testing
