// `tidal sim`: run the trace-driven simulator; `tidal sim compare` puts runs
// side by side; `tidal sim demo` runs the co-location example in all three
// modes; `tidal sim import-load` turns a load trace into a LOAD CSV.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/command_registry.h"
#include "cli/sim_replay_command.h"
#include "sim/report.h"
#include "sim/report_bundle.h"
#include "sim/sim_output.h"
#include "sim/sim_setup.h"

namespace tidal::cli {
namespace {

struct SimArgs {
  sim::SimFiles files;
  std::string out;
  std::string colocation;
  uint64_t seed = 1;
  double end_s = 0;
  double pass_interval_s = 10;
  double load_noise = 0;
  bool deterministic = false;
  std::string web_dir;  // where report.js is; "" = found next to the binary
};

StatusOr<ColocationMode> ParseMode(const std::string& text) {
  if (text == "static") return ColocationMode::kStatic;
  if (text == "reactive") return ColocationMode::kReactive;
  if (text == "predictive") return ColocationMode::kPredictive;
  return InvalidArgument(
      fmt::format("--colocation: expected static, reactive or predictive (got \"{}\")", text));
}

StatusOr<sim::SimOptions> MakeOptions(const SimArgs& a) {
  sim::SimOptions o;
  o.seed = a.seed;
  o.end_s = a.end_s;
  if (!(a.pass_interval_s > 0)) return InvalidArgument("--pass-interval: expected seconds > 0");
  o.pass_interval = SecondsF(a.pass_interval_s);
  o.load_noise = a.load_noise;
  o.wall_times = !a.deterministic;
  if (!a.colocation.empty()) {
    TIDAL_ASSIGN_OR_RETURN(ColocationMode mode, ParseMode(a.colocation));
    o.colocation = mode;
  }
  o.policy_name = a.files.policy.empty()
                      ? "default"
                      : std::filesystem::path(a.files.policy).filename().string();
  return o;
}

int Fail(const Status& s) {
  std::cerr << "tidal sim: " << s.ToString() << "\n";
  ExitCode() = s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  return ExitCode();
}

// The report bundle (web/dist/report.js) for the HTML pages, or "" with a
// note on stderr: the pages then have the SVG charts.
StatusOr<std::string> ReportBundle(const std::string& web_dir) {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  std::string note;
  auto js = sim::LoadReportBundle(web_dir, exe, &note);
  static bool noted = false;  // once per command, not once per demo run
  if (js.ok() && !note.empty() && !noted) std::cerr << note << "\n";
  noted = noted || !note.empty();
  return js;
}

void RunSim(const SimArgs& a) {
  if (a.out.empty()) {
    Fail(InvalidArgument("--out DIR is required"));
    return;
  }
  auto bundle = ReportBundle(a.web_dir);
  if (!bundle.ok()) {
    Fail(bundle.status());
    return;
  }
  auto options = MakeOptions(a);
  if (!options.ok()) {
    Fail(options.status());
    return;
  }
  auto input = sim::LoadSimInput(a.files);
  if (!input.ok()) {
    Fail(input.status());
    return;
  }
  // A status line rewritten in place, only for a person watching: a pipe or a
  // log file gets nothing (it would fill with carriage returns).
  const bool show_progress = isatty(STDERR_FILENO) == 1;
  if (show_progress) {
    options->on_progress = [](const sim::SimProgress& p) {
      std::fprintf(stderr, "\r%s\x1b[K", sim::FormatProgressLine(p).c_str());
      std::fflush(stderr);
    };
  }
  auto result = sim::RunToDirectory(*input, *options, a.out, *bundle);
  if (show_progress) std::fputs("\r\x1b[K", stderr);
  if (!result.ok()) {
    Fail(result.status());
    return;
  }
  const sim::Summary& s = result->summary;
  std::cout << fmt::format(
      "{} mode: {:.1f} h simulated in {:.2f} s; SLO attainment {}, scale-up success {}, "
      "training mean wait {:.0f} s, GPU allocation {:.3f}\n",
      s.colocation, s.sim_duration_s / 3600, s.sim_wall_s, sim::FormatRate(s.inference.slo_attainment),
      sim::FormatRate(s.inference.scale_up_success_rate), s.training.queue_wait_mean_s,
      s.cluster.gpu_allocation_ratio);
  if (s.traces.skipped_cpu_only > 0 || s.traces.skipped_never_ran > 0)
    std::cout << fmt::format(
        "traces: {} jobs replayed; left out {} that need no GPU and {} that never ran\n",
        s.traces.jobs, s.traces.skipped_cpu_only, s.traces.skipped_never_ran);
  std::cout << fmt::format("wrote {}/summary.json, events.jsonl, report.html\n", a.out);
}

void RunCompare(const std::vector<std::string>& dirs, const std::string& out_html,
                const std::string& web_dir) {
  std::vector<sim::ComparedRun> runs;
  for (const std::string& d : dirs) {
    auto summary = sim::ReadSummary(d);
    if (!summary.ok()) {
      Fail(summary.status());
      return;
    }
    runs.push_back({std::filesystem::path(d).filename().string().empty()
                        ? d
                        : std::filesystem::path(d).filename().string(),
                    *summary});
  }
  std::cout << sim::RenderComparisonText(runs);
  if (!out_html.empty()) {
    auto bundle = ReportBundle(web_dir);
    if (!bundle.ok()) {
      Fail(bundle.status());
      return;
    }
    Status s = sim::WriteFile(out_html, sim::RenderComparisonHtml(runs, *bundle));
    if (!s.ok()) {
      Fail(s);
      return;
    }
    std::cout << "wrote " << out_html << "\n";
  }
}

// The co-location example's inputs (examples/colocation/README.md).
// The example's load repeats one day, so its history (the day before the
// run) is that same day: load.csv, fed before t = 0 (--load-history).
sim::SimFiles DemoFiles(const std::string& dir, bool load_history) {
  sim::SimFiles f;
  f.cluster = dir + "/cluster.yaml";
  f.policy = dir + "/policy.yaml";
  f.workload = dir + "/workloads.yaml";
  f.load = dir + "/load.csv";
  f.load_period_s = 86400;
  if (load_history) f.load_history = dir + "/load.csv";
  f.traces = {"philly:" + dir +
              "/philly_sample.csv,project=research,time_scale=1,checkpoint_interval_s=1800"};
  return f;
}

// An example the demo cannot run from its own files: one whose inputs are
// traces that may not be committed (examples/colocation-traces reads them
// from where the user downloaded them, through its run.sh). Names the first
// missing file and what to run instead.
Status CheckDemoInputs(const std::string& example) {
  for (const char* name :
       {"cluster.yaml", "policy.yaml", "workloads.yaml", "load.csv", "philly_sample.csv"}) {
    const std::filesystem::path file = std::filesystem::path(example) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec)) continue;
    if (std::filesystem::is_regular_file(std::filesystem::path(example) / "run.sh", ec))
      return InvalidArgument(fmt::format(
          "--example {}: no {}: this example reads public traces from outside the repository; "
          "run DATA=/path/to/traces {}/run.sh (see {}/README.md)",
          example, name, example, example));
    return InvalidArgument(fmt::format(
        "--example {}: no {} (the demo needs cluster.yaml, policy.yaml, workloads.yaml, "
        "load.csv and philly_sample.csv)",
        example, name));
  }
  return Status::Ok();
}

