// Each subcommand of build/tidal lives in its own file and registers itself
// here, so adding one never edits main.cc.
#ifndef TIDAL_CLI_COMMAND_REGISTRY_H_
#define TIDAL_CLI_COMMAND_REGISTRY_H_

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace tidal::cli {

// Adds a subcommand (and its callback) to the root app.
using CommandRegistrar = std::function<void(CLI::App& root)>;

std::vector<CommandRegistrar>& CommandRegistrars();

struct RegisterCommand {
  explicit RegisterCommand(CommandRegistrar registrar) {
    CommandRegistrars().push_back(std::move(registrar));
  }
};

// Set by a subcommand's callback; main() returns it.
int& ExitCode();

}  // namespace tidal::cli

#endif  // TIDAL_CLI_COMMAND_REGISTRY_H_
