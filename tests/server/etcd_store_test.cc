// The etcd store against a real 3-member etcd (tests/support/etcd_cluster.h):
// what the leader writes, another replica reads; a deposed leader writes
// nothing; batches larger than one etcd request and base images round-trip;
// losing one member changes nothing and losing quorum pauses writes until it
// returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/etcd_store.h"
#include "server/leader_election.h"
#include "server/mutation_codec.h"
#include "tests/support/etcd_store_fixture.h"

namespace tidal::server {
namespace {


Mutation Workload(uint64_t id, const std::string& record, int64_t audit_seq) {
  Mutation m;
  m.workloads.emplace_back(id, record);
  m.audit.push_back({audit_seq, 1000 + audit_seq, "alice", "admit", id, "research", "p", "{\"n\":1}"});
  m.journal.push_back("{\"record\":\"edit\",\"n\":" + std::to_string(audit_seq) + "}");
  return m;
}

class EtcdStoreTest : public testing::EtcdStoreFixture {
 protected:
  std::unique_ptr<EtcdStore> OpenStore() {
    auto s = EtcdStore::Open(url_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<LeaderElection> Election(const std::string& me) {
    auto client = EtcdClient::Create(url_.endpoints, std::chrono::milliseconds(1000));
    EXPECT_TRUE(client.ok());
    // A long lease: these tests do not renew it (the server does).
    return std::make_unique<LeaderElection>(std::move(client).value(), url_.prefix + "/leader", me,
                                            std::chrono::seconds(60));
  }
  // Elects `me` and makes `store` write under its fence.
  std::unique_ptr<LeaderElection> Lead(EtcdStore& store, const std::string& me) {
    auto election = Election(me);
    auto won = election->TryAcquire();
    EXPECT_TRUE(won.ok() && *won) << (won.ok() ? "lost" : won.status().ToString());
    EXPECT_TRUE(store.StartWriting(election->fence_revision()).ok());
    return election;
  }
};

TEST(MutationCodecTest, RoundTripsEveryField) {
  Mutation m = Workload(7, R"({"id":7,"name":"train"})", 3);
  m.nodes.emplace_back("node-1", R"({"registration":{}})");
  m.idempotency.push_back({"alice\nkey-1", 7});
  m.meta.emplace_back("cluster", "pools: []");
  m.snapshot = "snapshot text";
  m.snapshot_seq = 9;
  m.keep_load_since_ms = 123;
  Mutation empty;
  auto decoded = DecodeMutations(JoinMutations({EncodeMutation(m), EncodeMutation(empty)}));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), 2u);
  const Mutation& d = (*decoded)[0];
  EXPECT_EQ(d.workloads, m.workloads);
  EXPECT_EQ(d.nodes, m.nodes);
  ASSERT_EQ(d.audit.size(), 1u);
  EXPECT_EQ(d.audit[0].seq, 3);
  EXPECT_EQ(d.audit[0].detail_json, m.audit[0].detail_json);
  EXPECT_EQ(d.audit[0].tenant, "research");
  ASSERT_EQ(d.idempotency.size(), 1u);
  EXPECT_EQ(d.idempotency[0].key, "alice\nkey-1");
  EXPECT_EQ(d.journal, m.journal);
  EXPECT_EQ(d.meta, m.meta);
  EXPECT_EQ(d.snapshot, m.snapshot);
  EXPECT_EQ(d.snapshot_seq, 9);
  EXPECT_EQ(d.keep_load_since_ms, 123);
  EXPECT_TRUE((*decoded)[1].empty());
}

TEST(MutationCodecTest, TornEntriesAreErrors) {
  EXPECT_FALSE(DecodeMutations("[{\"workloads\":").ok());
  EXPECT_FALSE(DecodeMutations("{}").ok());
  auto wrong = DecodeMutations(R"([{"workloads": "x"}])");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("workloads"), std::string::npos) << wrong.status().message();
}

TEST(EtcdStoreUrlTest, ParsesAndNamesTheField) {
  auto url = ParseEtcdStoreUrl("etcd://a:2379,b:2379?prefix=/prod");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->endpoints, (std::vector<std::string>{"http://a:2379", "http://b:2379"}));
  EXPECT_EQ(url->prefix, "/prod");
  for (const char* bad : {"etcd://", "etcd://a", "etcd://a:1,", "etcd://a:1?prefix=x", "etcd://a:1?prefix=/",
                          "etcd://a:1?foo=1", "sqlite:x", "etcd://a:1/x"}) {
    auto parsed = ParseEtcdStoreUrl(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--store"), std::string::npos) << parsed.status().message();
  }
}

TEST_F(EtcdStoreTest, WhatTheLeaderWritesAnotherReplicaReads) {
  auto leader = OpenStore();
  auto follower = OpenStore();
  ASSERT_TRUE(leader && follower);
  EXPECT_FALSE(follower->health().ok());  // it does not lead
  auto election = Lead(*leader, "http://a");
  uint64_t last = 0;
  for (int i = 1; i <= 20; ++i) last = leader->Enqueue(Workload(i, "{\"id\":" + std::to_string(i) + "}", i));
  ASSERT_TRUE(leader->WaitDurable(last).ok());
  // A batch per group commit, not per mutation.
  EXPECT_LE(leader->commits(), 20u);
  EXPECT_EQ(leader->committed_mutations(), 20u);

  ASSERT_TRUE(follower->CatchUp().ok());
  auto recovered = follower->Load();
  ASSERT_TRUE(recovered.ok());
  ASSERT_EQ(recovered->workloads.size(), 20u);
  EXPECT_EQ(recovered->workloads[19].second, "{\"id\":20}");
  EXPECT_EQ(recovered->last_audit_seq, 20);
  EXPECT_EQ(recovered->last_journal_seq, 20);
  auto audit = follower->QueryAudit({});
  ASSERT_TRUE(audit.ok());
  EXPECT_EQ(audit->size(), 20u);
  // A replica opened later loads the same.
  auto late = OpenStore();
  ASSERT_TRUE(late);
  EXPECT_EQ(late->Load()->workloads, recovered->workloads);
}

TEST_F(EtcdStoreTest, DeposedLeaderWritesNothing) {
  auto old_store = OpenStore();
  ASSERT_TRUE(old_store);
  auto old_leader = Lead(*old_store, "http://old");
  std::atomic<bool> deposed{false};
  old_store->OnDeposed([&] { deposed = true; });
  ASSERT_TRUE(old_store->WaitDurable(old_store->Enqueue(Workload(1, "{\"by\":\"old\"}", 1))).ok());

  // The old leader's lease runs out (revoked here, as etcd does after the
  // TTL when a leader is cut off) and another replica wins.
  ASSERT_TRUE(old_leader->Resign().ok());
  auto new_store = OpenStore();
  ASSERT_TRUE(new_store);
  auto new_leader = Lead(*new_store, "http://new");
  EXPECT_GT(new_leader->fence_revision(), old_leader->fence_revision());

  // The old leader, unaware, writes: its fence fails, nothing lands.
  Status late = old_store->WaitDurable(old_store->Enqueue(Workload(2, "{\"by\":\"old\"}", 2)));
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition) << late.ToString();
  EXPECT_NE(late.message().find("deposed"), std::string::npos) << late.message();
  EXPECT_TRUE(deposed);
  EXPECT_FALSE(old_store->health().ok());
  ASSERT_TRUE(new_store->WaitDurable(new_store->Enqueue(Workload(3, "{\"by\":\"new\"}", 2))).ok());

