// TLS end to end: a throwaway CA and server certificate made here with the
// openssl CLI, the real server serving https:// only, a real agent and the
// CLI verifying it against the CA, and the clients that must be refused (plain
// HTTP, another CA, no CA) refused.
#include <httplib.h>
#include <sys/wait.h>

#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

// Runs `command` through sh; returns the exit status, its output in `out`.
int Sh(const std::string& command, std::string& out, const fs::path& dir) {
  const fs::path log = dir / "sh.out";
  const int rc = std::system(fmt::format("{} >'{}' 2>&1", command, log.string()).c_str());
  out = ReadText(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class TlsE2eTest : public E2eTest {
 protected:
  void SetUp() override {
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl CLI";
    certs_ = fs::temp_directory_path() / fmt::format("tidal_tls_{}_{}",
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
    fs::remove_all(certs_);
    fs::create_directories(certs_);
    // P-256 keys: generated in milliseconds. The server certificate names
    // the address the clients dial (IP SAN 127.0.0.1), as hostname checks
    // require.
    const std::string d = certs_.string();
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(certs_ / "san.cnf") << "subjectAltName=IP:127.0.0.1\n";
    for (const std::string& cmd : {
             fmt::format("openssl req -x509 {0} -keyout {1}/ca.key -out {1}/ca.pem -days 2 -subj /CN=tidal-test-ca", ec, d),
             fmt::format("openssl req -x509 {0} -keyout {1}/other-ca.key -out {1}/other-ca.pem -days 2 -subj /CN=other-ca", ec, d),
             fmt::format("openssl req {0} -keyout {1}/server.key -out {1}/server.csr -subj /CN=127.0.0.1", ec, d),
             fmt::format("openssl x509 -req -in {0}/server.csr -CA {0}/ca.pem -CAkey {0}/ca.key -CAcreateserial "
                         "-out {0}/server.pem -days 2 -extfile {0}/san.cnf", d)}) {
      std::string out;
      ASSERT_EQ(Sh(cmd, out, certs_), 0) << cmd << "\n" << out;
    }
  }
  void TearDown() override {
    E2eTest::TearDown();
    if (!HasFailure() && !certs_.empty()) fs::remove_all(certs_);
  }
  std::string Cert(const std::string& name) const { return (certs_ / name).string(); }

  fs::path certs_;
};

std::string Quote(const std::string& s) { return "'" + s + "'"; }

TEST_F(TlsE2eTest, AgentAndCliVerifyTheServerAndEveryOtherClientIsRefused) {
  StartCluster(Nodes({"training"}, 2), [&](agent::LocalClusterOptions& o) {
    o.tls_cert_file = Cert("server.pem");
    o.tls_key_file = Cert("server.key");
    o.ca_file = Cert("ca.pem");
  });
  ASSERT_TRUE(cluster_->url().starts_with("https://")) << cluster_->url();
  // The agent registered over TLS (StartCluster waits for it) and runs a
  // workload to the end: heartbeats and pod status went over TLS too.
  const uint64_t id = Submit({{"name", "tls-job"}, {"kind", "training"}, {"project", "llm"},
                              {"gpus_per_replica", 1}, {"replicas", 1},
                              {"command", {Examples() + "/trainer", "--steps", "5", "--step-ms", "20"}}});
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(WaitFor([&] { return State(id) == "succeeded"; }, 30)) << Workload(id).dump();

  const std::string tidal = Quote(bin_dir_ + "/tidal");
  const std::string common = fmt::format("--server {} --token {}", cluster_->url(), cluster_->admin_token());
  std::string out;
  // The CLI with the CA: the job is listed.
  EXPECT_EQ(Sh(fmt::format("{} list {} --ca-file {}", tidal, common, Quote(Cert("ca.pem"))), out, certs_), 0)
      << out;
  EXPECT_NE(out.find("tls-job"), std::string::npos) << out;
  // ...and with the CA from the CLI config file's ca_file key.
  std::ofstream(certs_ / "cli.yaml") << "ca_file: " << Cert("ca.pem") << "\n";
  EXPECT_EQ(Sh(fmt::format("TIDAL_CONFIG={} {} list {}", Quote(Cert("cli.yaml")), tidal, common), out, certs_), 0)
      << out;
  // Another CA, or none (the system's CAs do not know ours): refused before
  // the token is sent, with a message that says what to fix.
  EXPECT_NE(Sh(fmt::format("{} list {} --ca-file {}", tidal, common, Quote(Cert("other-ca.pem"))), out, certs_), 0);
  EXPECT_NE(out.find("does not chain to the CA"), std::string::npos) << out;
  EXPECT_NE(Sh(fmt::format("TIDAL_CONFIG=/nonexistent {} list {}", tidal, common), out, certs_), 0);
  EXPECT_NE(out.find("does not chain to the CA"), std::string::npos) << out;
  // An unreadable CA file is named.
  EXPECT_NE(Sh(fmt::format("{} list {} --ca-file /nonexistent/ca.pem", tidal, common), out, certs_), 0);
  EXPECT_NE(out.find("--ca-file '/nonexistent/ca.pem': cannot read it"), std::string::npos) << out;

  // Plain HTTP to the TLS port gets no HTTP reply at all (the server only
  // speaks TLS), so a token sent in the clear is never answered or used.
  const std::string plain_url = "http://" + cluster_->url().substr(8);
  httplib::Client plain(plain_url);
  plain.set_connection_timeout(5, 0);
  plain.set_read_timeout(5, 0);
  auto res = plain.Get("/v1/workloads", {{"Authorization", "Bearer " + cluster_->admin_token()}});
  EXPECT_FALSE(res) << "HTTP " << res->status << " " << res->body;
  EXPECT_NE(Sh(fmt::format("{} list --server {} --token {}", tidal, plain_url, cluster_->admin_token()), out,
               certs_), 0);

  // A client that checks with another CA, through the library directly.
  httplib::Client wrong(cluster_->url());
  wrong.set_ca_cert_path(Cert("other-ca.pem").c_str());
  wrong.enable_server_certificate_verification(true);
  auto refused = wrong.Get("/readyz");
  EXPECT_FALSE(refused);
  if (!refused) {
    EXPECT_EQ(refused.error(), httplib::Error::SSLServerVerification);
  }
}

TEST_F(TlsE2eTest, ServerRefusesToStartWithUnreadableOrMismatchedFiles) {
  std::string why;
  const std::string bin = BuiltBinaryDir(why);
  if (bin.empty()) GTEST_SKIP() << why;
  const std::string tidal = Quote(bin + "/tidal");
  const std::string base = fmt::format("{} server --listen 127.0.0.1:0 --store sqlite:{}/s.db", tidal, certs_.string());
  std::string out;
  // The CA's key is not the server certificate's.
  EXPECT_EQ(Sh(fmt::format("{} --tls-cert {} --tls-key {}", base, Cert("server.pem"), Cert("ca.key")), out, certs_), 2);
  EXPECT_NE(out.find("tls_key_file: '" + Cert("ca.key") + "' is not the key of the certificate in '" +
                     Cert("server.pem") + "'"), std::string::npos) << out;
  EXPECT_EQ(Sh(fmt::format("{} --tls-cert /nonexistent.pem --tls-key {}", base, Cert("server.key")), out, certs_), 2);
  EXPECT_NE(out.find("tls_cert_file: cannot read '/nonexistent.pem'"), std::string::npos) << out;
  // A key where the certificate belongs.
  EXPECT_EQ(Sh(fmt::format("{} --tls-cert {} --tls-key {}", base, Cert("server.key"), Cert("server.key")), out, certs_), 2);
  EXPECT_NE(out.find("holds no PEM certificate"), std::string::npos) << out;
  // One without the other, in the config file.
  std::ofstream(certs_ / "half.yaml") << "tls_cert_file: " << Cert("server.pem") << "\n";
  EXPECT_EQ(Sh(fmt::format("{} --config {}", base, Cert("half.yaml")), out, certs_), 2);
  EXPECT_NE(out.find("tls_key_file"), std::string::npos) << out;
}

}  // namespace
}  // namespace tidal::e2e
