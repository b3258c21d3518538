#!/usr/bin/env bash
# cli_search.sh - `soapflow search` as a user meets it: the JSON it promises, a
# best strategy that `simulate` reads back to the same time, reproducible runs
# with --iters and --seed, and clean errors.
#
# Run by CTest as: bash tests/cli_search.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_search.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-search.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

# ---- the JSON interface, and --out read back by simulate -----------------
run s1 "$SF" search --model lenet5 --machine 'p100-4x4[4]' --iters 300 --seed 3 --json \
    --out "$TMP/best.json" --trace "$TMP/best.trace.json" --svg "$TMP/best.svg"
expect_ok s1
for key in baselines optcnn_ms best_ms speedup_vs_data iterations seconds strategy_file; do
    grep -q "\"$key\":" "$TMP/s1.out" || fail "search --json: no \"$key\""
done
for b in data model owt expert; do
    grep -q "\"$b\":" "$TMP/s1.out" || fail "search --json: no baseline \"$b\""
done
[ -s "$TMP/best.json" ] || fail "search --out: no strategy file"
grep -q traceEvents "$TMP/best.trace.json" || fail "search --trace: no traceEvents"
head -c 200 "$TMP/best.svg" | grep -q '<svg\|<?xml' || fail "search --svg: not an SVG"
best=$(json_num "$TMP/s1.out" best_ms)
data=$(json_num "$TMP/s1.out" data)
run sim "$SF" simulate --model lenet5 --machine 'p100-4x4[4]' --strategy "$TMP/best.json" --json
expect_ok sim
iter=$(json_num "$TMP/sim.out" iter_ms)
[ "$iter" = "$best" ] || fail "simulate --strategy best.json: iter_ms $iter, search said $best"
awk -v b="$best" -v d="$data" 'BEGIN { exit !(b <= d) }' ||
    fail "search: best $best ms is slower than data parallelism $data ms"

# ---- FlexFlow's Legion-runtime sync model: search and simulate agree under it too --
run ps "$SF" search --model lenet5 --machine 'p100-4x4[4]' --iters 200 --seed 2 --json \
    --sync bulk --sync-scheme ps --out "$TMP/ps.json"
expect_ok ps
grep -q '"sync_scheme": *"ps"' "$TMP/ps.out" || fail "search --sync-scheme ps: not reported"
run ps_sim "$SF" simulate --model lenet5 --machine 'p100-4x4[4]' --strategy "$TMP/ps.json" \
    --json --sync bulk --sync-scheme ps
expect_ok ps_sim
[ "$(json_num "$TMP/ps_sim.out" iter_ms)" = "$(json_num "$TMP/ps.out" best_ms)" ] ||
    fail "search/simulate under --sync bulk --sync-scheme ps disagree"

# ---- the same seed and --iters give the same answer ----------------------
run s2 "$SF" search --model lenet5 --machine 'p100-4x4[4]' --iters 300 --seed 3 --json \
    --out "$TMP/best2.json"
expect_ok s2
[ "$(json_num "$TMP/s2.out" best_ms)" = "$best" ] || fail "search: same seed, different best_ms"
cmp -s "$TMP/best.json" "$TMP/best2.json" || fail "search: same seed, different strategy file"

# ---- each algorithm alone, and the text table ----------------------------
run optcnn "$SF" search --model alexnet --batch 64 --machine 'p100-4x4[4]' --algo optcnn
expect_ok optcnn
grep -q '^optcnn' "$TMP/optcnn.out" || fail "search --algo optcnn: no optcnn row"
grep -q 'nodes left after elimination (exact)' "$TMP/optcnn.out" ||
    fail "search --algo optcnn: alexnet should reduce exactly"
run mcmc "$SF" search --model rnnlm --seq-len 8 --machine 'p100-4x4[4]' --algo mcmc --iters 200
expect_ok mcmc
grep -q '^mcmc' "$TMP/mcmc.out" || fail "search --algo mcmc: no mcmc row"

# ---- memory: the best strategy over the iteration (issue 26) -------------
# what fits says nothing; what does not says by how much and what its peak holds
grep -q 'does not fit' "$TMP/mcmc.out" && fail "search: rnnlm on 4 P100s said it does not fit"
run miss "$SF" search --model vgg16 --batch 4096 --machine 'p100-4x4[2]' --algo mcmc --iters 30
expect_ok miss
grep -q '^does not fit: device [0-9]* needs .* over the .* it may use (10% kept free); the peak holds activations' \
    "$TMP/miss.out" || fail "search: vgg16 at batch 4096 on 2 P100s: no line saying how much it misses"
run miss_json "$SF" search --model vgg16 --batch 4096 --machine 'p100-4x4[2]' --algo mcmc \
    --iters 30 --json --memory-headroom 0
expect_ok miss_json
grep -q '"best_fits": *false' "$TMP/miss_json.out" || fail "search --json: vgg16 batch 4096 fits"
grep -q '"best_peak_live_bytes"' "$TMP/miss_json.out" || fail "search --json: no best_peak_live_bytes"
run headroom_bad "$SF" search --model lenet5 --memory-headroom -1
expect_usage headroom_bad

# ---- --beta is a real number, as FlexFlow's (issue 29, item 10) -----------
run beta_real "$SF" search --model lenet5 --machine 'p100-4x4[4]' --iters 100 --beta 0.5 --json
expect_ok beta_real
run beta_exp "$SF" search --model lenet5 --machine 'p100-4x4[4]' --iters 100 --beta 2.5e3 \
    --anneal 10 --json
expect_ok beta_exp
for bad in -1 inf nan 0x10 1e10 5x ''; do
    run bad_beta "$SF" search --model lenet5 --iters 10 --beta "$bad"
    expect_usage bad_beta
    grep -q -- '--beta' "$TMP/bad_beta.err" || fail "search --beta '$bad': message does not name --beta"
done
run bad_anneal "$SF" search --model lenet5 --iters 10 --anneal -2
expect_usage bad_anneal

# ---- errors: one line, non-zero, no crash, no file left ------------------
run bad_algo "$SF" search --model lenet5 --algo nope
expect_error bad_algo
run bad_budget "$SF" search --model lenet5 --budget 10parsecs
expect_error bad_budget
run both "$SF" search --model lenet5 --budget 5s --iters 10
expect_error both
run no_model "$SF" search --machine p100-4x4
expect_error no_model
run bad_machine "$SF" search --model lenet5 --machine 'p100-4x4[5]'
expect_error bad_machine
run bad_costs "$SF" search --model lenet5 --costs "$TMP/missing.json" --iters 10
expect_error bad_costs
grep -q missing.json "$TMP/bad_costs.err" || fail "search --costs: message does not name the file"
run bad_out "$SF" search --model lenet5 --machine 'p100-4x4[4]' --iters 10 \
    --out "$TMP/no/such/dir/best.json"
expect_error bad_out
ls "$TMP"/no 2>/dev/null && fail "search --out: left something behind"

echo "cli_search: all checks passed"
