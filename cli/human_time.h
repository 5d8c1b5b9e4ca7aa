// Times and durations as people read them in a terminal: RFC 3339 for an
// instant, kubectl's AGE style for a duration ("45s", "5m", "2h3m", "3d"),
// and relative to now ("3m ago", "in 2m"). The API keeps epoch milliseconds;
// only the human output converts.
#ifndef TIDAL_CLI_HUMAN_TIME_H_
#define TIDAL_CLI_HUMAN_TIME_H_

#include <cstdint>
#include <string>

#include "core/common/status.h"

namespace tidal::cli {

int64_t WallNowMs();

// "2026-12-01T10:43:20Z"; "-" for 0 or less (the API's "never/unknown").
std::string Rfc3339(int64_t epoch_ms);

// kubectl's HumanDuration: seconds below 2 minutes, minutes and seconds
// below 10 minutes, minutes below 3 hours, hours and minutes below 8 hours,
// hours below 2 days, days and hours below 8 days, days below 2 years.
std::string HumanDuration(int64_t ms);

// "3m ago" / "in 2m" relative to `now_ms`; "-" for 0 or less.
std::string Relative(int64_t epoch_ms, int64_t now_ms);

// "2026-12-01T10:43:20Z (3m ago)"; "-" for 0 or less.
std::string TimeAndRelative(int64_t epoch_ms, int64_t now_ms);

// A point in time given on the command line, as epoch milliseconds:
// "1796111763705" (epoch ms), "2026-12-01T10:43:20Z" (RFC 3339, a "Z" or a
// "+02:00" offset, optional fractional seconds) or "2h" / "90m" / "30s" /
// "7d" (that long before now_ms). `flag` names the flag in the error.
StatusOr<int64_t> ParseTimeFlag(const std::string& text, const std::string& flag, int64_t now_ms);

}  // namespace tidal::cli

#endif  // TIDAL_CLI_HUMAN_TIME_H_
