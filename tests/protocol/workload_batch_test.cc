// The batch envelope survives encode -> decode, its bounds name the field,
// and an item's error names the item and its field.
#include "protocol/workload_batch.h"

#include <gtest/gtest.h>

namespace tidal::protocol {
namespace {

using nlohmann::json;

TEST(WorkloadBatchTest, RoundTrips) {
  WorkloadBatch batch;
  batch.workloads = {json{{"name", "a"}, {"gpus_per_replica", 1}}, json{{"name", "b"}, {"replicas", 2}}};
  auto decoded = WorkloadBatchFromJson(json::parse(WorkloadBatchToJson(batch).dump()));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(*decoded, batch);
}

TEST(WorkloadBatchTest, TextFromEncodedItemsIsTheTreesDump) {
  WorkloadBatch batch;
  batch.workloads = {json{{"name", "a"}, {"id", 1}}, json{{"name", "b\u00e9"}, {"env", {{"K", "v"}}}}};
  std::vector<std::string> items;
  for (const json& item : batch.workloads) items.push_back(item.dump());
  EXPECT_EQ(WorkloadBatchText(items), WorkloadBatchToJson(batch).dump());
  auto decoded = WorkloadBatchFromJson(json::parse(WorkloadBatchText(items)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(*decoded, batch);
}

TEST(WorkloadBatchTest, EnvelopeErrorsNameTheField) {
  auto error = [](const json& j) { return WorkloadBatchFromJson(j).status().message(); };
  EXPECT_EQ(error(json::object()), "workloads: required field is missing");
  EXPECT_EQ(error(json{{"workloads", json::array()}}), "workloads: expected 1 to 1000 workloads, got 0");
  EXPECT_EQ(error(json{{"workloads", json::array({json::object(), 3})}}), "workloads[1]: expected an object, got 3");
  EXPECT_EQ(error(json{{"workloads", "x"}}).rfind("workloads: ", 0), 0u);
  EXPECT_EQ(error(json{{"workloads", json::array({json::object()})}, {"dry_run", true}}).rfind("dry_run: ", 0), 0u);
  EXPECT_EQ(error(json::array()).rfind("(message): ", 0), 0u);
}

TEST(WorkloadBatchTest, AHostileBatchIsBounded) {
  // 1,001 empty objects: refused on the count, before any item is read.
  json j = {{"workloads", json::array()}};
  for (size_t i = 0; i <= kMaxBatchWorkloads; ++i) j["workloads"].push_back(json::object());
  EXPECT_EQ(WorkloadBatchFromJson(j).status().message(), "workloads: expected 1 to 1000 workloads, got 1001");
  j["workloads"].erase(j["workloads"].begin());
  EXPECT_TRUE(WorkloadBatchFromJson(j).ok());
}

TEST(WorkloadBatchTest, AnItemsErrorNamesTheItemAndItsField) {
  EXPECT_EQ(InBatchItem(InvalidArgument("replicas: must be at least 1"), 3).message(),
            "workloads[3].replicas: must be at least 1");
  EXPECT_EQ(InBatchItem(PermissionDenied("tenant: token of tenant \"a\" may not submit as \"b\""), 0).message(),
            "workloads[0].tenant: token of tenant \"a\" may not submit as \"b\"");
  const Status plain = ResourceExhausted("tenant a has 5 unfinished workloads");
  EXPECT_EQ(InBatchItem(plain, 7).message(), "workloads[7]: tenant a has 5 unfinished workloads");
  EXPECT_EQ(InBatchItem(plain, 7).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(InBatchItem(Status::Ok(), 1).ok());
}

}  // namespace
}  // namespace tidal::protocol
