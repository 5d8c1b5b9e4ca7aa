// The version of this build, one definition for `tidal --version` and the
// tidal_build_info metric.
#ifndef TIDAL_SERVER_BUILD_INFO_H_
#define TIDAL_SERVER_BUILD_INFO_H_

#define TIDAL_VERSION_NUMBER "0.1.0"

#endif  // TIDAL_SERVER_BUILD_INFO_H_
