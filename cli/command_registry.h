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

// The exit status of every subcommand (documented in `tidal --help`): 0 ok,
// 1 the server refused or failed the request or could not be reached, 2 the
// command line is wrong (nothing was sent), 3 a dry run found that the
// workload can never start as written.
inline constexpr int kExitOk = 0;
inline constexpr int kExitApiError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNever = 3;

// A wrong command line found inside a callback (CLI11 checks run before):
// main() reports it like CLI11's own parse errors, with exit 2.
class UsageError : public CLI::ParseError {
 public:
  explicit UsageError(const std::string& message) : CLI::ParseError("UsageError", message, kExitUsage) {}
};

// "tidal 0.1.0"
extern const char kTidalVersion[];

}  // namespace tidal::cli

#endif  // TIDAL_CLI_COMMAND_REGISTRY_H_
