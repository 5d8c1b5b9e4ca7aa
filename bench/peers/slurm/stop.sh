#!/usr/bin/env bash
# Stops the private Slurm that start.sh started: cancels its jobs, then sends
# TERM (KILL after a grace period) to exactly the PIDs recorded in
# $SLURM_PEER_DIR/pids/, each only if /proc/PID/cmdline still mentions the
# private directory. Job processes that outlive their slurmd (slurmstepd,
# the batch shell, sleep) are found by their working directory or open files
# inside the private directory, never by name. Logs and results/ are kept.
#
#   bench/peers/slurm/stop.sh
set -euo pipefail

DIR="${SLURM_PEER_DIR:-${TMPDIR:-/tmp}/tidal-slurm-peer}"
GRACE_S="${GRACE_S:-20}"
[[ "$DIR" == /* && "$DIR" != / ]] || { echo "stop.sh: SLURM_PEER_DIR must be absolute" >&2; exit 1; }
[[ -d "$DIR/pids" ]] || { echo "stop.sh: nothing recorded in $DIR/pids"; exit 0; }

# PID's command line, or nothing once it has gone (no error on the race).
cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null || true; }
mentions_dir() { # PID: its command line mentions $DIR
  [[ "$(cmdline "$1")" == *"$DIR"* ]]
}

# This shell and its ancestors are never signalled, whatever their cwd.
protect=" $$ "
p="$$"
while [[ "$p" =~ ^[0-9]+$ ]] && ((p > 1)); do
  p="$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null || echo 0)"
  protect+="$p "
done

uses_dir() { # PID: cmdline, cwd or an open file is inside $DIR
  local pid="$1" link
  [[ "$protect" == *" $pid "* || "$pid" == "$BASHPID" ]] && return 1
  mentions_dir "$pid" && return 0
  link="$(readlink "/proc/$pid/cwd" 2>/dev/null || true)"
  [[ "$link" == "$DIR" || "$link" == "$DIR"/* ]] && return 0
  for fd in /proc/"$pid"/fd/*; do
    link="$(readlink "$fd" 2>/dev/null || true)"
    [[ "$link" == "$DIR"/* ]] && return 0
  done
  return 1
}

recorded=()
for f in "$DIR"/pids/*; do
  [[ -e "$f" ]] || continue
  pid="$(cat "$f")"
  if [[ "$pid" =~ ^[0-9]+$ ]] && mentions_dir "$pid"; then
    recorded+=("$pid")
  fi
done

# Cancel the jobs while slurmctld is up, so the steps end cleanly.
if [[ -f "$DIR/etc/slurm.conf" && -f "$DIR/pids/slurmctld" ]] && mentions_dir "$(cat "$DIR/pids/slurmctld")"; then
  export SLURM_CONF="$DIR/etc/slurm.conf"
  if [[ -n "$(timeout 20 squeue -h -o %i 2>/dev/null | head -n 1)" ]]; then
    timeout 30 scancel --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 150); do
      [[ -z "$(timeout 10 squeue -h -o %i 2>/dev/null | head -n 1)" ]] && break
      sleep 0.2
    done
  fi
fi

# slurmd first (their steps end with them), then slurmctld, then munged.
signal_all() { # SIGNAL PID...
  local sig="$1" pid
  shift
  for pid in "$@"; do
    if mentions_dir "$pid"; then kill "-$sig" "$pid" 2>/dev/null || true; fi
  done
}
wait_gone() { # SECONDS PID...: 0 when none is left
  local deadline=$((SECONDS + $1)) pid left
  shift
  while :; do
    left=0
    for pid in "$@"; do mentions_dir "$pid" && left=1; done
    ((left == 0)) && return 0
    ((SECONDS >= deadline)) && return 1
    sleep 0.2
  done
}

slurmds=() others=()
for pid in "${recorded[@]+"${recorded[@]}"}"; do
  if [[ "$(cmdline "$pid")" == *" -N gpu"* ]]; then slurmds+=("$pid"); else others+=("$pid"); fi
done
ctld=() munge=()
for pid in "${others[@]+"${others[@]}"}"; do
  if [[ "$(cmdline "$pid")" == *"--socket="* ]]; then munge+=("$pid"); else ctld+=("$pid"); fi
done
for group in slurmds ctld munge; do
  declare -n g="$group"
  if ((${#g[@]})); then
    signal_all TERM "${g[@]}"
    if ! wait_gone "$GRACE_S" "${g[@]}"; then
      echo "stop.sh: $group still up after ${GRACE_S} s: KILL" >&2
      signal_all KILL "${g[@]}"
      wait_gone 5 "${g[@]}" || echo "stop.sh: some $group PIDs survived KILL" >&2
    fi
  fi
  unset -n g
done

# Anything left that lives in the private directory: job processes that
# outlived their slurmd.
leftovers() {
  local d pid
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    uses_dir "$pid" && echo "$pid"
  done
  return 0
}
mapfile -t left < <(leftovers)
if ((${#left[@]})); then
  echo "stop.sh: ${#left[@]} leftover job processes in $DIR: TERM" >&2
  kill -TERM "${left[@]}" 2>/dev/null || true
  sleep 2
  mapfile -t left < <(leftovers)
  if ((${#left[@]})); then
    kill -KILL "${left[@]}" 2>/dev/null || true
    sleep 0.5
  fi
fi
mapfile -t left < <(leftovers)
rm -f "$DIR"/pids/*
if ((${#left[@]})); then
  echo "stop.sh: still running in $DIR: ${left[*]}" >&2
  exit 1
fi
echo "stop.sh: stopped ${#recorded[@]} recorded daemons; nothing left running in $DIR"
