// Fixtures for the simulator tests: scratch files and small inline clusters.
#ifndef TIDAL_TESTS_SUPPORT_SIM_FIXTURES_H_
#define TIDAL_TESTS_SUPPORT_SIM_FIXTURES_H_

#include <string>

namespace tidal::testing {

// A fresh directory under the system temp dir, unique per call.
std::string MakeScratchDir(const std::string& tag);
// Writes `text` to dir/name and returns the path.
std::string WriteScratchFile(const std::string& dir, const std::string& name, const std::string& text);
std::string ReadWholeFile(const std::string& path);

// The repository root (TIDAL_SOURCE_DIR, else the current directory).
std::string SourceDir();

// A cluster YAML with `shared_nodes` shared and `training_nodes` training
// nodes of 8 GPUs, `reserved_nodes` inference-reserved ones, and queues
// serving / research, projects online (critical, approved) / research
// (standard).
std::string SmallClusterYaml(int reserved_nodes, int shared_nodes, int training_nodes);

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_SIM_FIXTURES_H_
