#!/usr/bin/env bash
# Slurm 22.05 and Tidal side by side, on this machine, with the same job mix:
#   1. Slurm: start.sh NODES, burst.py --jobs 400 (held, released at once),
#      burst.py --jobs 1000 --duration 8 (churn), stop.sh;
#   2. Tidal: build/rel/bench/agent_burst_benchmark with NODES real agents,
#      the same 400-job burst (from 16 clients, then as one batch) and
#      1000 x 8 s churn;
# then prints one table (Slurm, Tidal, Slurm/Tidal). With RUNS > 1 it repeats
# both sides and prints each run and the medians.
#
#   bench/peers/slurm/compare.sh [NODES]        (default 256)
#
# Environment: SLURM_PEER_DIR (default ${TMPDIR:-/tmp}/tidal-slurm-peer),
# RUNS (1), GPUS (8 per node), BURST_JOBS (400), CHURN_JOBS (1000), CHURN_S (8), SEED (1),
# COOLDOWN_S (15, pause between the two sides), AUTH (munge|none),
# TIDAL_BIN (build/rel/tidal), TIDAL_BENCH (build/rel/bench/agent_burst_benchmark).
# Results (JSON and logs) go to $SLURM_PEER_DIR/results/compare-<time>/;
# nothing is written into the repository.
set -euo pipefail

NODES="${1:-256}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
export SLURM_PEER_DIR="${SLURM_PEER_DIR:-${TMPDIR:-/tmp}/tidal-slurm-peer}"
DIR="$SLURM_PEER_DIR"
RUNS="${RUNS:-1}"
BURST_JOBS="${BURST_JOBS:-400}"
CHURN_JOBS="${CHURN_JOBS:-1000}"
CHURN_S="${CHURN_S:-8}"
SEED="${SEED:-1}"
export GPUS="${GPUS:-8}"
COOLDOWN_S="${COOLDOWN_S:-15}"
TIDAL_BIN="${TIDAL_BIN:-$REPO/build/rel/tidal}"
TIDAL_BENCH="${TIDAL_BENCH:-$REPO/build/rel/bench/agent_burst_benchmark}"

[[ "$NODES" =~ ^[0-9]+$ ]] || { echo "compare.sh: NODES must be a number" >&2; exit 1; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: RUNS must be >= 1" >&2; exit 1; }
for f in "$TIDAL_BIN" "$TIDAL_BENCH"; do
  [[ -x "$f" ]] || { echo "compare.sh: $f is missing: build the Release tree (build/rel) first" >&2; exit 1; }
done

OUT="$DIR/results/compare-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
started=0
cleanup() {
  if ((started)); then "$HERE/stop.sh" >&2 || true; fi
}
trap cleanup EXIT

load() { awk '{ print $1, $2, $3 }' /proc/loadavg; }

for ((run = 1; run <= RUNS; run++)); do
  R="$OUT/run$run"
  mkdir -p "$R"
  echo "== run $run of $RUNS: $NODES nodes (load average $(load))" >&2

  # --- Slurm ---
  load >"$R/load-slurm-start.txt"
  started=1
  "$HERE/start.sh" "$NODES" >&2
  cp "$DIR/startup.json" "$R/slurm-startup.json"
  load >"$R/load-slurm-burst.txt"
  python3 -B "$HERE/burst.py" --jobs "$BURST_JOBS" --seed "$SEED" --out "$R/slurm-burst.json" >/dev/null
  load >"$R/load-slurm-churn.txt"
  python3 -B "$HERE/burst.py" --jobs "$CHURN_JOBS" --duration "$CHURN_S" --seed "$SEED" \
    --out "$R/slurm-churn.json" >/dev/null
  "$HERE/stop.sh" >&2
  started=0
  cp "$DIR/log/slurmctld.log" "$R/slurmctld.log"
  sleep "$COOLDOWN_S"

  # --- Tidal ---
  load >"$R/load-tidal.txt"
  work="$DIR/tidal-work-$run"
  rm -rf "$work"
  (cd "$REPO" && "$TIDAL_BENCH" --tidal "$TIDAL_BIN" --agents "$NODES" --gpus "$GPUS" --jobs "$BURST_JOBS" \
    --churn-jobs "$CHURN_JOBS" --churn-s "$CHURN_S" --seed "$SEED" --work-dir "$work") \
    >"$R/tidal.txt" 2>"$R/tidal.err" || { tail -n 20 "$R/tidal.err" >&2; echo "compare.sh: the Tidal benchmark failed" >&2; exit 1; }
  cat "$R/tidal.txt" >&2
  # Nothing of Tidal's may outlive its benchmark.
  for p in /proc/[0-9]*; do
    cmd="$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null || true)"
    if [[ "$cmd" == *"$work"* ]]; then
      echo "compare.sh: warning: ${p#/proc/} still runs in $work" >&2
    fi
  done
  load >"$R/load-end.txt"
  if ((run < RUNS)); then sleep "$COOLDOWN_S"; fi
done

python3 -B - "$OUT" "$NODES" "$RUNS" "$BURST_JOBS" "$CHURN_JOBS" "$CHURN_S" "$GPUS" <<'EOF'
import json, os, re, statistics, sys

out, nodes, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
burst_jobs, churn_jobs, churn_s, gpus = sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]

