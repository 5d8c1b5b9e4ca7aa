#!/usr/bin/env bash
# Fails when anything in core/ includes a header from outside the C++
# standard library and core/ itself: the engine stays pure and portable.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"

std_headers=" algorithm any array atomic bit bitset cassert cctype cerrno cfloat charconv chrono cinttypes climits cmath compare concepts cstddef cstdint cstdio cstdlib cstring ctime deque exception format functional initializer_list iomanip ios iosfwd iostream istream iterator limits list map memory memory_resource new numbers numeric optional ostream queue random ranges ratio set source_location span sstream stack stdexcept string string_view system_error tuple type_traits typeinfo unordered_map unordered_set utility variant vector version "
# Headers that would bring I/O, threads or a wall clock into the engine.
forbidden=" thread mutex condition_variable future fstream filesystem shared_mutex "

status=0
while IFS= read -r line; do
  file="${line%%:*}"
  rest="${line#*:}"
  lineno="${rest%%:*}"
  text="${rest#*:}"
  if [[ "$text" =~ \#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
    header="${BASH_REMATCH[1]}"
    if [[ "$header" != core/* ]]; then
      echo "$file:$lineno: core/ includes \"$header\" from outside core/" >&2
      status=1
    fi
  elif [[ "$text" =~ \#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
    header="${BASH_REMATCH[1]}"
    if [[ "$forbidden" == *" $header "* ]]; then
      echo "$file:$lineno: core/ includes <$header>: no I/O or threads in the engine" >&2
      status=1
    elif [[ "$std_headers" != *" $header "* ]]; then
      echo "$file:$lineno: core/ includes <$header>, which is not a standard header" >&2
      status=1
    fi
  fi
done < <(grep -rn --include='*.h' --include='*.cc' -E '^[[:space:]]*#[[:space:]]*include' "$root/core" || true)

# No wall clock either, even through a standard header.
if grep -rn --include='*.h' --include='*.cc' -E 'system_clock|steady_clock|high_resolution_clock|std::time\(|std::rand\(|random_device' "$root/core"; then
  echo "core/ reads a wall clock or an unseeded random source" >&2
  status=1
fi

if [[ $status -eq 0 ]]; then echo "layering: core/ includes only the standard library and core/"; fi
exit $status
