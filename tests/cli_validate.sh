#!/usr/bin/env bash
# cli_validate.sh - `soapflow validate` on lenet5 with 2 ranks: the structure of
# its output, not the size of its errors (the machine is noisy). One launch
# prints JSON, writes the traces and the plot; the other prints the tables,
# with a costs file that misses tasks (one warning line) and a strategy file
# in the list; then each sync scheme, and partial sums (a small GPT under
# megatron and megatron-sp, with a row-parallel fc2, and random strategies with
# --reduce-splits). Usage errors come
# before MPI and need no mpirun.
#
# Run by CTest as: bash tests/cli_validate.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_validate.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-validate.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
# OpenMPI's own allocations at exit read as leaks under AddressSanitizer.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"
command -v python3 >/dev/null 2>&1 || fail "no python3 to read the JSON"
MPI="timeout 120 mpirun -n 2"
SMALL=(--model lenet5 --batch 16 --iters 3 --warmup 1)

# ---- help and usage errors -------------------------------------------------------
run help "$SF" validate --help
expect_ok help
grep -q 'usage: mpirun -n P soapflow validate' "$TMP/help.out" || fail "validate --help: no usage"
run nolist "$SF" validate --model lenet5
expect_usage nolist
run badrandom "$SF" validate --model lenet5 --strategies data,random:0
expect_usage badrandom
run empty "$SF" validate --model lenet5 --strategies data,,model
expect_usage empty
run badsync "$SF" validate --model lenet5 --strategies data --sync sometimes
expect_usage badsync

# ---- launch 1: four strategies, JSON, traces side by side, the plot ----------------------
run json $MPI "$SF" validate "${SMALL[@]}" --strategies data,model,random:1,search:40 --json \
    --trace-dir "$TMP/traces" --svg "$TMP/plot.svg"
expect_ok json
python3 - "$TMP/json.out" <<'EOF' || fail "validate --json: $(cat "$TMP/json.err")"
import json, math, sys
j = json.load(open(sys.argv[1]))
for k in ("model", "machine", "ranks", "batch", "cost_model", "sync", "iters", "warmup",
          "rounds", "strategies", "median_abs_error_pct", "worst", "kendall_tau",
          "fastest_steps"):
    assert k in j, "no key " + k
assert j["ranks"] == 2 and j["machine"] == "cpu[2]" and j["model"] == "lenet5", j
assert j["iters"] == 3 and j["rounds"] == 3, j  # --rounds 4 shrinks to one step a round
rows = j["strategies"]
assert [r["name"] for r in rows] == ["data", "model", "random1", "search:40"], rows
for i, r in enumerate(rows):
    assert r["index"] == i + 1
    for k in ("predicted_ms", "measured_ms", "measured_min_ms", "error_pct"):
        assert isinstance(r[k], (int, float)) and math.isfinite(r[k]), (r["name"], k, r[k])
    assert r["predicted_ms"] > 0 and 0 < r["measured_min_ms"] <= r["measured_ms"]
    assert abs(r["error_pct"] - 100 * (r["predicted_ms"] / r["measured_ms"] - 1)) < 1e-6
    assert r["critical_device"] in (0, 1)
    for kind in ("compute", "transfer", "sync", "update", "copy", "idle"):
        b = r["breakdown"][kind]
        assert math.isfinite(b["predicted_ms"]) and b["predicted_ms"] >= 0, (r["name"], kind)
        assert math.isfinite(b["measured_ms"]) and b["measured_ms"] >= 0, (r["name"], kind)
    assert r["breakdown"]["compute"]["measured_ms"] > 0
errs = sorted(abs(r["error_pct"]) for r in rows)
assert abs(j["median_abs_error_pct"] - (errs[1] + errs[2]) / 2) < 1e-6
assert j["worst"]["name"] in [r["name"] for r in rows]
assert abs(abs(j["worst"]["error_pct"]) - errs[-1]) < 1e-6
assert j["kendall_tau"] is None or -1 <= j["kendall_tau"] <= 1
models = ("overlap/ring", "bulk/ring", "overlap/ps", "bulk/ps", "overlap/hierarchical",
          "bulk/hierarchical")
assert sorted(j["sync_models"]) == sorted(models), j["sync_models"]
for r in rows:
    alt = r["predicted_ms_by_sync_model"]
    assert all(math.isfinite(alt[k]) and alt[k] > 0 for k in models), alt
    assert abs(alt["overlap/ring"] - r["predicted_ms"]) <= 1e-9 * r["predicted_ms"], alt
EOF
for i in 1-data 2-model 3-random1 4-search_40; do
    for side in predicted measured; do
        f="$TMP/traces/$i.$side.json"
        valid_json "$f" || fail "validate --trace-dir: $f missing or not JSON"
        grep -q '"traceEvents"' "$f" || fail "$f: no traceEvents"
    done
done
[ "$(find "$TMP/traces" -type f | wc -l)" -eq 8 ] || fail "validate --trace-dir: not 8 files"
grep -q '^<svg' "$TMP/plot.svg" || fail "validate --svg: no SVG"
[ "$(grep -c '<circle' "$TMP/plot.svg")" -eq 4 ] || fail "validate --svg: not a point a strategy"
grep -q 'y = x' "$TMP/plot.svg" || fail "validate --svg: no y = x line"

# ---- launch 2: the tables, a strategy file, a costs file that misses tasks -------------
"$SF" simulate --model lenet5 --batch 16 --machine 'cpu[2]' --strategy owt \
    --save-strategy "$TMP/mine.json" >/dev/null 2>&1 || fail "simulate --save-strategy failed"
