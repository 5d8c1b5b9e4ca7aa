// FreeGpusLog: the numbering a reader catches up by, the trim that makes an
// old reader fall back to comparing every node, and copies that start a
// lineage of their own (a copy may change apart from its original).
#include "core/model/free_gpus_log.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace tidal {
namespace {

std::vector<uint32_t> Since(const FreeGpusLog& log, uint64_t lineage, uint64_t seen, bool* reaches) {
  const auto nodes = log.ChangedSince(lineage, seen);
  *reaches = nodes.has_value();
  return nodes ? std::vector<uint32_t>(nodes->begin(), nodes->end()) : std::vector<uint32_t>{};
}

TEST(FreeGpusLogTest, AReaderGetsTheNodesChangedSinceItLastLooked) {
  FreeGpusLog log;
  log.Record(3, 10);
  log.Record(5, 10);
  const uint64_t seen = log.changes();  // 2
  log.Record(3, 10);
  log.Record(7, 10);
  bool reaches = false;
  EXPECT_EQ(Since(log, log.lineage(), seen, &reaches), (std::vector<uint32_t>{3, 7}));
  EXPECT_TRUE(reaches);
  EXPECT_EQ(Since(log, log.lineage(), 0, &reaches), (std::vector<uint32_t>{3, 5, 3, 7}));
  EXPECT_TRUE(Since(log, log.lineage(), log.changes(), &reaches).empty());
  EXPECT_TRUE(reaches) << "nothing new is an answer, not a fallback";
  Since(log, log.lineage() + 1000, seen, &reaches);
  EXPECT_FALSE(reaches) << "another lineage";
  Since(log, log.lineage(), log.changes() + 1, &reaches);
  EXPECT_FALSE(reaches) << "a reader ahead of the log read another history";
}

TEST(FreeGpusLogTest, TrimmingSendsAnOldReaderBackToEveryNode) {
  FreeGpusLog log;
  // 2 nodes: the log keeps at least 1024 changes, then drops the older half.
  for (int i = 0; i < 1025; ++i) log.Record(i % 2, 2);
  bool reaches = true;
  Since(log, log.lineage(), 0, &reaches);
  EXPECT_FALSE(reaches);
  const std::vector<uint32_t> recent = Since(log, log.lineage(), 1024, &reaches);
  EXPECT_TRUE(reaches);
  EXPECT_EQ(recent, (std::vector<uint32_t>{0}));  // change 1025 was node 1024 % 2
}

TEST(FreeGpusLogTest, ACopyStartsItsOwnLineageAndAMoveKeepsIt) {
  FreeGpusLog log;
  log.Record(1, 4);
  const uint64_t lineage = log.lineage();
  FreeGpusLog copy = log;
  EXPECT_NE(copy.lineage(), lineage);
  EXPECT_EQ(copy.changes(), log.changes());
  bool reaches = true;
  Since(copy, lineage, 0, &reaches);
  EXPECT_FALSE(reaches);
  EXPECT_TRUE(Since(copy, copy.lineage(), copy.changes(), &reaches).empty());
  EXPECT_TRUE(reaches);

  FreeGpusLog moved = std::move(log);
  EXPECT_EQ(moved.lineage(), lineage);
  EXPECT_EQ(Since(moved, lineage, 0, &reaches), (std::vector<uint32_t>{1}));
  EXPECT_NE(log.lineage(), lineage);  // NOLINT(bugprone-use-after-move): it starts anew

  moved.Reset();
  Since(moved, lineage, 0, &reaches);
  EXPECT_FALSE(reaches);
}

}  // namespace
}  // namespace tidal
