#!/usr/bin/env bash
# Shows that scripts/check_layering.sh can fail: on a copy of core/ it passes,
# then fails for each way the layers can break (a forbidden include, a cycle
# in core/layers.txt, a folder with no line). Each case starts from a fresh
# copy, so one break cannot hide another.
set -uo pipefail
root="${1:?usage: check_layering_test.sh <source root>}"
work="$(mktemp -d "${TMPDIR:-/tmp}/tidal-layering.XXXXXX")"
trap 'rm -rf "$work"' EXIT
failures=0

fresh() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree/scripts"
  cp -R "$root/core" "$work/tree/core"
  cp "$root/scripts/check_layering.sh" "$work/tree/scripts/"
}

# expect <name> <0|1> <text the output must contain, or "">
expect() {
  local name="$1" want="$2" text="$3" out rc
  out="$("$work/tree/scripts/check_layering.sh" "$work/tree" 2>&1)"
  rc=$?
  if [[ "$want" == 0 && $rc -ne 0 ]] || [[ "$want" == 1 && $rc -eq 0 ]]; then
    echo "FAIL $name: exit $rc, wanted $([[ $want == 0 ]] && echo 0 || echo non-zero)"
    echo "$out"
    failures=$((failures + 1))
  elif [[ -n "$text" && "$out" != *"$text"* ]]; then
    echo "FAIL $name: output lacks: $text"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

fresh
expect "the tree as it is passes" 0 ""

# model/ sits below engine/: the contract may not reach up into the pass.
fresh
sed -i 's|^#include "core/model/allocation.h"$|&\n#include "core/engine/scheduler.h"|' \
  "$work/tree/core/model/decision.h"
expect "model/ including engine/ fails" 1 \
  'core/model/ includes "core/engine/scheduler.h"'

# Allowing that include in the table instead makes a cycle.
fresh
sed -i 's|^model: common$|model: common engine|' "$work/tree/core/layers.txt"
expect "a cycle in layers.txt fails" 1 "has a cycle"

# A new folder must get a line before it can include anything.
fresh
mkdir "$work/tree/core/newlayer"
printf '#include "core/common/ids.h"\n' > "$work/tree/core/newlayer/x.h"
expect "a folder with no line fails" 1 "core/newlayer/ has no line"

exit $((failures > 0))
