// The not-leader reply survives encode -> decode, other replies are not
// taken for it, a hostile leader hint is dropped, and server lists parse
// with errors naming the flag.
#include <gtest/gtest.h>

#include "protocol/leader_redirect.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;

TEST(LeaderRedirectTest, RoundTrips) {
  for (const NotLeaderReply& r : {NotLeaderReply{"replica b follows; the leader is a", "http://10.0.0.1:8080"},
                                  NotLeaderReply{"no leader yet (an election is on)", ""}}) {
    auto decoded = NotLeaderReplyFromJson(json::parse(NotLeaderReplyToJson(r).dump()));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(*decoded, r);
  }
}

TEST(LeaderRedirectTest, OtherRepliesAreNotLeaderHints) {
  EXPECT_FALSE(NotLeaderReplyFromJson(json::parse(R"({"id": 3})")).has_value());
  json other = NotLeaderReplyToJson({"x", "http://a:1"});
  other["error"]["code"] = "unavailable";
  EXPECT_FALSE(NotLeaderReplyFromJson(other).has_value());
  EXPECT_FALSE(NotLeaderReplyFromJson(json("not_leader")).has_value());
}

TEST(LeaderRedirectTest, HostileLeaderHintIsDropped) {
  for (const char* bad : {"file:///etc/passwd", "http://", "http:///x", "javascript:alert(1)", "http://a b"}) {
    json j = NotLeaderReplyToJson({"m", "http://ok:1"});
    j["leader"] = bad;
    auto decoded = NotLeaderReplyFromJson(j);
    ASSERT_TRUE(decoded.has_value()) << bad;
    EXPECT_EQ(decoded->leader_url, "") << bad;
  }
  json j = NotLeaderReplyToJson({"m", "http://ok:1"});
  j["leader"] = "http://" + std::string(2000, 'a');
  EXPECT_EQ(NotLeaderReplyFromJson(j)->leader_url, "");
}

TEST(LeaderRedirectTest, ParsesServerLists) {
  auto one = ParseServerList("http://127.0.0.1:8080/", "--server");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, std::vector<std::string>{"http://127.0.0.1:8080"});
  auto three = ParseServerList("http://a:1, https://b:2,http://a:1,http://c:3", "--server");
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(*three, (std::vector<std::string>{"http://a:1", "https://b:2", "http://c:3"}));

  for (const char* bad : {"", "http://a:1,", "a:1", "ftp://a:1", "http://a:1,,http://b:2"}) {
    auto parsed = ParseServerList(bad, "--server");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--server"), std::string::npos) << parsed.status().message();
  }
  std::string many;
  for (int i = 0; i <= static_cast<int>(kMaxServerUrls); ++i) many += std::string(i ? "," : "") + "http://h" + std::to_string(i) + ":1";
  EXPECT_FALSE(ParseServerList(many, "--server").ok());
}

}  // namespace
}  // namespace tidal::protocol
