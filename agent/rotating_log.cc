#include "agent/rotating_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/core.h>

namespace tidal::agent {

RotatingLog::RotatingLog(std::string path, int64_t max_bytes, int max_files)
    : path_(std::move(path)), max_bytes_(std::max<int64_t>(max_bytes, 1)),
      max_files_(std::max(max_files, 0)) {}

RotatingLog::~RotatingLog() {
  if (fd_ >= 0) close(fd_);
}

Status RotatingLog::Open() {
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return Internal(fmt::format("open {}: {}", path_, std::strerror(errno)));
  struct stat st {};
  size_ = fstat(fd_, &st) == 0 ? st.st_size : 0;
  return Status::Ok();
}

Status RotatingLog::Rotate() {
  close(fd_);
  fd_ = -1;
  if (max_files_ == 0) {
    unlink(path_.c_str());
  } else {
    // The oldest falls off when it is overwritten by the rename below.
    for (int i = max_files_ - 1; i >= 1; --i) {
      std::rename(fmt::format("{}.{}", path_, i).c_str(),
                  fmt::format("{}.{}", path_, i + 1).c_str());
    }
    std::rename(path_.c_str(), fmt::format("{}.1", path_).c_str());
  }
  size_ = 0;
  return Open();
}

Status RotatingLog::Write(std::string_view data) {
  if (fd_ < 0) TIDAL_RETURN_IF_ERROR(Open());
  while (!data.empty()) {
    if (size_ >= max_bytes_) TIDAL_RETURN_IF_ERROR(Rotate());
    const size_t room = static_cast<size_t>(max_bytes_ - size_);
    const size_t n = std::min(room, data.size());
    const ssize_t written = write(fd_, data.data(), n);
    if (written < 0) {
      if (errno == EINTR) continue;
      return Internal(fmt::format("write {}: {}", path_, std::strerror(errno)));
    }
    size_ += written;
    data.remove_prefix(static_cast<size_t>(written));
  }
  return Status::Ok();
}

}  // namespace tidal::agent
