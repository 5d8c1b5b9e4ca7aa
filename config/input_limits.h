// Bounds on hostile input, checked where text from outside enters (API
// bodies, workload files, agent registrations): how deep a JSON document may
// nest, what a name may look like, how long labels and lists may be.
// Everything here is a cheap check that runs before the value is used; the
// messages name the field and the limit.
#ifndef TIDAL_CONFIG_INPUT_LIMITS_H_
#define TIDAL_CONFIG_INPUT_LIMITS_H_

#include <cstddef>
#include <string_view>

#include "core/common/status.h"

namespace tidal::config {

// Nesting of `[` and `{`. Real documents use under 10; a parser (or a
// recursive copy or destructor) walking 150,000 levels runs out of stack.
inline constexpr int kMaxJsonDepth = 64;
// JSON workload files are read whole into memory.
inline constexpr size_t kMaxJsonFileBytes = size_t{64} << 20;

// DNS-1123 label, as Kubernetes names objects: lowercase letters, digits and
// '-', starting and ending with a letter or digit.
inline constexpr size_t kMaxObjectNameLength = 63;
// DNS-1123 subdomain (node names are host names): labels joined by '.'.
inline constexpr size_t kMaxNodeNameLength = 253;
// Label keys and values: printable ASCII, bounded.
inline constexpr size_t kMaxLabelKeyLength = 253;
inline constexpr size_t kMaxLabelValueLength = 253;
// Map and list sizes of a workload.
inline constexpr size_t kMaxLabels = 64;            // labels, node_selector
inline constexpr size_t kMaxListEntries = 64;       // tolerations, gpu model lists
inline constexpr size_t kMaxCommandArgs = 1024;
inline constexpr size_t kMaxArgLength = 32 * 1024;
inline constexpr size_t kMaxEnvEntries = 1024;
inline constexpr size_t kMaxEnvNameLength = 256;
inline constexpr size_t kMaxEnvValueLength = 32 * 1024;

// Fails if `text` (JSON) nests arrays and objects deeper than `max_depth`;
// brackets inside strings do not count. `what` starts the message ("body").
// Linear and allocation-free, so it runs before the parser.
Status CheckJsonDepth(std::string_view text, std::string_view what, int max_depth = kMaxJsonDepth);

// Each returns an error "path: ..." naming the rule that `value` breaks.
Status CheckObjectName(std::string_view path, std::string_view name);
Status CheckNodeName(std::string_view path, std::string_view name);
Status CheckLabelKey(std::string_view path, std::string_view key);
Status CheckLabelValue(std::string_view path, std::string_view value);
// POSIX environment variable name: [A-Za-z_][A-Za-z0-9_]*.
Status CheckEnvName(std::string_view path, std::string_view name);
// Text passed to a process (an argument, an env value): no NUL, bounded.
Status CheckProcessText(std::string_view path, std::string_view text, size_t max_length);
Status CheckCount(std::string_view path, size_t count, size_t max);

}  // namespace tidal::config

#endif  // TIDAL_CONFIG_INPUT_LIMITS_H_
