// A size-rotated log file: when writing would take `path` past `max_bytes`,
// path.(n-1) -> path.n, ..., path -> path.1 and a fresh `path` is started;
// at most `max_files` rotated files are kept (path.1 is the newest).
#ifndef TIDAL_AGENT_ROTATING_LOG_H_
#define TIDAL_AGENT_ROTATING_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/common/status.h"

namespace tidal::agent {

class RotatingLog {
 public:
  RotatingLog(std::string path, int64_t max_bytes, int max_files);
  ~RotatingLog();
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  Status Open();
  // Splits `data` across files so that no file exceeds max_bytes.
  Status Write(std::string_view data);
  const std::string& path() const { return path_; }
  int64_t size_bytes() const { return size_; }

 private:
  Status Rotate();

  std::string path_;
  int64_t max_bytes_;
  int max_files_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace tidal::agent

#endif  // TIDAL_AGENT_ROTATING_LOG_H_
