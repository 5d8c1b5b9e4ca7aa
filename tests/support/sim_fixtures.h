// Fixtures for the simulator tests: scratch files and small inline clusters.
#ifndef TIDAL_TESTS_SUPPORT_SIM_FIXTURES_H_
#define TIDAL_TESTS_SUPPORT_SIM_FIXTURES_H_

#include <string>

#include "core/common/time.h"
#include "sim/simulator.h"

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

// SmallClusterYaml parsed (a failure fails the test), with the default
// policy and no workloads.
sim::SimInput SmallSimInput(int reserved_nodes, int shared_nodes, int training_nodes);

// A rigid training gang of project "research" (its default queue): `pods` x
// `gpus_per_pod`, `duration_s` of work, submitted at `submit_s`.
sim::SimWorkload SimTraining(const sim::SimInput& in, const std::string& name, int pods,
                             int gpus_per_pod, double duration_s, double submit_s,
                             Duration checkpoint_interval);

// An inference service of project "online": 1-GPU replicas, 1 to
// `max_pods`, not preemptible, submitted at 0.
sim::SimWorkload SimService(const sim::SimInput& in, const std::string& name, double capacity_rps,
                            int max_pods, Duration target_p99, Duration cold_start);

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_SIM_FIXTURES_H_