void RunDemo(const std::string& example, const std::string& out, uint64_t seed, double days,
             const std::string& web_dir, bool load_history) {
  if (Status s = CheckDemoInputs(example); !s.ok()) {
    Fail(s);
    return;
  }
  std::vector<std::string> dirs;
  for (const char* mode : {"static", "reactive", "predictive"}) {
    SimArgs a;
    a.files = DemoFiles(example, load_history);
    a.out = out + "/" + mode;
    a.colocation = mode;
    a.seed = seed;
    a.end_s = days * 86400;
    a.web_dir = web_dir;
    std::cout << "== " << mode << "\n";
    RunSim(a);
    if (ExitCode() != 0) return;
    dirs.push_back(a.out);
  }
  std::cout << "\n";
  RunCompare(dirs, out + "/compare.html", web_dir);
}

void ImportLoad(const std::vector<std::string>& specs, const std::string& out) {
  sim::LoadProfile load;
  for (const std::string& text : specs) {
    auto spec = sim::ParseTraceSpec(text);
    if (!spec.ok()) {
      Fail(spec.status());
      return;
    }
    Status s = sim::AddLoadTrace(*spec, load);
    if (!s.ok()) {
      Fail(s);
      return;
    }
  }
  const std::string csv = load.ToCsv();
  if (out.empty()) {
    std::cout << csv;
    return;
  }
  Status s = sim::WriteFile(out, csv);
  if (!s.ok()) Fail(s);
}

void AddCommonRunOptions(CLI::App* cmd, SimArgs& a) {
  cmd->add_option("--seed", a.seed, "Seed of the simulator's random source");
  cmd->add_option("--end-s", a.end_s, "Stop the simulation at this time (s); default: when all work is done");
  cmd->add_flag("--deterministic", a.deterministic,
                "Write wall-clock figures as 0 so that two runs give byte-identical files");
}

