#!/usr/bin/env bash
# Quick start, part 1: install, build, and run Tidal's main job on its
# embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIDAL_BUILD_TESTS=OFF -DTIDAL_BUILD_BENCH=OFF >/dev/null
cmake --build build --target tidal
# The dashboard's bundle (web/dist), which the server serves at /.
(cd web && npm ci --no-audit --no-fund && npm run build)
# A local cluster: the server on its embedded SQLite store, agents with fake
# GPUs, and the example mix of real processes. Ctrl-C stops everything.
exec build/tidal up "$@"
