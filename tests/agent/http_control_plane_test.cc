// The agent follows the leader of a replicated control plane (issue #13):
// given the replicas' URLs, its calls reach the one that leads, whether the
// first it asks names the leader, does not lead, or is gone; a leader named
// outside the list is not followed. The replicas are in-process stubs that
// answer with the protocol codecs.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/control_plane.h"
#include "protocol/heartbeat.h"
#include "protocol/node_registration.h"
#include "protocol/pod_assignment.h"
#include "tests/support/stub_replica.h"

namespace tidal::agent {
namespace {

using nlohmann::json;
using tidal::testing::RefusingPort;
using tidal::testing::StubReplica;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kNode = "gpu-a-1";
constexpr const char* kCredential = "node-credential-1";
constexpr const char* kRegister = "POST /v1/agent/register";
constexpr const char* kHeartbeat = "POST /v1/agent/nodes/gpu-a-1/heartbeat";
constexpr const char* kWatch = "GET /v1/agent/nodes/gpu-a-1/pods";

// The leader: the agent endpoints' replies, made by the protocol codecs.
void Lead(const httplib::Request& req, httplib::Response& res) {
  json reply;
  if (req.path == "/v1/agent/register") {
    reply = protocol::RegistrationReplyToJson({kNode, 40, 4, kCredential});
  } else if (req.path.ends_with("/heartbeat")) {
    reply = protocol::HeartbeatReplyToJson({40, std::vector<protocol::PodAssignment>{}});
  } else if (req.path.ends_with("/pods")) {
    reply = protocol::PodAssignmentListToJson({{}, "v7"});
  } else {
    res.status = 404;
    return;
  }
  res.set_content(reply.dump(), "application/json");
}

json Registration() {
  protocol::NodeRegistration reg;
  reg.name = kNode;
  return protocol::NodeRegistrationToJson(reg);
}

std::unique_ptr<ControlPlane> Connect(const std::string& servers) {
  auto plane = MakeHttpControlPlane(servers, "bootstrap", seconds(2));
  EXPECT_TRUE(plane.ok()) << plane.status().ToString();
  return plane.ok() ? std::move(plane).value() : nullptr;
}

TEST(HttpControlPlaneTest, FollowsTheLeaderAReplicaNames) {
  StubReplica leader(Lead);
  StubReplica follower(StubReplica::NotLeader(leader.url()));
  StubReplica other(StubReplica::NotLeader(leader.url()));
  auto plane = Connect(follower.url() + "," + other.url() + "," + leader.url());
  ASSERT_NE(plane, nullptr);

  auto lease = plane->Register(Registration());
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->lease_s, 40);
  // Later calls go straight to the leader, with the credential it issued.
  auto beat = plane->Heartbeat(kNode, protocol::HeartbeatToJson({}));
  ASSERT_TRUE(beat.ok()) << beat.status().ToString();
  EXPECT_THAT(follower.requests(), ElementsAre(kRegister));
  EXPECT_TRUE(other.requests().empty());  // the hint, not the list's order
  EXPECT_THAT(leader.requests(), ElementsAre(kRegister, kHeartbeat));
  EXPECT_THAT(leader.authorizations(), ElementsAre("Bearer bootstrap", std::string("Bearer ") + kCredential));
}

// The watch has a connection of its own: it follows too.
TEST(HttpControlPlaneTest, ThePodWatchFollowsTheLeader) {
  StubReplica leader(Lead);
  StubReplica follower(StubReplica::NotLeader(leader.url()));
  auto plane = Connect(follower.url() + "," + leader.url());
  ASSERT_NE(plane, nullptr);
  auto pods = plane->WatchPods(kNode, "", milliseconds(100));
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ((*pods)["version"], "v7");
  EXPECT_THAT(follower.requests(), ElementsAre(kWatch));
  EXPECT_THAT(leader.requests(), ElementsAre(kWatch));
  // Moved by the watch's fail-over, the other calls start at the leader.
  ASSERT_TRUE(plane->Register(Registration()).ok());
  EXPECT_THAT(follower.requests(), ElementsAre(kWatch));
}

// A killed leader's address refuses connections; an election's replicas
// name no leader: the agent tries the next replica of its list.
TEST(HttpControlPlaneTest, MovesPastAReplicaThatIsGoneOrKnowsNoLeader) {
  StubReplica leader(Lead);
  StubReplica electing(StubReplica::NotLeader(""));
  RefusingPort gone;
  auto plane = Connect(gone.url() + "," + electing.url() + "," + leader.url());
  ASSERT_NE(plane, nullptr);
  auto lease = plane->Register(Registration());
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_THAT(electing.requests(), ElementsAre(kRegister));
  EXPECT_THAT(leader.requests(), ElementsAre(kRegister));
}

// A confused or hostile replica names a "leader" the operator did not list:
// the agent does not take its token there, and asks its next replica.
TEST(HttpControlPlaneTest, DoesNotFollowALeaderOutsideTheList) {
  StubReplica stranger(Lead);
  StubReplica leader(Lead);
  StubReplica liar(StubReplica::NotLeader(stranger.url()));
  auto plane = Connect(liar.url() + "," + leader.url());
  ASSERT_NE(plane, nullptr);
  ASSERT_TRUE(plane->Register(Registration()).ok());
  EXPECT_THAT(leader.requests(), ElementsAre(kRegister));
  // With only the liar listed, the call fails as it would without replicas.
  auto alone = Connect(liar.url());
  ASSERT_NE(alone, nullptr);
  auto refused = alone->Register(Registration());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message(), "POST /v1/agent/register: 503 this replica does not lead");
  EXPECT_TRUE(stranger.requests().empty());
}

