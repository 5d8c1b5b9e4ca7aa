// Which pod a message is about: (workload, rank, attempt).
#ifndef TIDAL_PROTOCOL_POD_KEY_H_
#define TIDAL_PROTOCOL_POD_KEY_H_

#include <compare>
#include <cstdint>

namespace tidal::protocol {

struct PodKey {
  uint64_t workload = 0;
  int rank = 0;
  // The workload's placement count (1 for the first): it tells a restarted
  // pod from the earlier run of the same rank. 0 = not known (not sent).
  int64_t attempt = 0;
  auto operator<=>(const PodKey&) const = default;
};

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_POD_KEY_H_