  auto reader = OpenStore();
  ASSERT_TRUE(reader);
  auto recovered = reader->Load();
  ASSERT_TRUE(recovered.ok());
  ASSERT_EQ(recovered->workloads.size(), 2u);
  EXPECT_EQ(recovered->workloads[0].first, 1u);
  EXPECT_EQ(recovered->workloads[1].first, 3u);
}

TEST_F(EtcdStoreTest, OnlyOneReplicaWinsAnElection) {
  auto a = Election("http://a");
  auto b = Election("http://b");
  auto a_won = a->TryAcquire();
  auto b_won = b->TryAcquire();
  ASSERT_TRUE(a_won.ok() && b_won.ok());
  EXPECT_TRUE(*a_won);
  EXPECT_FALSE(*b_won);
  EXPECT_EQ(b->leader_url(), "http://a");
  EXPECT_GT(*a->Renew(), 0);
  ASSERT_TRUE(a->Resign().ok());
  auto b_again = b->TryAcquire();
  ASSERT_TRUE(b_again.ok());
  EXPECT_TRUE(*b_again);
}

TEST_F(EtcdStoreTest, AReplicaThatStillHoldsTheKeyLeadsAgainUnderTheSameFence) {
  // A leader that stepped down while etcd had no leader of its own looks
  // again: its lease lived through, so it leads again at once, same fence,
  // and the other replica still follows.
  auto a = Election("http://a");
  auto b = Election("http://b");
  ASSERT_TRUE(a->TryAcquire().value());
  const int64_t fence = a->fence_revision();
  auto again = a->TryAcquire();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(*again);
  EXPECT_EQ(a->fence_revision(), fence);
  EXPECT_FALSE(b->TryAcquire().value());
  // Once its lease is gone the key is anyone's: a later win is a new term.
  ASSERT_TRUE(a->Resign().ok());
  ASSERT_TRUE(b->TryAcquire().value());
  EXPECT_FALSE(a->TryAcquire().value());
  EXPECT_EQ(a->leader_url(), "http://b");
  EXPECT_GT(b->fence_revision(), fence);
}

