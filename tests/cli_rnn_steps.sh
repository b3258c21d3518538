#!/usr/bin/env bash
# cli_rnn_steps.sh - the profiled model prices recurrences step by step
# (docs/cost-model.md, "Recurrent operators step by step"): an LSTM profiled in
# chunks of one step answers a simulation of longer chunks on a machine whose
# device has rnn_per_step, with no analytic fallback; without the flag the
# longer chunks are not measured and the warning names lstm.
#
# Run by CTest as: bash tests/cli_rnn_steps.sh <path-to-soapflow> <source-dir>
# Checks behaviour, never wall time.
set -u

SF=${1:?usage: cli_rnn_steps.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-rnnsteps.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1

. "$(dirname "$0")/lib/cli.sh"

machine() { # machine FILE true|false: two CPU ranks, the cpu preset's figures
    cat >"$1" <<JSON
{"name": "cpu-steps", "nodes": 1, "devices_per_node": 2,
 "device": {"name": "cpu-rank", "peak_tflops": {"fp32": 0.05}, "mem_bw_GBps": 10.0,
            "mem_GB": 4.0, "cost": {"rnn_per_step": $2}},
 "intra": {"topology": "shm", "bandwidth_GBps": 5.0, "latency_us": 1.0},
 "inter": {"nics_per_node": 1, "bandwidth_GBps": 1.25, "latency_us": 25.0}}
JSON
}
machine "$TMP/steps.json" true
machine "$TMP/flat.json" false
MODEL="--model rnnlm --batch 8 --seq-len 4 --hidden 64 --vocab 100"
COSTS="$TMP/costs.json"

# ---- profile one-step chunks ---------------------------------------------
# shellcheck disable=SC2086
run prof "$SF" profile $MODEL --chunk 1 --machine "$TMP/steps.json" --reps 1 --warmup 0 \
    --out "$COSTS" --json
expect_ok prof
grep -q '"key": "lstm|hidden=64|tile=4x1x64|in=4x1x64"' "$COSTS" ||
    fail "profile --chunk 1: no one-step lstm entry of 4 samples"
grep -q 'lstm|[^"]*tile=[0-9]*x4x64' "$COSTS" && fail "profile --chunk 1: a 4-step lstm entry"

# ---- simulate chunks of four steps ----------------------------------------
# shellcheck disable=SC2086
run steps "$SF" simulate $MODEL --chunk 4 --machine "$TMP/steps.json" --strategy data \
    --costs "$COSTS" --json
expect_ok steps
grep -q "not measured" "$TMP/steps.err" &&
    fail "rnn_per_step: the 4-step lstm fell back to the analytic model: $(cat "$TMP/steps.err")"
# shellcheck disable=SC2086
run flat "$SF" simulate $MODEL --chunk 4 --machine "$TMP/flat.json" --strategy data \
    --costs "$COSTS" --json
expect_ok flat
grep -q "not measured, analytic estimate used: lstm" "$TMP/flat.err" ||
    fail "without rnn_per_step: no warning naming lstm: $(cat "$TMP/flat.err")"
[ "$(json_num "$TMP/steps.out" compute_ms)" != "$(json_num "$TMP/flat.out" compute_ms)" ] ||
    fail "the step-by-step answer is the analytic one"

echo "cli_rnn_steps: all checks passed"
