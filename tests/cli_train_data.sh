#!/usr/bin/env bash
# cli_train_data.sh - what `soapflow train` makes of data and defaults that do
# not fit (issue 29): IDX images of another size than the model reads are one
# line naming the file and both shapes; a test split smaller than one batch is
# reported as not evaluated (JSON null), never as an accuracy of 0 samples;
# more ranks than the default machine has are told what to pass; and train,
# validate, profile and simulate take one default batch (64 per device). The
# datasets are a few images written here, so it takes seconds.
#
# Run by CTest as: bash tests/cli_train_data.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_train_data.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-tdata.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3 (to write IDX files)"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"

# idx DIR SPLIT N ROWS COLS: N images of ROWS x COLS and N labels (i mod 10)
idx() {
    python3 - "$@" <<'EOF'
import os, struct, sys
d, split, n, r, c = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
os.makedirs(d, exist_ok=True)
p = "train" if split == "train" else "t10k"
with open(f"{d}/{p}-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, r, c) + bytes((i * 7) % 256 for i in range(n * r * c)))
with open(f"{d}/{p}-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(i % 10 for i in range(n)))
EOF
}

# ---- item 1: images of another size ---------------------------------------------------
idx "$TMP/small" train 32 20 20
idx "$TMP/small" test 16 28 28
idx "$TMP/smalltest" train 32 28 28
idx "$TMP/smalltest" test 16 20 20
idx "$TMP/large" train 32 32 32
idx "$TMP/large" test 16 32 32
for case in "small train-images 20x20" "smalltest t10k-images 20x20" "large train-images 32x32"; do
    set -- $case
    for model in lenet5 mlp; do
        run "size_$1_$model" "$SF" train --model "$model" --batch 8 --data mnist \
            --data-dir "$TMP/$1" --iters 2
        expect_error "size_$1_$model"
        want="$1/$2-idx3-ubyte: .*$3, but $model reads"
        grep -q "$want" "$TMP/size_$1_$model.err" ||
            fail "$model on $3 images: no file and shapes: $(cat "$TMP/size_$1_$model.err")"
    done
done
grep -q '1x28x28 a sample' "$TMP/size_small_lenet5.err" || fail "lenet5: the model's shape not said"
grep -q '784 values a sample' "$TMP/size_small_mlp.err" || fail "mlp: the model's shape not said"

# ---- item 7: a test split smaller than one batch ---------------------------------------
idx "$TMP/few" train 32 28 28
idx "$TMP/few" test 5 28 28
run few_json "$SF" train --model lenet5 --batch 8 --data mnist --data-dir "$TMP/few" --iters 2 \
    --json
expect_ok few_json
grep -q '"test_accuracy": null' "$TMP/few_json.out" ||
    fail "test split < batch: test_accuracy is not null: $(cat "$TMP/few_json.out")"
grep -q '"test_accuracy_note": ".*larger than the 5 test samples' "$TMP/few_json.out" ||
    fail "test split < batch: no reason given"
run few_text "$SF" train --model lenet5 --batch 8 --data mnist --data-dir "$TMP/few" --iters 2
expect_ok few_text
grep -q '^test accuracy not measured: ' "$TMP/few_text.out" ||
    fail "test split < batch: $(grep 'test accuracy' "$TMP/few_text.out")"
grep -q '0 samples' "$TMP/few_text.out" && fail "an accuracy of 0 samples is reported"
# a test split of at least one batch is measured
idx "$TMP/some" train 32 28 28
idx "$TMP/some" test 20 28 28
run some "$SF" train --model lenet5 --batch 8 --data mnist --data-dir "$TMP/some" --iters 2 --json
expect_ok some
[ "$(json_int "$TMP/some.out" test_samples)" = 16 ] || fail "20 test samples, batch 8: not 16 measured"

# ---- item 14: more ranks than the default machine ---------------------------------------
run five timeout 120 mpirun -n 5 "$SF" train --model lenet5 --batch 10 --data synthetic --iters 1
[ "$(rc_of five)" -ne 0 ] || fail "5 ranks on the 4-device cpu preset were accepted"
grep -q "^soapflow: train: 5 ranks, but the default machine.*pass --machine FILE of 5 devices" \
    "$TMP/five.err" || fail "5 ranks: the message says not what to do: $(cat "$TMP/five.err")"
[ "$(grep -c '^soapflow: ' "$TMP/five.err")" -eq 1 ] || fail "5 ranks: not one message"

# ---- item 16: one default batch ------------------------------------------------------------
# 64 per device: simulate and profile on cpu[2], train and validate on 2 ranks
sim=$("$SF" simulate --model lenet5 --machine 'cpu[2]' --strategy data --json | json_int /dev/stdin batch)
[ "$sim" = 128 ] || fail "simulate's default batch on cpu[2] is '$sim', not 128"
run train2 timeout 120 mpirun -n 2 "$SF" train --model lenet5 --data synthetic --iters 1 --json
expect_ok train2
[ "$(json_int "$TMP/train2.out" batch)" = "$sim" ] ||
    fail "train's default batch on 2 ranks is not simulate's ($sim)"
run val2 timeout 120 mpirun -n 2 "$SF" validate --model lenet5 --strategies data --iters 1 \
    --rounds 1 --json
expect_ok val2
[ "$(json_int "$TMP/val2.out" batch)" = "$sim" ] ||
    fail "validate's default batch on 2 ranks is not simulate's ($sim): $(head -c 300 "$TMP/val2.out")"
"$SF" train --help | grep -q 'default batch is 64 a rank' || fail "train --help: the default batch not said"
"$SF" validate --help | grep -q -- '64 a rank' || fail "validate --help: the default batch not said"
"$SF" profile --help | grep -q 'validate' || fail "profile --help: validate's batch not said"
echo "cli_train_data: ok"
