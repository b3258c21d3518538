#!/usr/bin/env bash
# cli_train.sh - `soapflow train`: as one rank without mpirun; under mpirun, one
# error message for a strategy or machine that does not fit the ranks; the
# loss split on its classes (vocabulary-parallel cross-entropy, by hand and
# under megatron) trains the losses of one rank or data parallelism; a
# checkpoint, stopped and resumed, gives the weights of the run that did not
# stop, bit for bit; a rank killed with SIGKILL ends every rank within 10 s,
# non-zero, naming the rank, and leaves no checkpoint behind; a truncated
# dataset file is one line naming the file and the byte offset. Synthetic data
# and a few steps keep it to seconds.
#
# Run by CTest as: bash tests/cli_train.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_train.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-train.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
# OpenMPI's own allocations at exit read as leaks under AddressSanitizer.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"
MPI="timeout 120 mpirun -n 2"
SMALL=(--model lenet5 --batch 8 --data synthetic)

# ---- help, usage ------------------------------------------------------------
run help "$SF" train --help
expect_ok help
grep -q 'usage: mpirun -n P soapflow train' "$TMP/help.out" || fail "train --help: no usage line"
run noargs "$SF" train
expect_usage noargs
run both "$SF" train "${SMALL[@]}" --epochs 1 --iters 3
expect_usage both

# ---- one rank without mpirun -----------------------------------------------------
run one "$SF" train "${SMALL[@]}" --iters 4 --json
expect_ok one
[ "$(json_num "$TMP/one.out" ranks)" = 1 ] || fail "train without mpirun: ranks is not 1"
[ "$(json_num "$TMP/one.out" steps)" = 4 ] || fail "train: steps is not 4"
for key in iter_ms predicted_iter_ms images_per_s loss_last; do
    grep -q "\"$key\"" "$TMP/one.out" || fail "train --json: no $key"
done

# ---- two ranks: the report, once -------------------------------------------------
run two $MPI "$SF" train "${SMALL[@]}" --strategy model --iters 4
expect_ok two
[ "$(grep -c '^iteration ' "$TMP/two.out")" -eq 1 ] || fail "train: report not printed once"
grep -q 'predicted' "$TMP/two.out" || fail "train: no prediction beside the measurement"

# ---- a strategy or machine that does not fit the ranks: one message ---------------
"$SF" simulate --model lenet5 --batch 8 --machine 'cpu[4]' --strategy data \
    --save-strategy "$TMP/s4.json" >/dev/null 2>&1 || fail "simulate --save-strategy failed"
run bad_strategy $MPI "$SF" train "${SMALL[@]}" --strategy "$TMP/s4.json" --iters 2
[ "$(rc_of bad_strategy)" -ne 0 ] || fail "a 4-device strategy on 2 ranks was accepted"
[ "$(grep '^soapflow: ' "$TMP/bad_strategy.err" | grep -vc '^soapflow: warning')" -eq 1 ] ||
    fail "bad strategy: want one soapflow error line, got: $(cat "$TMP/bad_strategy.err")"
# softmax_ce split on its classes (vocabulary-parallel cross-entropy): the
# losses of data parallelism, whose loss is split on its samples
"$SF" simulate --model lenet5 --batch 8 --machine 'cpu[2]' --strategy data \
    --save-strategy "$TMP/s2.json" >/dev/null 2>&1 || fail "simulate --save-strategy failed"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["ops"]["loss"]["degrees"] = [1, 2]; json.dump(d, open(sys.argv[2], "w"))' "$TMP/s2.json" "$TMP/vp.json"
run vp_data $MPI "$SF" train "${SMALL[@]}" --machine 'cpu[2]' --strategy "$TMP/s2.json" --iters 3 --json
expect_ok vp_data
run vocab_parallel $MPI "$SF" train "${SMALL[@]}" --machine 'cpu[2]' --strategy "$TMP/vp.json" --iters 3 --json
expect_ok vocab_parallel
close_to() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; exit !(d <= 1e-4 * s) }'; }
for key in loss_first loss_last; do
    close_to "$(json_num "$TMP/vocab_parallel.out" $key)" "$(json_num "$TMP/vp_data.out" $key)" ||
        fail "vocab_parallel: $key $(json_num "$TMP/vocab_parallel.out" $key), data parallelism's $(json_num "$TMP/vp_data.out" $key)"
done
# megatron on a transformer splits its loss on the classes after the
# column-parallel head: the losses of one rank
TR=(--model transformer --seq-len 8 --hidden 48 --vocab 64 --batch 4 --data synthetic --iters 3 --json)
run tr_one "$SF" train "${TR[@]}"
expect_ok tr_one
run tr_mega $MPI "$SF" train "${TR[@]}" --strategy megatron
expect_ok tr_mega
for key in loss_first loss_last; do
    close_to "$(json_num "$TMP/tr_mega.out" $key)" "$(json_num "$TMP/tr_one.out" $key)" ||
        fail "megatron: $key $(json_num "$TMP/tr_mega.out" $key), one rank's $(json_num "$TMP/tr_one.out" $key)"
