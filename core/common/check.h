// TIDAL_CHECK aborts on a broken invariant: a bug, never bad input. Bad input
// is reported with Status (core/common/status.h).
#ifndef TIDAL_CORE_COMMON_CHECK_H_
#define TIDAL_CORE_COMMON_CHECK_H_

#include <sstream>

namespace tidal::internal {

// Collects the streamed message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `TIDAL_CHECK(x) << ...` be a void expression in both branches.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace tidal::internal

#define TIDAL_CHECK(condition)                 \
  (condition) ? (void)0                         \
              : ::tidal::internal::Voidify() &  \
                    ::tidal::internal::CheckFailure(__FILE__, __LINE__, #condition)

#endif  // TIDAL_CORE_COMMON_CHECK_H_