def tidal(path):
    text = open(path).read()
    reg = re.search(r"registered in ([-\d.]+) s", text)
    def burst_of(mode):
        return re.search(r"burst \(" + mode + r"\): (\d+) jobs \((\d+) pods, (\d+) GPUs\), submitted in ([-\d.]+) s; "
                         r"all placed ([-\d.]+) s, all pods running ([-\d.]+) s", text)
    burst, batch = burst_of("16 clients"), burst_of("one batch")
    churn = re.search(r"churn: (\d+) jobs x \S+ s \(([\d.]+) GPU-s; ideal fill ([\d.]+) s\): "
                      r"all placed in ([-\d.]+) s", text)
    f = lambda m, i: float(m.group(i)) if m and float(m.group(i)) >= 0 else None
    return {"startup_s": f(reg, 1), "burst_gpus": f(burst, 3), "burst_submit_s": f(burst, 4),
            "burst_placed_s": f(burst, 5), "burst_running_s": f(burst, 6),
            "batch_placed_s": f(batch, 5), "batch_running_s": f(batch, 6),
            "churn_placed_s": f(churn, 4), "churn_ideal_s": f(churn, 3), "churn_gpu_s": f(churn, 2)}

rows = []
for r in range(1, runs + 1):
    d = os.path.join(out, f"run{r}")
    s_start = json.load(open(os.path.join(d, "slurm-startup.json")))
    s_burst = json.load(open(os.path.join(d, "slurm-burst.json")))
    s_churn = json.load(open(os.path.join(d, "slurm-churn.json")))
    t = tidal(os.path.join(d, "tidal.txt"))
    loads = {k: open(os.path.join(d, f"load-{k}.txt")).read().split()
             for k in ("slurm-start", "slurm-churn", "tidal", "end")}
    rows.append({
        "run": r,
        "slurm": {"startup_s": s_start["startup_s"], "burst_submit_s": s_burst["submit_s"],
                  "burst_release_cmd_s": s_burst["release_cmd_s"],
                  "burst_placed_s": s_burst["all_placed_s"], "burst_first_s": s_burst["first_placed_s"],
                  "churn_placed_s": s_churn["all_placed_s"], "churn_ideal_s": s_churn["ideal_fill_s"],
                  "churn_gpu_s": s_churn["gpu_seconds"], "burst_gpus": s_burst["gpus_demanded"],
                  "churn_release_cmd_s": s_churn["release_cmd_s"],
                  "burst_by_backfill": s_burst["placed_by_backfill"],
                  "churn_by_backfill": s_churn["placed_by_backfill"]},
        "tidal": t,
        "load": loads,
    })

def med(side, key):
    vals = [x[side][key] for x in rows if x[side].get(key) is not None]
    return statistics.median(vals) if vals else None

def fmt(v, unit=" s"):
    return "-" if v is None else f"{v:.2f}{unit}"

def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"

