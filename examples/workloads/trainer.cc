// An example training worker, run by the Tidal agent as one pod per rank.
//
// It runs --steps steps of --step-ms each (part compute, part sleep), and
// rank 0 checkpoints the step every --checkpoint-every steps into
// $TIDAL_CHECKPOINT_DIR/checkpoint.json (write to a temp file, then rename,
// so a reader never sees half a checkpoint). On start every rank resumes from
// that checkpoint. On a preemption notice (SIGTERM, or the notice file
// $TIDAL_PREEMPT_NOTICE_FILE appearing) it checkpoints at once and exits 0.
// With --idle it computes nothing (a forgotten debug session).
//
//   trainer [--steps N] [--step-ms MS] [--checkpoint-every K] [--idle]
//           [--fail-at-step S]
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace {

std::atomic<bool> g_notice{false};
void OnTerm(int) { g_notice = true; }

std::string Env(const char* key, const char* fallback = "") {
  const char* v = std::getenv(key);
  return v ? v : fallback;
}

long ReadCheckpoint(const std::string& dir) {
  std::ifstream in(dir + "/checkpoint.json");
  if (!in) return 0;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j.value("step", 0L) : 0L;
}

bool WriteCheckpoint(const std::string& dir, long step) {
  const std::string tmp = dir + "/checkpoint.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"step", step}, {"rank", Env("RANK", "0")}}.dump() << "\n";
    out.flush();
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), (dir + "/checkpoint.json").c_str()) == 0;
}

// Stands in for a GPU step: burns ~`ms` of CPU.
double Compute(int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  double x = 1.0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 1000; ++i) x = std::sin(x) + 1.0;
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  long steps = 100, step_ms = 100, checkpoint_every = 10, fail_at = -1;
  bool idle = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&](long& out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "trainer: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      out = std::atol(argv[++i]);
    };
    if (arg == "--steps") next(steps);
    else if (arg == "--step-ms") next(step_ms);
    else if (arg == "--checkpoint-every") next(checkpoint_every);
    else if (arg == "--fail-at-step") next(fail_at);
    else if (arg == "--idle") idle = true;
    else {
      std::fprintf(stderr, "trainer: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  signal(SIGTERM, OnTerm);
  signal(SIGINT, OnTerm);
  const std::string ckpt_dir = Env("TIDAL_CHECKPOINT_DIR", ".");
  const std::string notice_file = Env("TIDAL_PREEMPT_NOTICE_FILE");
  const bool rank0 = Env("RANK", "0") == "0";
  const long resume = ReadCheckpoint(ckpt_dir);
  std::printf("trainer: rank=%s local_rank=%s world_size=%s local_world_size=%s "
              "cuda_visible_devices=%s master=%s:%s job=%s resume_step=%ld\n",
              Env("RANK").c_str(), Env("LOCAL_RANK").c_str(), Env("WORLD_SIZE").c_str(),
              Env("LOCAL_WORLD_SIZE").c_str(), Env("CUDA_VISIBLE_DEVICES").c_str(),
              Env("MASTER_ADDR").c_str(), Env("MASTER_PORT").c_str(), Env("TIDAL_JOB_ID").c_str(),
              resume);
  std::fflush(stdout);
  long step = resume;
  double sink = 0;
  while (step < steps) {
    if (g_notice || (!notice_file.empty() && access(notice_file.c_str(), F_OK) == 0)) {
      if (rank0 && !WriteCheckpoint(ckpt_dir, step)) {
        std::fprintf(stderr, "trainer: checkpoint failed: %s\n", std::strerror(errno));
        return 1;
      }
      std::printf("trainer: notice at step %ld: checkpointed, exiting\n", step);
      return 0;
    }
    if (step == fail_at) {
      std::fprintf(stderr, "trainer: failing at step %ld as asked\n", step);
      return 3;
    }
    const int compute_ms = idle ? 0 : static_cast<int>(std::max(1L, step_ms / 10));
    sink += Compute(compute_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms - compute_ms));
    ++step;
    if (rank0 && checkpoint_every > 0 && step % checkpoint_every == 0) {
      WriteCheckpoint(ckpt_dir, step);
      std::printf("trainer: checkpoint at step %ld\n", step);
      std::fflush(stdout);
    }
  }
  if (rank0) WriteCheckpoint(ckpt_dir, step);
  std::printf("trainer: done at step %ld (%g)\n", step, sink > 0 ? 1.0 : 0.0);
  return 0;
}
