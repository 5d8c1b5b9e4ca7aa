#!/usr/bin/env bash
# Real libFuzzer runs of every fuzz/ target (docs/RELIABILITY.md "Fuzzing"):
# a separate clang build (build/fuzz, ASan+UBSan+libFuzzer) of only the
# fuzz targets and the libraries they link, then each target for SECONDS
# (default 6: about a minute for all eight) from CTest. scripts/test.sh runs
# it after the suite. Usage: scripts/fuzz.sh [SECONDS] [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-6}"
shift || true
command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ is not installed (apt-get install clang libclang-rt-dev)"; exit 2; }
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DTIDAL_FUZZ=ON -DTIDAL_SANITIZE=ON -DTIDAL_BUILD_BENCH=OFF -DTIDAL_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build build/fuzz --target tidal_fuzzers
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build/fuzz --output-on-failure -R '^fuzz\.' "$@"
