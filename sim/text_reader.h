// Line-by-line reading of trace files (plain or gzip) and the small parsing
// helpers every trace loader shares. Errors always name file, line and field.
#ifndef TIDAL_SIM_TEXT_READER_H_
#define TIDAL_SIM_TEXT_READER_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"

namespace tidal::sim {

// Bounds on what a trace file may hold, so that a wrong or hostile file ends
// in a clear error rather than in exhausting memory. The largest public trace
// we read (philly.csv) has 82,248 lines of under 60 bytes.
inline constexpr int kMaxTraceLines = 5'000'000;
inline constexpr size_t kMaxTraceLineBytes = 64 * 1024;

class LineReader {
 public:
  virtual ~LineReader() = default;
  // Opens `path`; a name ending in ".gz" is read through zlib.
  static StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  // Reads the next line without its "\n" or "\r\n"; false at end of file,
  // and also past kMaxTraceLines lines or at a line longer than
  // kMaxTraceLineBytes: then status() says which. Callers check status()
  // after their loop.
  bool Next(std::string& line);
  const Status& status() const { return status_; }
  int line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 protected:
  explicit LineReader(std::string path) : path_(std::move(path)) {}
  // Reads one raw line (without "\n"), at most `max_bytes` of it; sets
  // `too_long` when the line had more.
  virtual bool ReadLine(std::string& line, size_t max_bytes, bool& too_long) = 0;
  int line_number_ = 0;
  std::string path_;
  Status status_ = Status::Ok();
};

// Splits one CSV line on commas (the traces we read never quote fields).
void SplitCsv(std::string_view line, std::vector<std::string_view>& fields);

// "path:line: field 'name': what (got "value")".
Status FieldError(std::string_view path, int line, std::string_view field, std::string_view what,
                  std::string_view got);

std::optional<double> ParseDouble(std::string_view text);
std::optional<long long> ParseInt(std::string_view text);
// "YYYY-MM-DD HH:MM:SS" with optional fractional seconds, as seconds since
// 1970-01-01 00:00:00 of the same (unspecified) zone.
std::optional<double> ParseDateTime(std::string_view text);

// Checks that the header line names exactly `expected` columns in order.
Status CheckHeader(const LineReader& reader, std::string_view header,
                   const std::vector<std::string_view>& expected);

// Reads the first line and checks it as CheckHeader does; an empty file or a
// line over the bounds is an error too.
Status ReadHeader(LineReader& reader, const std::vector<std::string_view>& expected);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_TEXT_READER_H_
