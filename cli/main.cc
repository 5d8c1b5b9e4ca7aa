#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/command_registry.h"
#include "server/build_info.h"

namespace tidal::cli {

const char kTidalVersion[] = "tidal " TIDAL_VERSION_NUMBER;

std::vector<CommandRegistrar>& CommandRegistrars() {
  static std::vector<CommandRegistrar> registrars;
  return registrars;
}

int& ExitCode() {
  static int code = 0;
  return code;
}

}  // namespace tidal::cli

int main(int argc, char** argv) {
  using namespace tidal::cli;  // NOLINT: the exit codes
  CLI::App app{"Tidal: a GPU cluster scheduler for co-located training and inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kTidalVersion);
  app.footer(
      "Exit status: 0 ok; 1 the server refused or failed the request, or could not be reached;\n"
      "2 a usage error (bad flag or argument; nothing was sent); 3 `dry-run`: the workload can\n"
      "never start as written (e.g. no node has the GPU model it asks for).\n"
      "Server and token: --server/--token, else TIDAL_SERVER/TIDAL_TOKEN, else the config file\n"
      "($TIDAL_CONFIG, else $XDG_CONFIG_HOME/tidal/config.yaml, else ~/.config/tidal/config.yaml).");
  for (const auto& registrar : CommandRegistrars()) registrar(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0: CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "tidal: error: " << e.what() << "\nRun with --help for usage.\n";
    return kExitUsage;
  }
  return ExitCode();
}
