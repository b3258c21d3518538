#!/usr/bin/env bash
# cli_train_checks.sh - `soapflow train` when a run goes wrong:
#   - a run that diverges (a huge --lr) stops at the first non-finite loss with
#     one line naming the step, exits 1, and leaves the --save target as it was;
#   - one NaN weight in a checkpoint makes the loss NaN from the first step (the
#     kernels propagate NaN as PyTorch does; relu and max pool used to turn it
#     into 0 and train on with a finite loss), so --init of it stops at step 1;
#   - --costs with a costs file that covers none of the model's tasks warns
#     with simulate's own line (the same helper) instead of keeping quiet.
# One rank without mpirun, synthetic data: seconds.
#
# Run by CTest as: bash tests/cli_train_checks.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_train_checks.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-train-checks.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1

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

echo "cli_train_checks: ok"
