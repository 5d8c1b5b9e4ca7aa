#!/usr/bin/env bash
# Quick start, part 2: install, build with AddressSanitizer and
# UndefinedBehaviorSanitizer, and run the whole test suite. .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# The dashboard's npm packages (esbuild, uPlot, playwright-core), exactly as
# locked; the browser test builds web/dist from them.
(cd web && npm ci --no-audit --no-fund)
# The benchmarks are built too (not run): a bench/ tool that no longer
# compiles against the code it measures fails here, not on the day it is
# needed.
cmake -S . -B build/sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDAL_SANITIZE=ON -DTIDAL_BUILD_BENCH=ON >/dev/null
cmake --build build/sanitize
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# etcd is installed above: the HA tests must run, not skip.
export TIDAL_REQUIRE_ETCD=1
ctest --test-dir build/sanitize --output-on-failure -j "$(nproc)" "$@"
# Then every parser under libFuzzer for a minute in all (a clang build of
# the fuzz targets and the libraries they link).
scripts/fuzz.sh
