// `tidal sim replay`: added under `tidal sim` by cli/sim_command.cc.
#ifndef TIDAL_CLI_SIM_REPLAY_COMMAND_H_
#define TIDAL_CLI_SIM_REPLAY_COMMAND_H_

#include <CLI/CLI.hpp>

namespace tidal::cli {

void AddSimReplayCommand(CLI::App* sim);

}  // namespace tidal::cli

#endif  // TIDAL_CLI_SIM_REPLAY_COMMAND_H_
