// The pod log messages survive encode -> decode unchanged, decode errors
// name the field, and ValidUtf8Prefix keeps what JSON can carry.
#include <gtest/gtest.h>

#include <string>

#include "protocol/pod_log.h"

namespace tidal::protocol {
namespace {

using nlohmann::json;

json Wire(const json& j) { return json::parse(j.dump()); }

TEST(PodLogCodecTest, BatchRoundTripsEveryField) {
  PodLogBatch b;
  b.chunks.push_back({{12, 3, 7}, "step 1 loss=0.5\n"});
  b.chunks.push_back({{12, 0, 1}, "caf\xC3\xA9\n"});
  auto decoded = PodLogBatchFromJson(Wire(PodLogBatchToJson(b)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, b);
}

TEST(PodLogCodecTest, BatchErrorsNameTheField) {
  json j = PodLogBatchToJson({{{{12, 3, 7}, "x"}}});
  j["chunks"][0].erase("data");
  auto missing = PodLogBatchFromJson(j);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("chunks[0].data:", 0), 0u) << missing.status().message();

  j = PodLogBatchToJson({{{{12, 3, 7}, std::string(kMaxPodLogChunkBytes + 1, 'a')}}});
  auto big = PodLogBatchFromJson(j);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message().rfind("chunks[0].data:", 0), 0u) << big.status().message();

  j = PodLogBatchToJson({{{{12, 3, 7}, "x"}}});
  j["chunks"][0]["stream"] = "stdout";
  auto unknown = PodLogBatchFromJson(j);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message().rfind("chunks[0].stream:", 0), 0u) << unknown.status().message();
}

TEST(PodLogCodecTest, PageRoundTripsEveryField) {
  PodLogPage p{12, 3, 4096, 4100, true, "tail"};
  auto decoded = PodLogPageFromJson(Wire(PodLogPageToJson(p)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, p);
  json j = PodLogPageToJson(p);
  j["next_offset"] = 10;  // before offset
  auto bad = PodLogPageFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("next_offset:", 0), 0u) << bad.status().message();
}

TEST(PodLogCodecTest, ValidUtf8PrefixHoldsBackASplitSequenceAndReplacesBadBytes) {
  size_t used = 0;
  // "é" is C3 A9: a chunk that ends after C3 keeps it for the next one.
  EXPECT_EQ(ValidUtf8Prefix("ab\xC3", &used), "ab");
  EXPECT_EQ(used, 2u);
  EXPECT_EQ(ValidUtf8Prefix("ab\xC3\xA9", &used), "ab\xC3\xA9");
  EXPECT_EQ(used, 4u);
  // A stray continuation byte, 0xFF and an overlong '/' (C0 AF) each become
  // U+FFFD; all of the input is used.
  EXPECT_EQ(ValidUtf8Prefix("a\x80" "b\xFF" "c\xC0\xAF", &used),
            "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(used, 7u);
  // What comes out always dumps as JSON.
  EXPECT_NO_THROW(json(ValidUtf8Prefix("\xED\xA0\x80 surrogate", &used)).dump());
}

}  // namespace
}  // namespace tidal::protocol
