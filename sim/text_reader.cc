#include "sim/text_reader.h"

#include <zlib.h>

#include <charconv>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

namespace tidal::sim {
namespace {

class PlainReader final : public LineReader {
 public:
  PlainReader(std::string path, std::ifstream in) : LineReader(std::move(path)), in_(std::move(in)) {}

 protected:
  bool ReadLine(std::string& line, size_t max_bytes, bool& too_long) override {
    line.clear();
    too_long = false;
    bool any = false;
    for (int c = in_.get(); c != std::char_traits<char>::eof(); c = in_.get()) {
      any = true;
      if (c == '\n') return true;
      if (line.size() >= max_bytes) {
        too_long = true;
        return true;
      }
      line.push_back(static_cast<char>(c));
    }
    return any;
  }

 private:
  std::ifstream in_;
};

class GzipReader final : public LineReader {
 public:
  GzipReader(std::string path, gzFile file) : LineReader(std::move(path)), file_(file) {}
  ~GzipReader() override { gzclose(file_); }

 protected:
  bool ReadLine(std::string& line, size_t max_bytes, bool& too_long) override {
    line.clear();
    too_long = false;
    char buf[4096];
    bool any = false;
    while (gzgets(file_, buf, sizeof buf) != nullptr) {
      any = true;
      line.append(buf);
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        break;
      }
      if (line.size() > max_bytes) break;
    }
    if (line.size() > max_bytes) too_long = true;
    return any;
  }

 private:
  gzFile file_;
};

}  // namespace

bool LineReader::Next(std::string& line) {
  if (!status_.ok()) return false;
  bool too_long = false;
  if (!ReadLine(line, kMaxTraceLineBytes, too_long)) return false;
  ++line_number_;
  if (too_long) {
    status_ = InvalidArgument(fmt::format("{}:{}: line longer than {} bytes (is this a trace file?)",
                                          path_, line_number_, kMaxTraceLineBytes));
    return false;
  }
  if (line_number_ > kMaxTraceLines) {
    status_ = InvalidArgument(
        fmt::format("{}:{}: more than {} lines; cut the file or use start_s/span_s on a smaller one",
                    path_, line_number_, kMaxTraceLines));
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return NotFound(fmt::format("{}: cannot open gzip file", path));
    gzbuffer(f, 1 << 16);
    return std::unique_ptr<LineReader>(new GzipReader(path, f));
  }
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("{}: cannot open file", path));
  return std::unique_ptr<LineReader>(new PlainReader(path, std::move(in)));
}

void SplitCsv(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return;
    }
    fields.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

Status FieldError(std::string_view path, int line, std::string_view field, std::string_view what,
                  std::string_view got) {
  return InvalidArgument(fmt::format("{}:{}: field '{}': {} (got \"{}\")", path, line, field, what, got));
}

std::optional<double> ParseDouble(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (v != v) return std::nullopt;  // NaN is never a valid measurement
  return v;
}

std::optional<long long> ParseInt(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

namespace {
// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil arithmetic).
long long DaysFromCivil(long long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}
}  // namespace

std::optional<double> ParseDateTime(std::string_view s) {
  // 0123456789012345678
  // YYYY-MM-DD HH:MM:SS
  int y, mo, d, h, mi, se;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':')
    return std::nullopt;
  if (!Digits(s, 0, 4, y) || !Digits(s, 5, 2, mo) || !Digits(s, 8, 2, d) || !Digits(s, 11, 2, h) ||
      !Digits(s, 14, 2, mi) || !Digits(s, 17, 2, se))
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return std::nullopt;
  double frac = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20) return std::nullopt;
    double scale = 0.1;
    for (size_t i = 20; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      frac += (s[i] - '0') * scale;
      scale /= 10;
    }
  }
  const long long days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return static_cast<double>(days * 86400 + h * 3600 + mi * 60 + se) + frac;
}

Status CheckHeader(const LineReader& reader, std::string_view header,
                   const std::vector<std::string_view>& expected) {
  std::vector<std::string_view> got;
  SplitCsv(header, got);
  std::string want;
  for (size_t i = 0; i < expected.size(); ++i) want += (i ? "," : "") + std::string(expected[i]);
  if (got.size() != expected.size())
    return InvalidArgument(fmt::format("{}:{}: header: expected columns \"{}\" (got \"{}\")",
                                       reader.path(), reader.line_number(), want, header));
  for (size_t i = 0; i < expected.size(); ++i)
    if (got[i] != expected[i])
      return InvalidArgument(fmt::format("{}:{}: header: column {} should be '{}' (got \"{}\")",
                                         reader.path(), reader.line_number(), i + 1, expected[i],
                                         got[i]));
  return Status::Ok();
}

Status ReadHeader(LineReader& reader, const std::vector<std::string_view>& expected) {
  std::string line;
  if (!reader.Next(line)) {
    TIDAL_RETURN_IF_ERROR(reader.status());
    return InvalidArgument(fmt::format("{}: empty file, expected a header", reader.path()));
  }
  return CheckHeader(reader, line, expected);
}

}  // namespace tidal::sim
