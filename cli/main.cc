#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/command_registry.h"

namespace tidal::cli {

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
  CLI::App app{"Tidal: a GPU cluster scheduler for co-located training and inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tidal 0.1.0");
  for (const auto& registrar : tidal::cli::CommandRegistrars()) registrar(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return tidal::cli::ExitCode();
}
