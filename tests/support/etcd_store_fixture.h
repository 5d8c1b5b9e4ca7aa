// A test suite against one real 3-member etcd (etcd_cluster.h), started
// once for the suite; each test gets a key prefix of its own, so it starts
// on an empty store. Where etcd is not installed the tests skip, or fail
// under TIDAL_REQUIRE_ETCD=1. Header-only: only the test binaries that link
// the server include it.
#ifndef TIDAL_TESTS_SUPPORT_ETCD_STORE_FIXTURE_H_
#define TIDAL_TESTS_SUPPORT_ETCD_STORE_FIXTURE_H_

#include <gtest/gtest.h>

#include <string>

#include "server/etcd_store.h"
#include "tests/support/etcd_cluster.h"

namespace tidal::testing {

class EtcdStoreFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new EtcdCluster(3); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  // A subclass's SetUp calls this first, then returns if IsSkipped() or
  // HasFatalFailure().
  void SetUp() override {
    TIDAL_REQUIRE_ETCD_CLUSTER(*cluster_);
    static int tests = 0;
    url_.endpoints = cluster_->endpoints();
    url_.prefix = "/test" + std::to_string(++tests);
  }

  static inline EtcdCluster* cluster_ = nullptr;
  server::EtcdStoreUrl url_;
};

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_ETCD_STORE_FIXTURE_H_
