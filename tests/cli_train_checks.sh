#!/usr/bin/env bash
# cli_train_checks.sh - `soapflow train` when a run goes wrong:
#   - a run that diverges (a huge --lr) stops at the first non-finite loss with
#     one line naming the step, exits 1, and leaves the --save target as it was;
#   - one NaN weight in a checkpoint makes the loss NaN from the first step (the
#     kernels propagate NaN as PyTorch does; relu and max pool used to turn it
#     into 0 and train on with a finite loss), so --init of it stops at step 1;
#   - --costs with a costs file that covers none of the model's tasks warns
#     with simulate's own line (the same helper) instead of keeping quiet;
#   - batch norm's running statistics are kept, saved as PyTorch names them
#     (bn.running_mean, bn.running_var), resumed bit for bit, the same on 2
#     ranks split on samples as on one, and an older checkpoint without them
#     resumes from PyTorch's initial values with a warning.
# Synthetic data, one rank without mpirun or two under it: seconds.
#
# Run by CTest as: bash tests/cli_train_checks.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_train_checks.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-train-checks.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1
# train is an MPI program even without mpirun, and OpenMPI's own allocations at
# exit read as leaks under AddressSanitizer.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3 to edit the checkpoint"
SMALL=(--model lenet5 --batch 8 --data synthetic)

# ---- divergence: one line, exit 1, the checkpoint untouched -------------------------
run good "$SF" train "${SMALL[@]}" --iters 2 --save "$TMP/good.st"
expect_ok good
cp "$TMP/good.st" "$TMP/before.st"
for fmt in text json; do
    flag=()
    [ "$fmt" = json ] && flag=(--json)
    run "div_$fmt" "$SF" train "${SMALL[@]}" --iters 30 --lr 1e6 --save "$TMP/good.st" "${flag[@]}"
    expect_error "div_$fmt"
    [ "$(rc_of "div_$fmt")" -eq 1 ] || fail "diverged run: status $(rc_of "div_$fmt"), want 1"
    grep -q '^soapflow: train: the loss is NaN at step [0-9]*: the run diverged' \
        "$TMP/div_$fmt.err" || fail "diverged run: no line naming the step: $(cat "$TMP/div_$fmt.err")"
    cmp -s "$TMP/good.st" "$TMP/before.st" || fail "a diverged run ($fmt) overwrote the checkpoint"
done
[ ! -s "$TMP/div_json.out" ] || fail "a diverged run printed a JSON result: $(cat "$TMP/div_json.out")"

