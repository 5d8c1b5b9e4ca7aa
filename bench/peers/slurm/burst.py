#!/usr/bin/env python3
"""Burst and churn placement timing against the private Slurm of start.sh.

Submits N jobs with `sbatch --hold` in the job mix of Tidal's
bench/agent_burst_benchmark.cc (1/2/4/8 GPUs on one node; 16/32 GPUs as 2/4
whole nodes; weights 40/25/15/12/5/3; the same seeded generator), releases
them all with one `scontrol release`, and times from the release to each
job's placement, read from slurmctld's log (millisecond timestamps):
`sched: Allocate JobId=` (main scheduler) and `sched/backfill: _start_job:
Started JobId=` (backfill). Then cancels its jobs and waits until every node
is idle again.

  source $SLURM_PEER_DIR/env.sh
  bench/peers/slurm/burst.py --jobs 400                  # burst: all placed
  bench/peers/slurm/burst.py --jobs 1000 --duration 8    # churn: jobs run sleep 8

Burst jobs run `sleep 3600` and use the seed as given; churn jobs run
`sleep DURATION` and use seed + 1, as agent_burst_benchmark does. Writes a
JSON result (default $SLURM_PEER_DIR/results/<mode>-<time>.json) and
prints it. Python 3 standard library only.
"""

import argparse
import bisect
import concurrent.futures
import datetime
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

WEIGHTS = [40, 25, 15, 12, 5, 3]


class MT19937_64:
    """std::mt19937_64, bit for bit."""

    N, M = 312, 156
    MASK = (1 << 64) - 1
    UPPER, LOWER = 0xFFFFFFFF80000000, 0x7FFFFFFF

    def __init__(self, seed):
        mt = [seed & self.MASK]
        for i in range(1, self.N):
            prev = mt[-1]
            mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & self.MASK)
        self.mt = mt
        self.i = self.N

    def _twist(self):
        mt = self.mt
        for k in range(self.N):
            y = (mt[k] & self.UPPER) | (mt[(k + 1) % self.N] & self.LOWER)
            v = mt[(k + self.M) % self.N] ^ (y >> 1)
            if y & 1:
                v ^= 0xB5026F5AA96619E9
            mt[k] = v
        self.i = 0

    def __call__(self):
        if self.i >= self.N:
            self._twist()
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & self.MASK


class DiscreteDistribution:
    """libstdc++'s std::discrete_distribution<int> with one draw per pick:
    generate_canonical<double, 53> over a 64-bit engine is one call,
    x / 2^64 (rounded to double), then lower_bound over the normalised
    partial sums, whose last entry is forced to 1."""

    def __init__(self, weights):
        total = 0.0
        for w in weights:
            total += float(w)
        cum, acc = [], 0.0
        for w in weights:
            acc += float(w) / total
            cum.append(acc)
        cum[-1] = 1.0
        self.cum = cum

    def __call__(self, rng):
        p = float(rng()) / 18446744073709551616.0
        if p >= 1.0:
            p = 1.0 - 2.0**-53
        return bisect.bisect_left(self.cum, p)


def mix(count, gpus_per_node, seed):
    """[(gpus_per_node_used, nodes)] as agent_burst_benchmark's Mix()."""
    shapes = [(1, 1), (2, 1), (4, 1), (8, 1), (gpus_per_node, 2), (gpus_per_node, 4)]
    pick = DiscreteDistribution(WEIGHTS)
    rng = MT19937_64(seed)
    return [shapes[pick(rng)] for _ in range(count)]


LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)[^\]]*\] (.*)$")
ALLOCATE = re.compile(r"\bsched: Allocate JobId=(\d+)\b")
BACKFILL = re.compile(r"\bStarted JobId=(\d+)\b")
RELEASE = re.compile(r"release hold on JobId=(\d+)\b")


def log_time(stamp):
    """slurmctld's iso8601_ms stamp (local time) as epoch seconds."""
    return datetime.datetime.strptime(stamp[:23], "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def idle_nodes():
    out = run(["sinfo", "-h", "-p", "train", "-o", "%D %t"])
    return sum(int(n) for n, state in (line.split() for line in out.splitlines()) if state == "idle")


def percentile(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s), max(1, math.ceil(q / 100.0 * len(s)))) - 1]


