#!/usr/bin/env bash
# Installs the Debian packages that building and testing Tidal need. Safe to
# re-run: it calls apt-get only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev libcpp-httplib-dev libsqlite3-dev
  libcli11-dev libfmt-dev libspdlog-dev libssl-dev zlib1g-dev libboost-dev
  prometheus-cpp-dev libcivetweb-dev libjemalloc-dev
  curl procps
)
# Node and npm build the dashboard (web/). Node may come from elsewhere
# (nodesource bundles npm, and Debian's npm would conflict with it): only
# install Debian's when there is none.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
# Extra packages for the test suite (real Prometheus, promtool, load tools,
# chromium for the dashboard's browser test, clang with its libFuzzer and
# sanitizer runtimes for scripts/fuzz.sh, and etcd, which the HA tests start
# as a 3-member cluster of their own on loopback).
if [[ "${1:-}" == "--test" ]]; then
  packages+=(prometheus wrk chromium clang libclang-rt-dev etcd-server)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
