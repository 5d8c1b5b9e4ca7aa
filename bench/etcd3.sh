#!/usr/bin/env bash
# Starts a 3-member etcd cluster (Debian's etcd-server) on loopback for the
# benchmarks that run Tidal on an etcd store (docs/PERFORMANCE.md), with its
# data under DIR, and prints the store URL to pass as --store. Stop it with
# `bench/etcd3.sh --stop DIR`.
#
#   url=$(bench/etcd3.sh /tmp/tidal-etcd)   # etcd://127.0.0.1:P1,...
#   bench/etcd3.sh --stop /tmp/tidal-etcd
set -euo pipefail
if [[ "${1:-}" == "--stop" ]]; then
  dir=${2:?usage: etcd3.sh --stop DIR}
  for pid_file in "$dir"/e*/pid; do
    [[ -f "$pid_file" ]] || continue
    pid=$(cat "$pid_file")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  exit 0
fi
dir=${1:?usage: etcd3.sh DIR}
command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
# A new cluster each time: members' data from an earlier run names other ports.
rm -rf "$dir"/e[012]
mkdir -p "$dir"
# Free ports, asked of the kernel (bind to port 0 and read it back).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -a client peer
initial=""
for i in 0 1 2; do
  client[$i]=$(free_port)
  peer[$i]=$(free_port)
  initial+="${initial:+,}e$i=http://127.0.0.1:${peer[$i]}"
done
url="etcd://"
for i in 0 1 2; do
  mkdir -p "$dir/e$i"
  etcd --name "e$i" --data-dir "$dir/e$i/data" \
    --listen-client-urls "http://127.0.0.1:${client[$i]}" --advertise-client-urls "http://127.0.0.1:${client[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${peer[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${peer[$i]}" \
    --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token tidal-bench \
    --logger zap --log-level warn >"$dir/e$i/etcd.log" 2>&1 &
  echo $! >"$dir/e$i/pid"
  [[ $i -gt 0 ]] && url+=","
  url+="127.0.0.1:${client[$i]}"
done
for i in 0 1 2; do
  for _ in $(seq 100); do
    curl -sf --max-time 1 "http://127.0.0.1:${client[$i]}/health" | grep -q '"true"' && break
    sleep 0.1
  done
done
echo "$url"