def table(get, title):
    ideal = get("slurm", "churn_ideal_s")
    row = lambda name, key: (f"| {name} | {fmt(get('slurm', key))} | {fmt(get('tidal', key))} | "
                             f"{ratio(get('slurm', key), get('tidal', key))} |")
    return "\n".join([
        title, "",
        "| figure | Slurm 22.05 | Tidal | Slurm / Tidal |",
        "|---|---|---|---|",
        row(f"startup: {nodes} nodes x {gpus} GPUs registered (a)", "startup_s"),
        f"| burst of {burst_jobs}: submitted (b) | {fmt(get('slurm', 'burst_submit_s'))} | "
        f"{fmt(get('tidal', 'burst_submit_s'))} | not compared |",
        row(f"burst of {burst_jobs}: all placed (c)", "burst_placed_s"),
        f"| burst of {burst_jobs}, Tidal as one batch: all placed (c) | {fmt(get('slurm', 'burst_placed_s'))} | "
        f"{fmt(get('tidal', 'batch_placed_s'))} | {ratio(get('slurm', 'burst_placed_s'), get('tidal', 'batch_placed_s'))} |",
        row(f"churn of {churn_jobs} x {churn_s} s: all placed (c) (ideal fill {fmt(ideal)})", "churn_placed_s"),
        f"| churn: all placed / ideal fill | {ratio(get('slurm', 'churn_placed_s'), ideal)}x | "
        f"{ratio(get('tidal', 'churn_placed_s'), ideal)}x | |",
        ""])

NOTES = """(a) Slurm: from starting munged and slurmctld until sinfo shows every node idle.
    Tidal: from starting the server until every agent has registered.
(b) Slurm: sbatch --hold, 8 sbatch processes at a time. Tidal: HTTP POSTs from 16
    keep-alive clients (then, in the batch row, one POST /v1/workloads:batch).
    Different clients: shown, not compared.
(c) Slurm: from `scontrol release` of the held jobs: submission EXCLUDED (the
    release itself, one RPC per job, is included). Tidal: from the first submit:
    submission INCLUDED. Slurm / Tidal > 1: Tidal faster.
"""

report = []
if runs > 1:
    report.append(table(med, f"Medians of {runs} runs"))
for x in rows:
    report.append(table(lambda side, key, x=x: x[side].get(key),
                        f"Run {x['run']} (load average: Slurm start {' '.join(x['load']['slurm-start'])}; "
                        f"before churn {' '.join(x['load']['slurm-churn'])}; Tidal start {' '.join(x['load']['tidal'])}; "
                        f"end {' '.join(x['load']['end'])})"))
    s = x["slurm"]
    report.append(f"  Slurm: first placement {fmt(s['burst_first_s'])} after the release; "
                  f"scontrol release took {fmt(s['burst_release_cmd_s'])} (burst) and "
                  f"{fmt(s['churn_release_cmd_s'])} (churn); placed by backfill: {s['burst_by_backfill']} "
                  f"(burst), {s['churn_by_backfill']} (churn). Tidal: all pods running "
                  f"{fmt(x['tidal']['burst_running_s'])} (16 clients) and {fmt(x['tidal']['batch_running_s'])} "
                  f"(one batch) after the first submit.\n")
    if s["burst_gpus"] != x["tidal"]["burst_gpus"]:
        report.append(f"  WARNING: the burst mixes differ: Slurm {s['burst_gpus']} GPUs, "
                      f"Tidal {x['tidal']['burst_gpus']} GPUs\n")
    if s["churn_gpu_s"] != x["tidal"]["churn_gpu_s"]:
        report.append(f"  WARNING: the churn mixes differ: Slurm {s['churn_gpu_s']} GPU-s, "
                      f"Tidal {x['tidal']['churn_gpu_s']} GPU-s\n")
report.append(NOTES)
text = "\n".join(report)
summary = {"nodes": nodes, "runs": rows,
           "median": {side: {k: med(side, k) for k in rows[0][side]} for side in ("slurm", "tidal")}}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
open(os.path.join(out, "summary.md"), "w").write(text + "\n")
print(text)
print(f"(results: {out})")
EOF
