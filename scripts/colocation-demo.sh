#!/usr/bin/env bash
# Builds tidal and runs the co-location example (examples/colocation) in
# static, reactive and predictive mode, then prints the comparison.
# Outputs: out/colocation-demo/{static,reactive,predictive}/, compare.html.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIDAL_BUILD_TESTS=OFF -DTIDAL_BUILD_BENCH=OFF >/dev/null
cmake --build build --target tidal
exec build/tidal sim demo --example examples/colocation --out out/colocation-demo "$@"