TEST(HttpControlPlaneTest, UnavailableNamesTheReplicasTriedWhenNoneLeads) {
  StubReplica electing(StubReplica::NotLeader(""));
  RefusingPort gone;
  auto plane = Connect(electing.url() + "," + gone.url());
  ASSERT_NE(plane, nullptr);
  auto beat = plane->Heartbeat(kNode, protocol::HeartbeatToJson({}));
  ASSERT_FALSE(beat.ok());
  EXPECT_EQ(beat.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(beat.status().message(), HasSubstr("no replica answered as the leader"));
  EXPECT_THAT(beat.status().message(), HasSubstr(electing.url() + ": not the leader"));
  EXPECT_THAT(beat.status().message(), HasSubstr(gone.url() + ": "));
}

// A call gives up after a few replicas; the agent loop tries again later.
TEST(HttpControlPlaneTest, ACallAsksAFewReplicasAtMost) {
  std::vector<std::unique_ptr<StubReplica>> replicas;
  std::string list;
  for (int i = 0; i < 5; ++i) {
    replicas.push_back(std::make_unique<StubReplica>(StubReplica::NotLeader("")));
    list += (i ? "," : "") + replicas.back()->url();
  }
  auto plane = Connect(list);
  ASSERT_NE(plane, nullptr);
  EXPECT_FALSE(plane->Register(Registration()).ok());
  size_t asked = 0;
  for (const auto& r : replicas) asked += r->requests().size();
  EXPECT_EQ(asked, 3u);
  // The next call starts where this one stopped.
  EXPECT_FALSE(plane->Register(Registration()).ok());
  EXPECT_EQ(replicas[3]->requests().size(), 1u);
  EXPECT_EQ(replicas[4]->requests().size(), 1u);
}

TEST(HttpControlPlaneTest, EveryUrlOfTheListIsChecked) {
  auto typo = MakeHttpControlPlane("http://127.0.0.1:1,127.0.0.1:2", "t");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(typo.status().message(), HasSubstr("--server '127.0.0.1:2'"));
  // A CA file is for https:// replicas only: one http:// URL would send the
  // token in the clear.
  auto plain = MakeHttpControlPlane("https://127.0.0.1:1,http://127.0.0.1:2", "t", seconds(1), "", "/dev/null");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().message(), "--ca-file: given, but --server 'http://127.0.0.1:2' is not https://");
  EXPECT_FALSE(MakeHttpControlPlane("http://127.0.0.1:1,", "t").ok());
}

}  // namespace
}  // namespace tidal::agent
