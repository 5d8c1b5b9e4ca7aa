// Every job file under examples/jobs is valid for the cluster `tidal up`
// starts (its projects, queues and nodes): read as `tidal submit` reads it
// and judged by the server's own admission (a dry run), none is refused and
// none can never start. So the README's examples stay true.
#include "config/yaml_document.h"
#include "tests/e2e/e2e_fixture.h"

namespace tidal::e2e {
namespace {

TEST_F(E2eTest, ExampleJobFilesAreValidForTheUpCluster) {
  StartCluster(agent::DefaultLocalNodes(3, 4));  // `tidal up`'s defaults
  const char* src = std::getenv("TIDAL_SOURCE_DIR");
  const fs::path dir = fs::path(src ? src : ".") / "examples/jobs";
  std::set<std::string> kinds;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto doc = config::YamlDocument::Load(entry.path().string());
    ASSERT_TRUE(doc.ok()) << doc.status().message();
    const json& job = doc->root();
    ASSERT_TRUE(job.is_object()) << entry.path();
    EXPECT_TRUE(job.contains("command")) << entry.path() << ": an example shows what runs";
    kinds.insert(job.value("kind", "training"));
    auto verdict = cluster_->Post("/v1/dry-run", job);
    ASSERT_TRUE(verdict.ok()) << entry.path() << ": " << verdict.status().message();
    EXPECT_FALSE((*verdict)["detail"].is_string() && (*verdict)["detail"].get<std::string>().starts_with("rejected: "))
        << entry.path() << ": " << verdict->dump();
  }
  EXPECT_EQ(files, 4);
  EXPECT_EQ(kinds, (std::set<std::string>{"training", "inference", "batch_inference", "debug"}));
}

}  // namespace
}  // namespace tidal::e2e
