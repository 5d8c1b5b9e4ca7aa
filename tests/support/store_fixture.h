// The fixture of the store tests: a control plane in process, on a manual
// clock, over a real SQLite store in a fresh scratch dir, reopened at will
// (a restart) and optionally through a FaultyStore. Header-only, like
// faulty_store.h, so tidal_testing needs no server dependency.
#ifndef TIDAL_TESTS_SUPPORT_STORE_FIXTURE_H_
#define TIDAL_TESTS_SUPPORT_STORE_FIXTURE_H_

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "core/common/status.h"
#include "core/common/time.h"
#include "server/control_plane.h"
#include "server/server_config.h"
#include "server/store.h"
#include "tests/support/faulty_store.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::testing {

class StoreFixture : public ::testing::Test {
 protected:
  // `extra_config`: server config lines after the cluster, policy and store
  // (tests/server/testdata's cluster and policy, the store in the dir).
  explicit StoreFixture(std::string extra_config = "") : extra_config_(std::move(extra_config)) {}

  void SetUp() override {
    dir_ = MakeScratchDir("store");
    auto config = server::ParseServerConfig("cluster_file: cluster.yaml\npolicy_file: policy.yaml\nstore: sqlite:" +
                                                db_path() + "\n" + extra_config_,
                                            "test.yaml", SourceDir() + "/tests/server/testdata");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    clock_.Set(TimeFromMillis(1'764'000'000'000));
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string db_path() const { return dir_ + "/tidal.db"; }

  // (Re)opens the control plane on the file, closing the one before (a
  // restart); returns Recover's status. With `faulty`, through a FaultyStore
  // (faulty_ points at it) that, when `fail_snapshot` is set, fails every
  // snapshot write with that message from the start (before Recover).
  Status Open(bool faulty = false, const std::string& fail_snapshot = "") {
    cp_.reset();
    faulty_ = nullptr;
    auto store = server::OpenStore(config_.store);
    if (!store.ok()) return store.status();
    std::unique_ptr<server::Store> s = std::move(store).value();
    if (faulty) {
      auto f = std::make_unique<FaultyStore>(std::move(s));
      faulty_ = f.get();
      if (!fail_snapshot.empty()) f->FailSnapshotWrite(fail_snapshot);
      s = std::move(f);
    }
    cp_ = std::make_unique<server::ControlPlane>(config_, std::move(s), clock_);
    return cp_->Recover();
  }

  std::string dir_;
  server::ServerConfig config_;
  ManualClock clock_;
  std::unique_ptr<server::ControlPlane> cp_;
  FaultyStore* faulty_ = nullptr;

 private:
  std::string extra_config_;
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_STORE_FIXTURE_H_