# one-part tiles only: every split task of the strategies below is missing
"$SF" profile --model lenet5 --batch 16 --machine 'cpu[2]' --max-devices 1 --reps 1 \
    --warmup 0 --out "$TMP/costs.json" >/dev/null 2>&1 || fail "profile failed"
run text $MPI "$SF" validate "${SMALL[@]}" --strategies "data,$TMP/mine.json,model,single" \
    --costs "$TMP/costs.json"
expect_ok text
out="$TMP/text.out"
[ "$(grep -c '^[1-4]  ' "$out")" -eq 8 ] || fail "validate: want a row a strategy in each table: $(cat "$out")"
for name in data mine model single; do
    [ "$(grep -cE "^[1-4]  +$name " "$out")" -eq 2 ] || fail "validate: no rows for $name"
done
grep -q '^median |error| [0-9.]*%, worst .*, Kendall tau' "$out" || fail "validate: no summary line"
grep -q "^the simulator's sync models against the same measurements: overlap/ring" "$out" ||
    fail "validate: no line for the sync models"
grep -q 'profiled costs' "$out" || fail "validate: does not say the costs are profiled"
! grep -q 'nan\|inf' "$out" || fail "validate: a figure is not finite: $(cat "$out")"
[ "$(grep -c 'warning: .*costs.json does not cover' "$TMP/text.err")" -eq 1 ] ||
    fail "validate: want one warning about the costs file, got: $(cat "$TMP/text.err")"
# (on a host of one core, 2 ranks also get the warning that they share it)
[ "$(grep '^soapflow: ' "$TMP/text.err" | grep -vc 'ranks on [0-9]* cores')" -eq 1 ] ||
    fail "validate: want nothing on stderr but the warning: $(cat "$TMP/text.err")"

# ---- launch 3: the runtime runs each sync scheme the simulator prices -----------------
for scheme in ps hierarchical; do
    run "scheme_$scheme" $MPI "$SF" validate "${SMALL[@]}" --strategies data,model \
        --sync-scheme "$scheme" --json
    expect_ok "scheme_$scheme"
    python3 - "$TMP/scheme_$scheme.out" "$scheme" <<'EOF' || fail "validate --sync-scheme $scheme"
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["sync_scheme"] == sys.argv[2], j.get("sync_scheme")
for r in j["strategies"]:
    assert math.isfinite(r["measured_ms"]) and r["measured_ms"] > 0, r
EOF
done

# ---- launch 4: partial sums (a small GPT: the megatron baselines, a row-parallel fc2, -----
# random strategies with reduce splits)
GPT=(--model gpt --batch 4 --layers 2 --hidden 64 --heads 4 --seq-len 16 --vocab 32)
"$SF" simulate "${GPT[@]}" --machine 'cpu[2]' --strategy data --save-strategy "$TMP/gdata.json" \
    >/dev/null 2>&1 || fail "simulate --save-strategy (gpt) failed"
# fc1 and gelu split on their features, fc2 on its inputs (partial sums, reduce-scattered
# into the data-parallel add that follows), the rest data parallel
python3 - "$TMP/gdata.json" "$TMP/rowpar.json" <<'EOF' || fail "cannot write the row-parallel strategy"
import json, sys
j = json.load(open(sys.argv[1]))
for name, c in j["ops"].items():
    if name.endswith("mlp.fc1") or name.endswith("mlp.gelu"):
        c["degrees"] = [1, 1, 2]
    if name.endswith("mlp.fc2"):
        c["degrees"] = [1, 1, 1, 2]
json.dump(j, open(sys.argv[2], "w"))
EOF
# the megatron baselines split the tied wte and LM head on the vocabulary, and the loss
# after the column-parallel head on its classes, which the runtime does not run yet: their
# files with the loss on the samples instead (the classes gathered)
mkdir -p "$TMP/mega"
for b in megatron megatron-sp; do
    "$SF" simulate "${GPT[@]}" --machine 'cpu[2]' --strategy "$b" \
        --save-strategy "$TMP/mega/$b.json" >/dev/null 2>&1 || fail "simulate -s $b (gpt) failed"
    python3 - "$TMP/mega/$b.json" <<'EOF' || fail "cannot gather the classes of $b"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ops"]["wte"]["degrees"][3] == 2 and j["ops"]["lm_head"]["degrees"][2] == 2, j["ops"]
loss = j["ops"]["loss"]
loss["degrees"] = [2] + [1] * (len(loss["degrees"]) - 1)
loss["devices"] = [0, 1]
json.dump(j, open(sys.argv[1], "w"))
EOF
done
run psum $MPI "$SF" validate "${GPT[@]}" --iters 2 --warmup 1 --reduce-splits --json \
    --strategies "$TMP/mega/megatron.json,$TMP/mega/megatron-sp.json,$TMP/rowpar.json,random:2" \
    --trace-dir "$TMP/ptraces"
expect_ok psum
python3 - "$TMP/psum.out" <<'EOF' || fail "validate with partial sums: $(cat "$TMP/psum.err")"
import json, math, sys
j = json.load(open(sys.argv[1]))
names = [r["name"] for r in j["strategies"]]
assert names == ["megatron", "megatron-sp", "rowpar", "random1", "random2"], names
for r in j["strategies"]:
    assert math.isfinite(r["measured_ms"]) and r["measured_ms"] > 0, r
EOF
# fc2's parts hold distinct weights, so its collective is the partial sums' reduction
grep -q '"allreduce h0.mlp.fc2"' "$TMP/ptraces/3-rowpar.measured.json" ||
    fail "validate: no reduction of fc2's partial sums in the measured trace"
"$SF" validate --help | grep -q -- "--reduce-splits" || fail "validate --help: no --reduce-splits"

echo "cli_validate: ok"
