// Small text helpers for decision details. core/ has no fmt and GCC 12 has
// no std::format; a pass writes tens of thousands of details, so numbers go
// through std::to_chars rather than a stream.
#ifndef TIDAL_CORE_EXPLAIN_TEXT_H_
#define TIDAL_CORE_EXPLAIN_TEXT_H_

#include <charconv>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/common/time.h"

namespace tidal::explain {

template <typename T>
void Append(std::string& out, const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    out += value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, char>) {
    out += value;
  } else if constexpr (std::is_arithmetic_v<T>) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out.append(buf, ec == std::errc() ? end : buf);
  } else {
    out += std::string_view(value);
  }
}

template <typename... Args>
std::string Str(const Args&... args) {
  std::string out;
  (Append(out, args), ...);
  return out;
}

// "t=123.5s": engine times are relative to the epoch the caller chose.
inline std::string TimeText(Time t) {
  if (t == kInfiniteFuture) return "never";
  return Str("t=", ToSeconds(t), "s");
}

}  // namespace tidal::explain

#endif  // TIDAL_CORE_EXPLAIN_TEXT_H_
