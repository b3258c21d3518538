#!/usr/bin/env bash
# memory_table.sh [SOAPFLOW] - issue 26's models that data parallelism cannot fit:
# GPT of hidden 4096 (24 and 48 layers) on dgx-h100 (64 H100s) and GPT-3 (175 B)
# on a 1024-H100 machine file (bench/h100-1024.json), seq 2048, bf16 with Adam.
# For each: `soapflow search` (its wall time), the fastest fitting strategy it
# found with its time and peak, and data parallelism's time and peak; a markdown
# table for bench/RESULTS.md. BUDGET (default 30s) is each search's MCMC budget.
set -eu
SF=${1:-build/soapflow}
BUDGET=${BUDGET:-30s}
here=$(cd "$(dirname "$0")" && pwd)
row() {
    local label=$1
    shift
    local t0 t1 out
    t0=$(date +%s.%N)
    out=$("$SF" search "$@" --seq-len 2048 --dtype bf16 --optimizer adam --budget "$BUDGET" --json)
    t1=$(date +%s.%N)
    python3 - "$label" "$t0" "$t1" "$out" <<'PY'
import json, sys
label, t0, t1, d = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
gib = 2.0 ** 30
print("| %s | %s | %s | %.1f ms | %.1f GiB | %.1f ms | %.1f GiB (%s) | %.0f s |" % (
    label, d["best"], "yes" if d["best_fits"] else "NO", d["best_ms"],
    d["best_peak_live_bytes"] / gib, d["baselines"]["data"],
    d["data_peak_mem_bytes"] / gib, "fits" if d["data_fits"] else "does not fit",
    t1 - t0))
PY
}
echo "| model | fastest fitting found | fits | its iteration | its peak (timeline) | data parallel | data's peak | search wall |"
echo "|---|---|---|---|---|---|---|---|"
row "GPT 24 x 4096 (5.25 B), batch 64, dgx-h100" --model gpt --layers 24 --hidden 4096 --heads 32 -b 64 --machine dgx-h100
row "GPT 48 x 4096 (10 B), batch 64, dgx-h100" --model gpt --layers 48 --hidden 4096 --heads 32 -b 64 --machine dgx-h100
row "GPT-3 175 B, batch 1536, 1024 H100" --model gpt3 -b 1536 --machine "$here/h100-1024.json"
