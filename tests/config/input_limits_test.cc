#include "config/input_limits.h"

#include <gtest/gtest.h>

namespace tidal::config {
namespace {

TEST(InputLimitsTest, JsonDepthCountsBracketsOutsideStrings) {
  EXPECT_TRUE(CheckJsonDepth(R"({"a": [[1], {"b": 2}]})", "body", 3).ok());
  // Depth 4: {, [, [, [.
  const Status deep = CheckJsonDepth(R"({"a": [[[1]]]})", "body", 3);
  EXPECT_EQ(deep.message(), "body: nested deeper than the limit of 3 levels of [ and { (at byte 8)");
  // Brackets in strings, escaped quotes included, are text.
  EXPECT_TRUE(CheckJsonDepth(R"({"a": "[[[[\"[[[["})", "body", 1).ok());
  EXPECT_FALSE(CheckJsonDepth(std::string(150000, '['), "body").ok());
}

TEST(InputLimitsTest, NamesFollowDns1123) {
  EXPECT_TRUE(CheckObjectName("name", "llm-pretrain-70b").ok());
  for (const char* bad : {"", "-a", "a-", "A", "a_b", "a.b", "a\nb", "x\xe2\x80\xae"}) {
    EXPECT_FALSE(CheckObjectName("name", bad).ok()) << bad;
  }
  EXPECT_FALSE(CheckObjectName("name", std::string(64, 'a')).ok());
  EXPECT_TRUE(CheckObjectName("name", std::string(63, 'a')).ok());
  EXPECT_TRUE(CheckNodeName("name", "gpu-01.rack-a.example").ok());
  EXPECT_EQ(CheckNodeName("name", "../../x").message(),
            "name: expected a host name of up to 253 characters: parts of lowercase letters, digits and "
            "'-' joined by '.' (DNS-1123 subdomain); got an empty part");
  EXPECT_FALSE(CheckNodeName("name", "a..b").ok());
  EXPECT_FALSE(CheckNodeName("name", "a/b").ok());
}

TEST(InputLimitsTest, LabelsEnvAndProcessText) {
  EXPECT_TRUE(CheckLabelKey("labels", "tidal.io/tenant").ok());
  EXPECT_FALSE(CheckLabelKey("labels", "").ok());
  EXPECT_FALSE(CheckLabelKey("labels", "a b").ok());
  EXPECT_TRUE(CheckLabelValue("labels.k", "a value").ok());
  EXPECT_FALSE(CheckLabelValue("labels.k", "a\tb").ok());
  EXPECT_FALSE(CheckLabelValue("labels.k", std::string(254, 'v')).ok());
  EXPECT_TRUE(CheckEnvName("env", "CUDA_VISIBLE_DEVICES").ok());
  EXPECT_FALSE(CheckEnvName("env", "1A").ok());
  EXPECT_FALSE(CheckEnvName("env", "A=B").ok());
  EXPECT_FALSE(CheckProcessText("command[0]", std::string("a\0b", 3), 10).ok());
  EXPECT_FALSE(CheckProcessText("command[0]", "abcdef", 5).ok());
  EXPECT_EQ(CheckCount("env", 3, 2).message(), "env: expected at most 2 entries, got 3");
}

}  // namespace
}  // namespace tidal::config
