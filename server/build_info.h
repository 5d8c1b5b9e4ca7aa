// The version and compiler of this build, one definition for `tidal
// version` and the tidal_build_info metric.
#ifndef TIDAL_SERVER_BUILD_INFO_H_
#define TIDAL_SERVER_BUILD_INFO_H_

#define TIDAL_VERSION_NUMBER "0.1.0"

namespace tidal::server {

// The compiler this build was made with: `tidal version` and the
// tidal_build_info metric's `compiler` label.
#if defined(__clang__)
inline constexpr char kTidalCompiler[] = "clang " __clang_version__;
#elif defined(__GNUC__)
inline constexpr char kTidalCompiler[] = "gcc " __VERSION__;
#else
inline constexpr char kTidalCompiler[] = "unknown";
#endif

}  // namespace tidal::server

#endif  // TIDAL_SERVER_BUILD_INFO_H_
