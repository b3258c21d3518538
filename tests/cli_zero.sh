#!/usr/bin/env bash
# cli_zero.sh - ZeRO stages and the baselines that set them (issue 26, item 2):
# simulate of fsdp / zero1 / zero2 under bf16 and Adam keeps less of the
# weights per device at each stage and, for fsdp, gathered weights on the
# timeline; search on a machine where data parallelism does not fit answers
# with a sharded strategy that fits, whose file (with "zero") simulates to
# search's time; bad options and a stage on an operator without weights are
# one line; train under mpirun with
# fsdp and Adam for 10 steps is bit for bit 5 + --resume 5 (the sharded
# state is gathered whole into the checkpoint) and its final loss is data
# parallelism's within 1e-4.
#
# Run by CTest as: bash tests/cli_zero.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_zero.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-zero.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"

gpt=(--model gpt --layers 2 --hidden 256 --heads 4 --seq-len 64 -b 16 --machine "dgx-h100[16]"
    --dtype bf16 --optimizer adam)
# ---- each stage keeps less of the weights ----------------------------------------
prev=
for st in data zero1 zero2 fsdp; do
    run "s$st" "$SF" simulate "${gpt[@]}" -s "$st" --json
    expect_ok "s$st"
    w=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));
print(int(d["per_device"][0]["live_peak_kinds"]["weights"]))' "$TMP/s$st.out") ||
        fail "simulate -s $st --json: no per-device weights: $(head -c 300 "$TMP/s$st.out")"
    [ -z "$prev" ] || [ "$w" -lt "$prev" ] || fail "$st keeps $w bytes of weights, not under $prev"
    prev=$w
done
run text "$SF" simulate "${gpt[@]}" -s fsdp
expect_ok text
grep -q "gathered weights" "$TMP/text.out" || fail "simulate -s fsdp: no gathered weights line"

# ---- search where data parallelism does not fit: a sharded answer, its file -------
"$SF" machines dgx-h100 --json | python3 -c '
import json, sys
m = json.load(sys.stdin)[0]
m.update(name="small-h100", nodes=2)
m["device"]["mem_GB"] = 0.15
json.dump(m, open(sys.argv[1], "w"))' "$TMP/small.json" || fail "could not write a machine file"
sg=("${gpt[@]}")
sg[${#sg[@]} - 5]="$TMP/small.json" # --machine's value
run sr "$SF" search "${sg[@]}" --iters 60 --pipeline off --out "$TMP/best.json" --json
expect_ok sr
python3 - "$TMP/sr.out" <<'PY' || fail "search: $(head -c 600 "$TMP/sr.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["data_fits"] is False, "data parallelism fits"
assert "sharded" in d and d["sharded"]["fits"], "no fitting sharded baseline"
assert d["best_fits"], "the best does not fit"
PY
grep -q '"zero": [1-3]' "$TMP/best.json" || fail "search --out: no ZeRO stage in the answer"
run sim "$SF" simulate "${sg[@]}" -s "$TMP/best.json" --json
expect_ok sim
python3 - "$TMP/sr.out" "$TMP/sim.out" <<'PY' || fail "the file does not simulate to search's time"
import json, sys
a = json.load(open(sys.argv[1]))["best_ms"]
b = json.load(open(sys.argv[2]))["iter_ms"]
sys.exit(0 if a == b else 1)
PY

# ---- bad options: one line each --------------------------------------------------
for bad in "fsdp:zero=9" "data:recompute=most" "zero1:tp=2" "megatron:tp=3,zero=1"; do
    run bad "$SF" simulate "${gpt[@]}" -s "$bad"
    expect_error bad
done
sed 's/"degrees"/"zero": 1, "degrees"/' "$TMP/best.json" >"$TMP/badz.json"
run badz "$SF" simulate "${sg[@]}" -s "$TMP/badz.json"
expect_error badz
grep -q "badz.json" "$TMP/badz.err" || fail "a zero stage on an operator without weights: $(cat "$TMP/badz.err")"

# ---- train with fsdp and Adam on 2 ranks: resume is exact, data's loss -----------
small=(--model mlp --mlp-sizes 784,64,10 --data synthetic --batch 16 --seed 3 --optimizer adam
    --machine "cpu[2]")
mp=(timeout 120 mpirun -n 2 "$SF" train "${small[@]}")
run full "${mp[@]}" -s fsdp --iters 10 --save "$TMP/full.st" --json
expect_ok full
run half "${mp[@]}" -s fsdp --iters 5 --save "$TMP/half.st"
expect_ok half
run res "${mp[@]}" -s fsdp --iters 5 --resume "$TMP/half.st" --save "$TMP/res.st"
expect_ok res
cmp -s "$TMP/full.st" "$TMP/res.st" || fail "train -s fsdp: 5 + resume 5 is not 10"
run data "${mp[@]}" -s data --iters 10 --json
expect_ok data
python3 - "$TMP/full.out" "$TMP/data.out" <<'PY' || fail "fsdp's last loss is not data parallelism's"
import json, sys
a, b = (json.load(open(f))["loss_last"] for f in sys.argv[1:3])
sys.exit(0 if abs(a - b) <= 1e-4 * max(1.0, abs(b)) else 1)
PY
echo "cli_zero: ok"