TEST_F(EtcdStoreTest, LargeBatchesAndBaseImagesRoundTrip) {
  url_.base_every = 5;
  auto leader = OpenStore();
  ASSERT_TRUE(leader);
  auto election = Lead(*leader, "http://a");
  // Larger than one etcd request (1.5 MiB): written in parts.
  const std::string big(2 * 1024 * 1024 + 17, 'x');
  ASSERT_TRUE(leader->WaitDurable(leader->Enqueue(Workload(1, "{\"blob\":\"" + big + "\"}", 1))).ok());
  // Batches until two base images landed (each compacts the batches before
  // it). They go up beside the writes: a batch that comes while one is in
  // flight starts none, so how many batches that takes depends on timing.
  int last = 1;
  while (leader->base_batch() < 10 && last < 500) {
    ++last;
    ASSERT_TRUE(leader->WaitDurable(leader->Enqueue(Workload(last, "{}", last))).ok());
    if (last % 5 == 0) leader->WaitForImage();
  }
  leader->WaitForImage();
  ASSERT_GE(leader->base_batch(), 10) << "no second base image after " << last << " batches";
  auto client = EtcdClient::Create(url_.endpoints, std::chrono::milliseconds(1000));
  auto logs = (*client)->Range(url_.prefix + "/log/", PrefixEnd(url_.prefix + "/log/"));
  ASSERT_TRUE(logs.ok());
  EXPECT_LT(logs->kvs.size(), 5u) << "the base image did not compact the batches it covers";

  auto reader = OpenStore();
  ASSERT_TRUE(reader);
  auto recovered = reader->Load();
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  ASSERT_EQ(recovered->workloads.size(), static_cast<size_t>(last));
  EXPECT_EQ(recovered->workloads[0].second.size(), big.size() + 11);
  EXPECT_EQ(recovered->last_audit_seq, last);
  EXPECT_EQ(reader->applied_batch(), leader->applied_batch());
}

// Last: it kills members of the shared cluster (and starts them again).
TEST_F(EtcdStoreTest, ZLosingOneMemberChangesNothingAndLosingQuorumPausesWrites) {
  auto leader = OpenStore();
  ASSERT_TRUE(leader);
  auto election = Lead(*leader, "http://a");
  cluster_->Kill(0);
  ASSERT_TRUE(leader->WaitDurable(leader->Enqueue(Workload(1, "{}", 1))).ok());
  EXPECT_TRUE(leader->health().ok());

  cluster_->Kill(1);  // 1 of 3 left: no quorum
  const uint64_t seq = leader->Enqueue(Workload(2, "{}", 2));
  Status paused = leader->WaitDurable(seq);
  EXPECT_EQ(paused.code(), StatusCode::kUnavailable) << paused.ToString();
  EXPECT_NE(paused.message().find("etcd"), std::string::npos) << paused.message();
  EXPECT_EQ(leader->health().code(), StatusCode::kUnavailable);

  ASSERT_TRUE(cluster_->Start(1));
  ASSERT_TRUE(cluster_->Start(0));
  // The writer retries the same batch: it lands, and writes go on.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!leader->health().ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polls the condition itself
  }
  ASSERT_TRUE(leader->health().ok()) << leader->health().ToString();
  Status resumed = leader->WaitDurable(leader->Enqueue(Workload(3, "{}", 3)));
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  auto reader = OpenStore();
  ASSERT_TRUE(reader);
  auto ids = reader->Load()->workloads;
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[1].first, 2u);  // the write made during the outage landed, in order
}

}  // namespace
}  // namespace tidal::server
