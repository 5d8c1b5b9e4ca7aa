#include "cli/human_time.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <regex>

#include <fmt/format.h>

namespace tidal::cli {

int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Rfc3339(int64_t epoch_ms) {
  if (epoch_ms <= 0) return "-";
  const std::time_t t = epoch_ms / 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string HumanDuration(int64_t ms) {
  if (ms < 0) ms = -ms;
  const int64_t s = ms / 1000;
  const int64_t m = s / 60, h = s / 3600, d = s / 86400;
  if (s < 120) return fmt::format("{}s", s);
  if (m < 10) return s % 60 == 0 ? fmt::format("{}m", m) : fmt::format("{}m{}s", m, s % 60);
  if (h < 3) return fmt::format("{}m", m);
  if (h < 8) return m % 60 == 0 ? fmt::format("{}h", h) : fmt::format("{}h{}m", h, m % 60);
  if (h < 48) return fmt::format("{}h", h);
  if (h < 192) return h % 24 == 0 ? fmt::format("{}d", d) : fmt::format("{}d{}h", d, h % 24);
  if (d < 365 * 2) return fmt::format("{}d", d);
  return fmt::format("{}y", d / 365);
}

std::string Relative(int64_t epoch_ms, int64_t now_ms) {
  if (epoch_ms <= 0) return "-";
  // Within a second either way reads as "now": clocks of client and server
  // differ by that much anyway.
  if (epoch_ms > now_ms + 1000) return "in " + HumanDuration(epoch_ms - now_ms);
  return HumanDuration(std::max<int64_t>(0, now_ms - epoch_ms)) + " ago";
}

std::string TimeAndRelative(int64_t epoch_ms, int64_t now_ms) {
  if (epoch_ms <= 0) return "-";
  return fmt::format("{} ({})", Rfc3339(epoch_ms), Relative(epoch_ms, now_ms));
}

StatusOr<int64_t> ParseTimeFlag(const std::string& text, const std::string& flag, int64_t now_ms) {
  static const std::regex kEpoch(R"(\d+)");
  static const std::regex kAgo(R"((\d+)(ms|s|m|h|d))");
  static const std::regex kRfc3339(
      R"((\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2})))");
  std::smatch m;
  if (std::regex_match(text, kEpoch)) {
    // Plain digits are epoch milliseconds, as the API takes them.
    if (text.size() > 15) return InvalidArgument(fmt::format("{} '{}': epoch milliseconds out of range", flag, text));
    return std::stoll(text);
  }
  if (std::regex_match(text, m, kAgo)) {
    static const std::map<std::string, int64_t> kMs = {
        {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
    if (m[1].length() > 9) return InvalidArgument(fmt::format("{} '{}': too long ago", flag, text));
    return now_ms - std::stoll(m[1]) * kMs.at(m[2]);
  }
  if (std::regex_match(text, m, kRfc3339)) {
    std::tm tm{};
    tm.tm_year = std::stoi(m[1]) - 1900;
    tm.tm_mon = std::stoi(m[2]) - 1;
    tm.tm_mday = std::stoi(m[3]);
    tm.tm_hour = std::stoi(m[4]);
    tm.tm_min = std::stoi(m[5]);
    tm.tm_sec = std::stoi(m[6]);
    if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
        tm.tm_sec > 60) {
      return InvalidArgument(fmt::format("{} '{}': not a valid date and time", flag, text));
    }
    int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
    if (m[7].matched) ms += static_cast<int64_t>(std::stod("0" + m[7].str()) * 1000);
    if (m[9].matched) {
      const int64_t offset_ms = (std::stoll(m[10]) * 60 + std::stoll(m[11])) * 60'000;
      ms += m[9] == "+" ? -offset_ms : offset_ms;  // 10:00+02:00 is 08:00Z
    }
    return ms;
  }
  return InvalidArgument(fmt::format(
      "{} '{}': expected epoch milliseconds, an RFC 3339 time (2026-12-01T10:00:00Z) or a duration "
      "before now (30m, 2h, 7d)",
      flag, text));
}

}  // namespace tidal::cli
