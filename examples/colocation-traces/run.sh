#!/usr/bin/env bash
# Runs the real-trace co-location example (README.md) in static, reactive and
# predictive mode and compares them:
#
#   DATA=/path/to/traces examples/colocation-traces/run.sh
#
# DATA is the folder holding alibaba-genai-serving-v2026/lora_request_trace.csv
# and philly-pollux/{philly.csv,philly_vc_nodes.csv} (downloaded from their
# publishers; the GenAI trace may not be committed here). Optional: TIDAL (the
# binary, default build/rel/tidal, else build/tidal), OUT (default
# out/colocation-traces), DAYS (1..5, default 5), ON_REQUEST (seconds every
# training job takes to save when a notice asks, docs/colocation.md
# "Checkpoint on request"; default none: they save every 30 minutes only).
# Writes OUT/{static,reactive,
# predictive}/, OUT/history.csv (the forecaster's load history: the GenAI week
# before the window) and OUT/compare.html, and prints the comparison table.
# Run from the repository root.
set -euo pipefail

: "${DATA:?set DATA to the folder with alibaba-genai-serving-v2026/ and philly-pollux/}"
EXAMPLE=$(dirname "$0")
TIDAL=${TIDAL:-}
if [[ -z "$TIDAL" ]]; then
  if [[ -x build/rel/tidal ]]; then TIDAL=build/rel/tidal; else TIDAL=build/tidal; fi
fi
OUT=${OUT:-out/colocation-traces}
DAYS=${DAYS:-5}
if ! [[ "$DAYS" =~ ^[1-5]$ ]]; then
  echo "run.sh: DAYS must be 1..5 (the window has 5 days of both traces), got '$DAYS'" >&2
  exit 2
fi
LORA=$DATA/alibaba-genai-serving-v2026/lora_request_trace.csv
PHILLY=$DATA/philly-pollux/philly.csv
VC_NODES=$DATA/philly-pollux/philly_vc_nodes.csv
for f in "$LORA" "$PHILLY" "$VC_NODES"; do
  [[ -r "$f" ]] || { echo "run.sh: cannot read $f (is DATA=$DATA right?)" >&2; exit 2; }
done

# The GenAI window: trace offsets from its first request (2024-11-15
# 16:57:50); 1,364,530 s = 2024-12-01 12:00, the daily trough; 5 days.
# History: the 7 days before it.
LORA_START=1364530
WEEK=604800
SPAN=$((DAYS * 86400))
# Philly: 3,590,959 s after its first job (2017-09-04 10:30:41) =
# 2017-10-16 00:00, a Monday; the same number of days.
PHILLY_START=3590959

# One load trace per service: the filter and the shaping (10-minute windows,
# 70-minute centred average, x80; README.md says why), then the window keys
# ($1 = start_s, $2 = span_s).
services() {
  local shape="window_s=600,smooth=7,load_scale=80,start_s=$1,span_s=$2"
  echo "sd-m0002=genai_lora:$LORA,model=M0002,request_type=TXT_2_IMG,$shape"
  echo "sd-m0001=genai_lora:$LORA,model=M0001,request_type=TXT_2_IMG,$shape"
  echo "sd-m0004=genai_lora:$LORA,model=M0004|M0010|M0003,request_type=TXT_2_IMG,$shape"
  echo "sd-edit=genai_lora:$LORA,request_type=IMG_2_IMG|INPAINTING,$shape"
}

mkdir -p "$OUT"
mapfile -t history < <(services $((LORA_START - WEEK)) $WEEK)
"$TIDAL" sim import-load "${history[@]}" --out "$OUT/history.csv"

mapfile -t load < <(services $LORA_START $SPAN)
load_args=()
for l in "${load[@]}"; do load_args+=(--load-trace "$l"); done
for mode in static reactive predictive; do
  echo "== $mode"
  "$TIDAL" sim --cluster "$EXAMPLE/cluster.yaml" --policy "$EXAMPLE/policy.yaml" \
    --workload "$EXAMPLE/workloads.yaml" "${load_args[@]}" --load-history "$OUT/history.csv" \
    --trace "philly:$PHILLY,project=research,queue=vc,vc_nodes=$VC_NODES,start_s=$PHILLY_START,span_s=$SPAN,checkpoint_interval_s=1800${ON_REQUEST:+,checkpoint_on_request_s=$ON_REQUEST}" \
    --end-s "$SPAN" --colocation "$mode" --seed 1 --out "$OUT/$mode"
done
echo
"$TIDAL" sim compare "$OUT/static" "$OUT/reactive" "$OUT/predictive" --out "$OUT/compare.html"
