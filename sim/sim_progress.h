// Progress of a running simulation, for a status line on a terminal. The
// simulator reports it (SimOptions::on_progress); the CLI decides whether and
// where to show it (only when stderr is a terminal).
#ifndef TIDAL_SIM_SIM_PROGRESS_H_
#define TIDAL_SIM_SIM_PROGRESS_H_

#include <cstdint>
#include <string>

namespace tidal::sim {

struct SimProgress {
  double sim_s = 0;      // simulated time reached
  // Where the run is expected to stop: --end-s, else the last arrival or the
  // end of the load curve (work still running then drains past it). 0 = unknown.
  double horizon_s = 0;
  double wall_s = 0;     // wall-clock seconds since the run started
  uint64_t events = 0;   // events handled so far
};

// One line, e.g. "sim 12.0 h / 72.0 h (16.7%)  1.2M events  48.2k events/s  ETA 4m10s".
// The ETA assumes the simulated-time rate so far holds; past the horizon it
// reads "draining" (only finishing work is left, of unknown length).
std::string FormatProgressLine(const SimProgress& p);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_SIM_PROGRESS_H_
