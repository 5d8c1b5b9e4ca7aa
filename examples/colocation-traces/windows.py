#!/usr/bin/env python3
"""Issue #10's claims over several windows of the real-trace example.

One 5-day run of run.sh is one draw: on this trace a small change (or none,
in another week) moves training wait and lost work by 10-20 % in either mode,
because both modes queue near saturation at the same inference peaks. This
runs reactive and predictive on several 3-day GenAI windows (each with the
week before as the forecaster's history) against the same Philly window, and
prints each window and the totals: predictive/reactive for the summed wait
and lost work, and missed SLO minutes per 10,000 service-minutes.

  DATA=/path/to/traces examples/colocation-traces/windows.py [--tidal BIN]
      [--out DIR] [--offsets 0,2,4,6,8] [--days 3] [--on-request SECONDS]

Offsets are days before run.sh's window start (2024-12-01 12:00 trace time).
Run from the repository root.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

DAY = 86400
WEEK = 7 * DAY
LORA_START = 1364530    # run.sh's window: 2024-12-01 12:00, the daily trough
PHILLY_START = 3590959  # 2017-10-16 00:00, a Monday


def services(lora, start, span):
    shape = f"window_s=600,smooth=7,load_scale=80,start_s={start},span_s={span}"
    return [f"sd-m0002=genai_lora:{lora},model=M0002,request_type=TXT_2_IMG,{shape}",
            f"sd-m0001=genai_lora:{lora},model=M0001,request_type=TXT_2_IMG,{shape}",
            f"sd-m0004=genai_lora:{lora},model=M0004|M0010|M0003,request_type=TXT_2_IMG,{shape}",
            f"sd-edit=genai_lora:{lora},request_type=IMG_2_IMG|INPAINTING,{shape}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tidal", default="build/rel/tidal" if os.path.exists("build/rel/tidal") else "build/tidal")
    ap.add_argument("--out", default="out/colocation-traces-windows")
    ap.add_argument("--offsets", default="0,2,4,6,8")
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--on-request", type=float, default=0,
                    help="seconds the training jobs take to save when a notice asks (0: they save only every 30 min)")
    args = ap.parse_args()
    data = os.environ.get("DATA")
    if not data:
        sys.exit("windows.py: set DATA to the folder with alibaba-genai-serving-v2026/ and philly-pollux/")
    example = os.path.dirname(os.path.abspath(__file__))
    lora = f"{data}/alibaba-genai-serving-v2026/lora_request_trace.csv"
    philly = f"{data}/philly-pollux/philly.csv"
    vc_nodes = f"{data}/philly-pollux/philly_vc_nodes.csv"
    offsets = [int(x) for x in args.offsets.split(",")]
    span = args.days * DAY

    def history(offset):
        path = f"{args.out}/{offset}/history.csv"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        start = LORA_START - offset * DAY
        subprocess.run([args.tidal, "sim", "import-load", *services(lora, start - WEEK, WEEK),
                        "--out", path], check=True, capture_output=True)
        return path

    def run(offset, mode, hist):
        out = f"{args.out}/{offset}/{mode}"
        cmd = [args.tidal, "sim", "--cluster", f"{example}/cluster.yaml",
               "--policy", f"{example}/policy.yaml", "--workload", f"{example}/workloads.yaml"]
        for s in services(lora, LORA_START - offset * DAY, span):
            cmd += ["--load-trace", s]
        cmd += ["--load-history", hist,
                "--trace", f"philly:{philly},project=research,queue=vc,vc_nodes={vc_nodes},"
                           f"start_s={PHILLY_START},span_s={span},checkpoint_interval_s=1800"
                           + (f",checkpoint_on_request_s={args.on_request:g}" if args.on_request > 0 else ""),
                "--end-s", str(span), "--colocation", mode, "--seed", "1", "--out", out]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(f"{out}/summary.json") as f:
            s = json.load(f)
        return {"slo": s["inference"]["slo_attainment"],
                "ttc": s["inference"]["time_to_capacity_p99_s"],
                "wait": s["training"]["queue_wait_mean_s"],
                "lost": s["training"]["lost_gpu_hours"]}

    hists = {o: history(o) for o in offsets}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {(o, m): pool.submit(run, o, m, hists[o]) for o in offsets for m in ("reactive", "predictive")}
        res = {k: f.result() for k, f in futures.items()}

    print("offset_days  slo r/p          ttc_p99 r/p  wait_mean_s r/p  lost_gpu_h r/p")
    for o in offsets:
        r, p = res[(o, "reactive")], res[(o, "predictive")]
        print(f"{o:>11}  {r['slo']:.4f}/{p['slo']:.4f}  {r['ttc']:>4.0f}/{p['ttc']:<4.0f}    "
              f"{r['wait']:>6.0f}/{p['wait']:<6.0f}    {r['lost']:>5.1f}/{p['lost']:<5.1f}")

    def total(key, mode):
        return sum(res[(o, mode)][key] for o in offsets)

    def missed(mode):
        return sum(1 - res[(o, mode)]["slo"] for o in offsets) / len(offsets) * 1e4

    print(f"predictive/reactive: wait x{total('wait', 'predictive') / total('wait', 'reactive'):.2f}, "
          f"lost work x{total('lost', 'predictive') / total('lost', 'reactive'):.2f}; "
          f"missed SLO minutes per 10,000: reactive {missed('reactive'):.1f}, predictive {missed('predictive'):.1f}; "
          f"time to capacity p99 below reactive's in "
          f"{sum(res[(o, 'predictive')]['ttc'] < res[(o, 'reactive')]['ttc'] for o in offsets)} of {len(offsets)}")


if __name__ == "__main__":
    main()
