#!/usr/bin/env bash
# Fails when anything in core/ includes a header from outside the C++
# standard library and core/ itself: the engine stays pure and portable.
# Also fails when a core/ folder includes a core/ folder that core/layers.txt
# does not list on its line (the same table core/CMakeLists.txt links the
# per-folder libraries from), or when that table has a cycle: the layers
# stay layers. Runs on every build and as a CTest test.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"

# The layer table: folder -> the core/ folders it may include.
declare -A allowed=()
while IFS= read -r line; do
  [[ "$line" =~ ^([a-z_]+):(.*)$ ]] || continue
  allowed["${BASH_REMATCH[1]}"]=" ${BASH_REMATCH[2]} "
done < "$root/core/layers.txt"

std_headers=" algorithm any array atomic bit bitset cassert cctype cerrno cfloat charconv chrono cinttypes climits cmath compare concepts cstddef cstdint cstdio cstdlib cstring ctime deque exception format functional initializer_list iomanip ios iosfwd iostream istream iterator limits list map memory memory_resource new numbers numeric optional ostream queue random ranges ratio set source_location span sstream stack stdexcept string string_view system_error tuple type_traits typeinfo unordered_map unordered_set utility variant vector version "
# Headers that would bring I/O, threads or a wall clock into the engine.
forbidden=" thread mutex condition_variable future fstream filesystem shared_mutex "

status=0

# Every folder has a line and every line a folder, so a new folder cannot
# slip past the table.
for dir in "$root"/core/*/; do
  layer="$(basename "$dir")"
  if [[ -z "${allowed[$layer]+x}" ]]; then
    echo "core/$layer/ has no line in core/layers.txt" >&2
    status=1
  fi
done
for layer in "${!allowed[@]}"; do
  if [[ ! -d "$root/core/$layer" ]]; then
    echo "core/layers.txt names core/$layer/, which does not exist" >&2
    status=1
  fi
  for dep in ${allowed[$layer]}; do
    if [[ -z "${allowed[$dep]+x}" ]]; then
      echo "core/layers.txt: $layer may use $dep, which has no line" >&2
      status=1
    fi
  done
done

# No cycle: a depth-first walk that meets a folder still on its path.
declare -A mark=()  # 1 = on the current path, 2 = done
visit() {
  local layer="$1" path="$2" dep
  if [[ "${mark[$layer]:-0}" == 1 ]]; then
    echo "core/layers.txt has a cycle: $path" >&2
    status=1
    return
  fi
  [[ "${mark[$layer]:-0}" == 2 ]] && return
  mark[$layer]=1
  for dep in ${allowed[$layer]:-}; do
    [[ -n "${allowed[$dep]+x}" ]] && visit "$dep" "$path -> $dep"
  done
  mark[$layer]=2
}
for layer in "${!allowed[@]}"; do visit "$layer" "$layer"; done

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
    else
      layer="${file#"$root"/core/}"
      layer="${layer%%/*}"
      used="${header#core/}"
      used="${used%%/*}"
      if [[ "$used" != "$layer" && "${allowed[$layer]:-}" != *" $used "* ]]; then
        echo "$file:$lineno: core/$layer/ includes \"$header\", but core/layers.txt lets it use only:${allowed[$layer]:- nothing}" >&2
        status=1
      fi
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

if [[ $status -eq 0 ]]; then echo "layering: core/ includes only the standard library and core/, each folder only the layers core/layers.txt gives it"; fi
exit $status