RegisterCommand reg([](CLI::App& root) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* sim = root.add_subcommand("sim", "Run the trace-driven simulator (see docs/simulator.md)");
  sim->add_option("--cluster", args->files.cluster,
                  "Cluster file (docs/formats.md), or openb:PATH[,inference_share=F] (an openb node list)");
  sim->add_option("--policy", args->files.policy, "Policy file; default: the built-in policy");
  sim->add_option("--workload", args->files.workload, "Workload file");
  sim->add_option("--load", args->files.load, "LOAD CSV: time_s,service,rps");
  sim->add_option("--load-history", args->files.load_history,
                  "LOAD CSV of the load before the run, fed to the forecaster (docs/formats.md)");
  sim->add_option("--load-period", args->files.load_period_s,
                  "Repeat the load curve with this period (s), e.g. 86400");
  sim->add_option("--trace", args->files.traces,
                  "Workload trace FORMAT:PATH[,key=value...] (philly, openb, tiresias, pollux, helios, dlrm); "
                  "repeatable");
  sim->add_option("--load-trace", args->files.load_traces,
                  "Load trace SERVICE=FORMAT:PATH[,key=value...] (azure_llm, genai_qps, genai_lora); repeatable");
  sim->add_option("--out", args->out, "Output directory");
  sim->add_option("--colocation", args->colocation, "static, reactive or predictive (overrides the policy)");
  sim->add_option("--pass-interval", args->pass_interval_s, "Seconds between scheduling passes");
  sim->add_option("--load-noise", args->load_noise, "Per-minute load noise factor (seeded)");
  AddCommonRunOptions(sim, *args);
  sim->add_option("--web-dir", args->web_dir,
                  "Folder with report.js (web/dist) for report.html; default: found next to the binary");
  sim->require_subcommand(0, 1);

  auto dirs = std::make_shared<std::vector<std::string>>();
  auto compare_out = std::make_shared<std::string>();
  auto compare_web_dir = std::make_shared<std::string>();
  CLI::App* compare = sim->add_subcommand("compare", "Compare sim output directories side by side");
  compare->add_option("dirs", *dirs, "Output directories of `tidal sim`")->required();
  compare->add_option("--out", *compare_out, "Also write a comparison report (HTML)");
  compare->add_option("--web-dir", *compare_web_dir, "Folder with report.js (web/dist); default: found next to the binary");
  compare->callback([dirs, compare_out, compare_web_dir] { RunCompare(*dirs, *compare_out, *compare_web_dir); });

  struct DemoArgs {
    std::string example = "examples/colocation";
    std::string out = "out/colocation-demo";
    uint64_t seed = 1;
    double days = 3;
    std::string web_dir;
    bool no_load_history = false;
  };
  auto demo = std::make_shared<DemoArgs>();
  CLI::App* demo_cmd =
      sim->add_subcommand("demo", "Run examples/colocation in static, reactive and predictive mode and compare");
  demo_cmd->add_option("--example", demo->example, "The example directory");
  demo_cmd->add_option("--out", demo->out, "Where the three runs and compare.html go");
  demo_cmd->add_option("--seed", demo->seed, "Seed");
  demo_cmd->add_option("--days", demo->days, "Simulated days");
  demo_cmd->add_option("--web-dir", demo->web_dir, "Folder with report.js (web/dist); default: found next to the binary");
  demo_cmd->add_flag("--no-load-history", demo->no_load_history,
                     "Start the forecaster cold (no load before the run), as before --load-history");
  demo_cmd->callback([demo] {
    RunDemo(demo->example, demo->out, demo->seed, demo->days, demo->web_dir, !demo->no_load_history);
  });

  auto load_specs = std::make_shared<std::vector<std::string>>();
  auto load_out = std::make_shared<std::string>();
  CLI::App* import = sim->add_subcommand(
      "import-load", "Write a LOAD CSV from load traces (SERVICE=FORMAT:PATH[,key=value...])");
  import->add_option("traces", *load_specs, "Load traces")->required();
  import->add_option("--out", *load_out, "Output CSV; default: stdout");
  import->callback([load_specs, load_out] { ImportLoad(*load_specs, *load_out); });

  AddSimReplayCommand(sim);

  sim->callback([sim, args] {
    if (sim->get_subcommands().empty()) RunSim(*args);
  });
});

}  // namespace
}  // namespace tidal::cli