def parse_sdiag(text):
    out = {}
    section = "general"
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Main schedule statistics"):
            section = "main"
        elif line.startswith("Backfilling stats"):
            section = "backfill"
        elif line.startswith("Latency for") or line.startswith("Remote Procedure Call"):
            section = "other"
        m = re.match(r"^([A-Za-z][A-Za-z .()/_-]*?):\s+(-?\d+(?:\.\d+)?)\b", line)
        if m and section in ("main", "backfill"):
            key = section + "." + re.sub(r"[^a-z0-9]+", "_", m.group(1).lower()).strip("_")
            out.setdefault(key, float(m.group(2)) if "." in m.group(2) else int(m.group(2)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--duration", type=float, default=0,
                    help="churn: jobs run `sleep DURATION` (0 = burst: `sleep 3600`)")
    ap.add_argument("--seed", type=int, default=1,
                    help="burst uses SEED, churn SEED+1 (as agent_burst_benchmark)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for every placement")
    ap.add_argument("--submit-threads", type=int, default=8)
    ap.add_argument("--time-limit", default=None,
                    help="sbatch --time (minutes; default 60 for a burst, 1 for churn)")
    ap.add_argument("--dir", default=os.environ.get("SLURM_PEER_DIR")
                    or os.path.join(os.environ.get("TMPDIR", "/tmp"), "tidal-slurm-peer"))
    ap.add_argument("--out", default=None, help="result JSON (default DIR/results/MODE-TIME.json)")
    ap.add_argument("--keep", action="store_true", help="do not cancel the jobs at the end")
    args = ap.parse_args()

    env_file = os.path.join(args.dir, "env.sh")
    conf = os.path.join(args.dir, "etc", "slurm.conf")
    if not os.path.exists(env_file) or not os.path.exists(conf):
        sys.exit(f"burst.py: no running peer under {args.dir} (run start.sh first)")
    os.environ["SLURM_CONF"] = conf
    peer = {}
    with open(env_file) as f:
        for line in f:
            m = re.match(r"export (\w+)='(.*)'$", line.strip())
            if m:
                peer[m.group(1)] = m.group(2)
    nodes = int(peer["SLURM_PEER_NODES"])
    gpn = int(peer["SLURM_PEER_GPUS"])
    log_path = os.path.join(args.dir, "log", "slurmctld.log")
    workdir = os.path.join(args.dir, "work")
    os.makedirs(workdir, exist_ok=True)
    os.makedirs(os.path.join(args.dir, "results"), exist_ok=True)

    churn = args.duration > 0
    mode = "churn" if churn else "burst"
    seed = args.seed + 1 if churn else args.seed
    sleep_s = args.duration if churn else 3600
    limit = args.time_limit or ("1" if churn else "60")
    if churn and args.duration > 60 * float(limit):
        sys.exit("burst.py: --duration exceeds the time limit; pass --time-limit")

    busy = run(["squeue", "-h", "-o", "%i"]).split()
    if busy:
        sys.exit(f"burst.py: {len(busy)} jobs already in the queue; cancel them first")

    shapes = mix(args.jobs, gpn, seed)
    demand = sum(g * n for g, n in shapes)
    capacity = nodes * gpn
    gpu_seconds = demand * sleep_s if churn else 0
    if not churn and demand > capacity:
        print(f"burst.py: warning: the burst asks for {demand} GPUs, the cluster has {capacity}",
              file=sys.stderr)

    sleep_arg = ("%g" % sleep_s)

    def submit(i):
        g, n = shapes[i]
        cmd = ["sbatch", "--parsable", "--hold", "-J", f"{mode}-{i}", "-p", "train",
               "-N", str(n), "--ntasks-per-node=1", f"--gres=gpu:{g}", "-t", limit,
               "-D", workdir, "-o", "/dev/null", "-e", "/dev/null",
               "--wrap", "exec sleep " + shlex.quote(sleep_arg)]
        for attempt in range(5):
            r = subprocess.run(cmd, text=True, capture_output=True)
            if r.returncode == 0:
                return int(r.stdout.strip().split(";")[0])
            time.sleep(0.5 * (attempt + 1))
        raise RuntimeError(f"sbatch failed for job {i}: {r.stderr.strip()}")

    t_sub = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.submit_threads) as pool:
        ids = list(pool.map(submit, range(args.jobs)))
    submit_s = time.time() - t_sub
    mine = set(ids)
    print(f"burst.py: {mode}: submitted {len(ids)} held jobs ({demand} GPUs) in {submit_s:.1f} s",
          file=sys.stderr)

    subprocess.run(["sdiag", "-r"], check=False, capture_output=True)
    offset = os.path.getsize(log_path)

    t_release = time.time()
    run(["scontrol", "release", ",".join(str(i) for i in ids)])
    release_cmd_s = time.time() - t_release

    placed = {}  # job id -> (epoch seconds, "main" | "backfill")
    release_log = []
    buf = ""
    deadline = t_release + args.timeout
    with open(log_path, "r", errors="replace") as log:
        log.seek(offset)
        while len(placed) < len(mine) and time.time() < deadline:
            chunk = log.read()
            if not chunk:
                time.sleep(0.1)
                continue
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                m = LOG_LINE.match(line)
                if not m:
                    continue
                stamp, msg = m.groups()
                for rx, how in ((ALLOCATE, "main"), (BACKFILL, "backfill")):
                    j = rx.search(msg)
                    if j and int(j.group(1)) in mine and int(j.group(1)) not in placed:
                        placed[int(j.group(1))] = (log_time(stamp), how)
                j = RELEASE.search(msg)
                if j and int(j.group(1)) in mine:
                    release_log.append(log_time(stamp))
    t_done = time.time()
    sdiag = subprocess.run(["sdiag"], text=True, capture_output=True).stdout

    waits = sorted(t - t_release for t, _ in placed.values())
    all_placed = len(placed) == len(mine)
    result = {
        "mode": mode,
        "nodes": nodes,
        "gpus_per_node": gpn,
        "jobs": args.jobs,
        "seed": seed,
        "shape_counts": {f"{g}x{n}": sum(1 for s in shapes if s == (g, n)) for g, n in sorted(set(shapes))},
        "gpus_demanded": demand,
        "gpus_in_cluster": capacity,
        "sleep_s": sleep_s,
        "time_limit_min": limit,
        "submit_s": round(submit_s, 3),
        "release_cmd_s": round(release_cmd_s, 3),
        # scontrol releases the jobs one RPC at a time: placements overlap it.
        "release_logged_after_s": round(min(release_log) - t_release, 3) if release_log else None,
        "release_last_logged_after_s": round(max(release_log) - t_release, 3) if release_log else None,
        "placed": len(placed),
        "all_placed": all_placed,
        "first_placed_s": round(waits[0], 3) if waits else None,
        "p50_placed_s": round(statistics.median(waits), 3) if waits else None,
        "p90_placed_s": round(percentile(waits, 90), 3) if waits else None,
        "all_placed_s": round(waits[-1], 3) if all_placed else None,
        "jobs_per_s": round(len(waits) / waits[-1], 1) if all_placed and waits[-1] > 0 else None,
        "placed_by_main": sum(1 for _, how in placed.values() if how == "main"),
        "placed_by_backfill": sum(1 for _, how in placed.values() if how == "backfill"),
        "sdiag": parse_sdiag(sdiag),  # as sdiag prints them: cycle times in microseconds
        "measured_at_utc": datetime.datetime.fromtimestamp(t_release, datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    if churn:
        ideal = gpu_seconds / capacity
        result["gpu_seconds"] = gpu_seconds
        result["ideal_fill_s"] = round(ideal, 2)
        result["vs_ideal"] = round(waits[-1] / ideal, 2) if all_placed else None

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(t_release))
    out = args.out or os.path.join(args.dir, "results", f"{mode}-{stamp}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.splitext(out)[0] + "-sdiag.txt", "w") as f:
        f.write(sdiag)

    if not args.keep:
        # Cancel ours (churn jobs may still be running) and wait for the
        # nodes to be idle again, so the next run starts on an empty cluster.
        todo = [str(i) for i in ids]
        for k in range(0, len(todo), 500):
            subprocess.run(["scancel"] + todo[k:k + 500], capture_output=True)
        end = time.time() + 180
        while time.time() < end:
            left = set(int(x) for x in run(["squeue", "-h", "-o", "%i"]).split()) & mine
            if not left and idle_nodes() >= nodes:
                break
            time.sleep(0.5)
        else:
            print("burst.py: warning: jobs or busy nodes left after 180 s", file=sys.stderr)

    print(json.dumps(result, indent=2))
    if not all_placed:
        print(f"burst.py: only {len(placed)} of {len(mine)} placed within {args.timeout} s "
              f"(waited {t_done - t_release:.0f} s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