done
run bad_machine $MPI "$SF" train "${SMALL[@]}" --machine 'cpu[4]' --iters 2
[ "$(rc_of bad_machine)" -ne 0 ] || fail "a 4-device machine on 2 ranks was accepted"
[ "$(grep -c '^soapflow: .*4 devices, but there are 2 ranks' "$TMP/bad_machine.err")" -eq 1 ] ||
    fail "bad machine: want one message naming both counts: $(cat "$TMP/bad_machine.err")"

# ---- stop and resume: bit for bit ---------------------------------------------------
run full $MPI "$SF" train "${SMALL[@]}" --strategy owt --iters 6 --save "$TMP/full.st"
expect_ok full
run half $MPI "$SF" train "${SMALL[@]}" --strategy owt --iters 3 --save "$TMP/half.st"
expect_ok half
run resumed $MPI "$SF" train "${SMALL[@]}" --strategy owt --iters 3 --resume "$TMP/half.st" \
    --save "$TMP/resumed.st"
expect_ok resumed
cmp -s "$TMP/full.st" "$TMP/resumed.st" ||
    fail "6 steps and 3 + 3 resumed steps differ: $(cmp "$TMP/full.st" "$TMP/resumed.st")"
# --init takes the weights of any compatible file, on another strategy too
run init $MPI "$SF" train "${SMALL[@]}" --strategy data --iters 2 --init "$TMP/half.st"
expect_ok init
run init_bad "$SF" train --model mlp --batch 8 --data synthetic --iters 2 --init "$TMP/half.st"
expect_error init_bad
grep -q 'missing or of another shape' "$TMP/init_bad.err" || fail "init: mismatches not listed"

# ---- a rank killed mid-training ---------------------------------------------------------
mpirun -n 2 "$SF" train "${SMALL[@]}" --iters 1000000 --log-every 1 --save "$TMP/killed.st" \
    >"$TMP/kill.out" 2>"$TMP/kill.err" &
MPIRUN=$!
(sleep 60 && kill -9 "$MPIRUN" 2>/dev/null) &
WATCHDOG=$!
victim=""
for _ in $(seq 100); do
    victim=$(pgrep -P "$MPIRUN" -x soapflow | tail -n 1)
    [ -n "$victim" ] && grep -q '^step' "$TMP/kill.out" 2>/dev/null && break
    sleep 0.1
done
[ -n "$victim" ] || fail "kill: no rank process found"
sleep 0.5
kill -9 "$victim"
start=$(date +%s)
wait "$MPIRUN"
status=$?
elapsed=$(($(date +%s) - start))
kill "$WATCHDOG" 2>/dev/null
[ "$status" -ne 0 ] || fail "kill: mpirun exited 0 after a rank was killed"
[ "$elapsed" -le 10 ] || fail "kill: the other rank took $elapsed s to stop"
grep -qi 'rank' "$TMP/kill.err" || fail "kill: no message naming the rank: $(cat "$TMP/kill.err")"
pgrep -x soapflow -P "$MPIRUN" >/dev/null 2>&1 && fail "kill: a rank is still running"
[ -e "$TMP/killed.st" ] && fail "kill: a checkpoint was written"
ls "$TMP" | grep -q '\.tmp\.' && fail "kill: a temporary file was left: $(ls "$TMP")"

# ---- bad data -----------------------------------------------------------------------
mkdir -p "$TMP/idx"
# a valid header for 10 images of 28x28, then 100 bytes of the 7840
printf '\x00\x00\x08\x03\x00\x00\x00\x0a\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$TMP/idx/train-images-idx3-ubyte"
head -c 100 /dev/zero >>"$TMP/idx/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x0a' >"$TMP/idx/train-labels-idx1-ubyte"
head -c 10 /dev/zero >>"$TMP/idx/train-labels-idx1-ubyte"
cp "$TMP/idx/train-images-idx3-ubyte" "$TMP/idx/t10k-images-idx3-ubyte"
cp "$TMP/idx/train-labels-idx1-ubyte" "$TMP/idx/t10k-labels-idx1-ubyte"
run trunc "$SF" train --model lenet5 --batch 8 --data mnist --data-dir "$TMP/idx" --iters 1
expect_error trunc
grep -q 'train-images-idx3-ubyte: byte 16' "$TMP/trunc.err" ||
    fail "truncated IDX: no file and byte offset: $(cat "$TMP/trunc.err")"
run nodata "$SF" train --model rnnlm --batch 4 --seq-len 4 --chunk 2 --hidden 8 --vocab 16 \
    --data fashion-mnist --iters 1
expect_error nodata
echo "cli_train: ok"
