#include "config/yaml_document.h"

#include <gtest/gtest.h>

#include "config/field_reader.h"

namespace tidal::config {
namespace {

TEST(YamlDocumentTest, PlainScalarsGetJsonTypesAndQuotedStayStrings) {
  auto doc = YamlDocument::Parse("a: 8\nb: \"8\"\nc: 2.5\nd: true\ne: ~\nf: hello\ng: -3\n", "t.yaml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const auto& root = doc->root();
  EXPECT_TRUE(root["a"].is_number_integer());
  EXPECT_EQ(root["a"].get<int>(), 8);
  EXPECT_TRUE(root["b"].is_string());
  EXPECT_DOUBLE_EQ(root["c"].get<double>(), 2.5);
  EXPECT_TRUE(root["d"].get<bool>());
  EXPECT_TRUE(root["e"].is_null());
  EXPECT_EQ(root["f"].get<std::string>(), "hello");
  EXPECT_EQ(root["g"].get<int>(), -3);
}

TEST(YamlDocumentTest, LinesAreKeptByPathAndMissingFieldsUseTheParent) {
  const char* text =
      "nodes:\n"           // 1
      "  - name: a\n"      // 2
      "    gpus: 8\n"      // 3
      "  - name: b\n"      // 4
      "    gpus: -2\n";    // 5
  auto doc = YamlDocument::Parse(text, "cluster.yaml");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->LineOf("nodes[1].gpus"), 5);
  EXPECT_EQ(doc->LineOf("nodes[0].name"), 2);
  EXPECT_EQ(doc->LineOf("nodes[1].missing"), 4);
  Status located = doc->Locate(FieldError("nodes[1].gpus", "expected a positive integer, got -2"));
  EXPECT_EQ(located.message(), "cluster.yaml:5: nodes[1].gpus: expected a positive integer, got -2");
}

TEST(YamlDocumentTest, SyntaxErrorsNameTheFileAndLine) {
  auto doc = YamlDocument::Parse("a: 1\nb: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().message().rfind("bad.yaml:", 0), 0u) << doc.status().message();
}

TEST(YamlDocumentTest, DuplicateKeysAreErrors) {
  auto doc = YamlDocument::Parse("a: 1\nb: 2\na: 3\n", "dup.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("duplicate field 'a'"), std::string::npos) << doc.status().message();
}

TEST(YamlDocumentTest, MissingFileNamesThePath) {
  auto doc = YamlDocument::Load("/nonexistent/tidal.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("/nonexistent/tidal.yaml"), std::string::npos);
}

TEST(FieldReaderTest, UnknownFieldsAndPriorityAreRefused) {
  nlohmann::json obj = {{"name", "x"}, {"gpuz", 3}};
  auto r = ObjectReader::Open(obj, "nodes[0]", {"name", "gpus"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("nodes[0].gpuz: unknown field 'gpuz'", 0), 0u) << r.status().message();

  nlohmann::json with_priority = {{"name", "x"}, {"priority", 5}};
  auto p = ObjectReader::Open(with_priority, "", {"name"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "priority: priority is derived from templates; remove field 'priority'");
}

TEST(FieldReaderTest, NumbersAreRangeCheckedWithTheValueShown) {
  nlohmann::json obj = {{"gpus", -2}, {"name", 5}, {"ok", "yes"}};
  auto r = ObjectReader::Open(obj, "n", {"gpus", "name", "ok"});
  ASSERT_TRUE(r.ok());
  int gpus = 0;
  Status s = r->Int("gpus", &gpus, 1);
  EXPECT_EQ(s.message(), "n.gpus: expected a positive integer, got -2");
  bool ok = false;
  EXPECT_EQ(r->Bool("ok", &ok).message(), "n.ok: expected true or false, got \"yes\"");
  int missing = 7;
  EXPECT_TRUE(r->Int("absent", &missing).ok());
  EXPECT_EQ(missing, 7);
  EXPECT_EQ(r->Int("absent", &missing, 0, 10, true).message(), "n.absent: required field is missing");
}

}  // namespace
}  // namespace tidal::config
