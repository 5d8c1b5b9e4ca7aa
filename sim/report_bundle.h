// Finding web/dist/report.js, the bundle `tidal sim` inlines into
// report.html and compare.html (sim/report.h), at run time, the way
// `tidal server` finds web/dist: a pre-built binary and a rebuilt bundle
// work together without recompiling, and a build without node (no bundle)
// still writes reports, with the SVG charts.
#ifndef TIDAL_SIM_REPORT_BUNDLE_H_
#define TIDAL_SIM_REPORT_BUNDLE_H_

#include <string>

#include "core/common/status.h"

namespace tidal::sim {

// The bundle's path: DIR/report.js for `web_dir` = DIR (from --web-dir);
// else the first of <ancestor>/web/dist/report.js (an ancestor of the
// executable's folder: the source tree `build/...` lives in) and
// <exe dir>/../share/tidal/web/report.js that exists; "" when none does.
std::string FindReportBundle(const std::string& web_dir, const std::string& executable_path);

// The bundle's text: "" (and a note to print in `note`) when there is no
// bundle, InvalidArgument when `web_dir` was given and has no report.js,
// Unavailable when it cannot be read.
StatusOr<std::string> LoadReportBundle(const std::string& web_dir, const std::string& executable_path,
                                       std::string* note);

}  // namespace tidal::sim

#endif  // TIDAL_SIM_REPORT_BUNDLE_H_
