#!/usr/bin/env bash
# cli_pipeline_train.sh - the runtime executes pipelines (issue 27, deliverable 6):
# a strategy file with a "pipeline" (2 stages, 1F1B, 4 micro-batches) on 2
# MPI ranks: `validate` predicts and measures it beside data parallelism (and
# writes the measured trace, whose tasks name the micro-batch copies); `train`
# with it for 10 steps is bit for bit 5 + --resume 5, its losses and test
# accuracy are data parallelism's within 1e-4; a pipeline that does not fit
# the batch, or a graph with batch norm, is one line.
#
# Run by CTest as: bash tests/cli_pipeline_train.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_pipeline_train.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-pipetrain.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"

cat >"$TMP/pipe.json" <<'EOF'
{
  "format": "soapflow-strategy",
  "version": 1,
  "model": "mlp",
  "ops": {
    "input": {"degrees": [1, 1], "devices": [0]},
    "fc1": {"degrees": [1, 1], "devices": [0]},
    "relu1": {"degrees": [1, 1], "devices": [0]},
    "fc2": {"degrees": [1, 1], "devices": [1]},
    "relu2": {"degrees": [1, 1], "devices": [1]},
    "fc3": {"degrees": [1, 1], "devices": [1]},
    "loss": {"degrees": [1, 1], "devices": [1]}
  },
  "pipeline": {"stages": 2, "micro_batches": 4, "schedule": "1f1b", "boundaries": ["fc2"]}
}
EOF
mlp=(--model mlp --mlp-sizes 784,64,32,10 --batch 16 --machine "cpu[2]")

# ---- validate: predicted and measured, the measured trace -------------------------
run val timeout 120 mpirun -n 2 "$SF" validate "${mlp[@]}" --strategies "$TMP/pipe.json",data \
    --iters 3 --rounds 1 --json --trace-dir "$TMP/tr"
expect_ok val
python3 - "$TMP/val.out" <<'PY' || fail "validate: $(head -c 600 "$TMP/val.out")"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in d["strategies"]}
p = rows["pipe"]
assert p["predicted_ms"] > 0 and p["measured_ms"] > 0, p
PY
grep -q 'fc2@mb3' "$TMP/tr/1-pipe.measured.json" ||
    fail "the measured trace does not name the micro-batch copies"

# ---- train: resume is exact, data parallelism's losses and accuracy ---------------
python3 - "$TMP/idx" <<'PY' || fail "could not write IDX files"
import os, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
for p, n in (("train", 64), ("t10k", 32)):
    with open(f"{d}/{p}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) +
                bytes((i * 7 + i // 97) % 256 for i in range(n * 784)))
    with open(f"{d}/{p}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes((i * 3) % 10 for i in range(n)))
PY
mp=(timeout 120 mpirun -n 2 "$SF" train "${mlp[@]}" --data mnist --data-dir "$TMP/idx" --seed 3)
run full "${mp[@]}" -s "$TMP/pipe.json" --iters 10 --save "$TMP/full.st" --json
expect_ok full
run half "${mp[@]}" -s "$TMP/pipe.json" --iters 5 --save "$TMP/half.st"
expect_ok half
run res "${mp[@]}" -s "$TMP/pipe.json" --iters 5 --resume "$TMP/half.st" --save "$TMP/res.st"
expect_ok res
cmp -s "$TMP/full.st" "$TMP/res.st" || fail "train with a pipeline: 5 + resume 5 is not 10"
run data "${mp[@]}" -s data --iters 10 --json
expect_ok data
python3 - "$TMP/full.out" "$TMP/data.out" <<'PY' || fail "the pipeline does not train as data parallelism"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for x, y in zip(a["losses"], b["losses"]):
    assert abs(x - y) <= 1e-4 * max(1.0, abs(y)), (x, y)
assert a["test_accuracy"] is not None and abs(a["test_accuracy"] - b["test_accuracy"]) <= 1e-9, \
    (a["test_accuracy"], b["test_accuracy"])
PY

# ---- bad pipelines: one line -------------------------------------------------------
sed 's/"micro_batches": 4/"micro_batches": 5/' "$TMP/pipe.json" >"$TMP/bad5.json"
run bad5 "$SF" simulate "${mlp[@]}" -s "$TMP/bad5.json"
expect_error bad5
grep -q "bad5.json.*micro-batches do not divide" "$TMP/bad5.err" || fail "bad5: $(cat "$TMP/bad5.err")"
"$SF" simulate --model resnet18 -b 4 --machine "cpu[2]" -s single --save-strategy "$TMP/rn.json" \
    >/dev/null 2>&1 || fail "could not write resnet18's strategy"
python3 - "$TMP/rn.json" <<'PY' || fail "could not pipeline resnet18's strategy"
import json, sys
d = json.load(open(sys.argv[1]))
names = list(d["ops"])
for i, n in enumerate(names):
    d["ops"][n]["devices"] = [0 if i < len(names) // 2 else 1]
d["pipeline"] = {"stages": 2, "micro_batches": 2, "schedule": "gpipe",
                 "boundaries": [names[len(names) // 2]]}
json.dump(d, open(sys.argv[1], "w"))
PY
run bn timeout 120 mpirun -n 2 "$SF" train --model resnet18 -b 4 --machine "cpu[2]" \
    --data synthetic -s "$TMP/rn.json" --iters 1
[ "$(rc_of bn)" -ne 0 ] || fail "bn: a pipeline over batch norm trained"
[ "$(grep -c '^soapflow: ' "$TMP/bn.err")" -eq 1 ] && grep -q "^soapflow: .*batch norm 'bn1'" "$TMP/bn.err" ||
    fail "bn: not one line naming the batch norm: $(cat "$TMP/bn.err")"
echo "cli_pipeline: ok"
