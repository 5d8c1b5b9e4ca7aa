#include "core/common/check.h"

#include <cstdio>
#include <cstdlib>

namespace tidal::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  // stderr is the one output core/ may touch: an invariant is already broken.
  std::fputs(stream_.str().c_str(), stderr);
  std::fputc('\n', stderr);
  std::abort();
}

}  // namespace tidal::internal