# ---- one NaN weight: the loss is NaN at the first step, as in PyTorch ----------------------
python3 - "$TMP/good.st" "$TMP/nan.st" <<'EOF' || fail "could not write the NaN checkpoint"
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
begin = h["conv1.weight"]["data_offsets"][0]
b[8 + n + begin:8 + n + begin + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(b)
EOF
for k in fast reference; do
    flag=()
    [ "$k" = reference ] && flag=(--reference-kernels)
    run "nan_$k" "$SF" train "${SMALL[@]}" --iters 3 --init "$TMP/nan.st" "${flag[@]}"
    expect_error "nan_$k"
    grep -q 'the loss is NaN at step 1:' "$TMP/nan_$k.err" ||
        fail "a NaN weight ($k kernels) did not give a NaN loss at step 1: $(cat "$TMP/nan_$k.err")"
done

# ---- a costs file of another model: simulate's warning -------------------------------
"$SF" profile --model mlp --batch 8 --machine 'cpu[1]' --max-devices 1 --reps 1 --warmup 0 \
    --out "$TMP/mlp_costs.json" >/dev/null 2>&1 || fail "profile failed"
run sim_costs "$SF" simulate --model lenet5 --batch 8 --machine 'cpu[1]' --costs "$TMP/mlp_costs.json"
run train_costs "$SF" train "${SMALL[@]}" --iters 2 --costs "$TMP/mlp_costs.json" --json
expect_ok train_costs
want=$(grep '^soapflow: warning: not measured' "$TMP/sim_costs.err")
[ -n "$want" ] || fail "simulate gave no warning for a costs file of another model"
grep -qxF "$want" "$TMP/train_costs.err" ||
    fail "train --costs: no warning '$want': $(cat "$TMP/train_costs.err")"

# ---- batch norm's running statistics: kept, checkpointed, resumed -------------------------
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
MPI="timeout 120 mpirun -n 2"
BN="$TMP/bn.json"
cat >"$BN" <<'JSON'
{"format": "soapflow-model", "version": 1, "name": "bn_net",
 "ops": [
  {"name": "x", "type": "input", "shape": [8, 1, 28, 28]},
  {"name": "conv", "type": "conv2d", "inputs": ["x"], "out_channels": 4, "kernel": [5, 5],
   "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "bias": false},
  {"name": "bn", "type": "batchnorm", "inputs": ["conv"]},
  {"name": "relu", "type": "relu", "inputs": ["bn"]},
  {"name": "drop", "type": "dropout", "inputs": ["relu"], "p": 0.3},
  {"name": "flat", "type": "flatten", "inputs": ["drop"], "start_dim": 1},
  {"name": "fc", "type": "linear", "inputs": ["flat"], "out_features": 10},
  {"name": "loss", "type": "softmax_ce", "inputs": ["fc"]}
 ]}
JSON
BNRUN=(--model "$BN" --data synthetic --strategy data)
run bn_full $MPI "$SF" train "${BNRUN[@]}" --iters 6 --save "$TMP/bn_full.st"
expect_ok bn_full
run bn_half $MPI "$SF" train "${BNRUN[@]}" --iters 3 --save "$TMP/bn_half.st"
expect_ok bn_half
run bn_res $MPI "$SF" train "${BNRUN[@]}" --iters 3 --resume "$TMP/bn_half.st" \
    --save "$TMP/bn_res.st"
expect_ok bn_res
cmp -s "$TMP/bn_full.st" "$TMP/bn_res.st" || fail "batch norm: 6 steps and 3 + 3 resumed differ"

# stats FILE: bn's running mean and variance (8 numbers), as PyTorch names them
stats() {
    python3 - "$1" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k in ("bn.running_mean", "bn.running_var"):
    t = h[k]
    assert t["dtype"] == "F32" and t["shape"] == [4], t
    o = t["data_offsets"]
    print(" ".join("%.9g" % v for v in struct.unpack("<4f", b[8 + n + o[0]:8 + n + o[1]])))
PY
}
stats "$TMP/bn_full.st" >"$TMP/bn_full.stats" || fail "batch norm: no running statistics saved"
python3 - "$TMP/bn_full.stats" <<'PY' || fail "batch norm: running statistics did not move"
import sys
m, v = [list(map(float, l.split())) for l in open(sys.argv[1])]
assert any(abs(x) > 1e-3 for x in m) and any(abs(x - 1) > 1e-3 for x in v), (m, v)
PY

# one step, the batch norm split on samples over 2 ranks (each part normalizes
# with its own statistics): the running statistics are one rank's
run bn_one "$SF" train "${BNRUN[@]}" --iters 1 --save "$TMP/bn_one.st"
expect_ok bn_one
run bn_two $MPI "$SF" train "${BNRUN[@]}" --iters 1 --save "$TMP/bn_two.st"
expect_ok bn_two
stats "$TMP/bn_one.st" >"$TMP/bn_one.stats" || fail "batch norm, one rank: no statistics"
stats "$TMP/bn_two.st" >"$TMP/bn_two.stats" || fail "batch norm, two ranks: no statistics"
python3 - "$TMP/bn_one.stats" "$TMP/bn_two.stats" <<'PY' ||
import sys
a, b = [[float(x) for x in open(f).read().split()] for f in sys.argv[1:3]]
assert len(a) == 8 and all(abs(x - y) <= 1e-6 * max(1, abs(y)) for x, y in zip(a, b)), (a, b)
PY
    fail "batch norm: 2 ranks' running statistics are not one rank's"

# a checkpoint without them (an older soapflow) resumes from PyTorch's
# initial values, with a warning
python3 - "$TMP/bn_half.st" "$TMP/bn_old.st" <<'PY' || fail "could not write the old checkpoint"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
out, parts, at = {}, [], 0
for k, t in h.items():
    if k == "__metadata__" or k.startswith("bn.running_"):
        continue
    o = t["data_offsets"]
    parts.append(data[o[0]:o[1]])
    out[k] = dict(t, data_offsets=[at, at + o[1] - o[0]])
    at += o[1] - o[0]
out["__metadata__"] = h["__metadata__"]
hdr = json.dumps(out).encode()
hdr += b" " * (-len(hdr) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"".join(parts))
PY
run bn_old "$SF" train "${BNRUN[@]}" --iters 1 --resume "$TMP/bn_old.st"
expect_ok bn_old
grep -q 'no batch norm running statistics' "$TMP/bn_old.err" ||
    fail "an old checkpoint: no warning: $(cat "$TMP/bn_old.err")"

echo "cli_train_checks: ok"
