#!/usr/bin/env bash
# cli_dtype.sh - `--dtype fp32|bf16|fp16` on graph, simulate, search, bench sim and
# profile, and train's answer to it (issue 25, item 3; docs/cost-model.md,
# "Precision"): a compute-bound model on an H100 runs at 989 / 67 of its fp32
# speed in bf16, less what stays memory-bound; activation transfers and gradient
# syncs move half the bytes; a device without the dtype's peak is refused in one
# line that names it; the default is fp32 and says so; profile and train, whose
# kernels are fp32, refuse the others and say why.
#
# Run by CTest as: bash tests/cli_dtype.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_dtype.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-dtype.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

str() { grep -o "\"$2\": *\"[^\"]*\"" "$1" | head -n 1 | sed 's/.*: *"//; s/"$//'; }

# ---- a compute-bound model: the iteration scales by the peak ratio ----------
big=(--model mlp --mlp-sizes 8192,8192,8192,8192 --batch 65536 --machine "dgx-h100[1]" --json)
run f32 "$SF" simulate "${big[@]}"
expect_ok f32
run b16 "$SF" simulate "${big[@]}" --dtype bf16
expect_ok b16
[ "$(str "$TMP/f32.out" dtype)" = fp32 ] || fail "simulate --json: dtype is not fp32 by default"
[ "$(str "$TMP/b16.out" dtype)" = bf16 ] || fail "simulate --dtype bf16 --json: dtype is not bf16"
a=$(json_num "$TMP/f32.out" iter_ms) b=$(json_num "$TMP/b16.out" iter_ms)
awk -v a="$a" -v b="$b" 'BEGIN { r = a / b; p = 989 / 67; exit !(r > 0.9 * p && r <= p) }' ||
    fail "fp32 $a ms / bf16 $b ms is not near the H100's peak ratio 989 / 67"
# fp16 has the same peak on an H100
run f16 "$SF" simulate "${big[@]}" --dtype fp16
expect_ok f16
[ "$(json_num "$TMP/f16.out" iter_ms)" = "$b" ] || fail "fp16 and bf16 differ on an H100"

# ---- bytes: activation transfers and gradient syncs halve --------------------
for s in model owt data; do
    args=(--model alexnet --machine "dgx-h100[16]" -s "$s" --json)
    run a32 "$SF" simulate "${args[@]}"
    run a16 "$SF" simulate "${args[@]}" --dtype bf16
    expect_ok a32
    expect_ok a16
    for k in transfer_bytes sync_bytes intra_bytes inter_bytes; do
        x=$(json_int "$TMP/a32.out" $k) y=$(json_int "$TMP/a16.out" $k)
        [ $((y * 2)) -eq "$x" ] || fail "$s: $k is $y in bf16, $x in fp32: not half"
    done
    moved=$(($(json_int "$TMP/a32.out" transfer_bytes) + $(json_int "$TMP/a32.out" sync_bytes)))
    [ "$moved" -gt 0 ] || fail "$s: nothing moved to compare"
done

# ---- the default is fp32, exactly ---------------------------------------------
run d0 "$SF" simulate --model lenet5 --json
run d1 "$SF" simulate --model lenet5 --json --dtype fp32
expect_ok d0
expect_ok d1
cmp -s "$TMP/d0.out" "$TMP/d1.out" || fail "simulate: --dtype fp32 differs from the default"
run t0 "$SF" simulate --model lenet5
grep -q '^precision  *fp32$' "$TMP/t0.out" || fail "simulate: the report does not say fp32"
run t1 "$SF" simulate --model lenet5 --machine dgx-a100 --dtype bf16
grep -q '^precision  *bf16, fp32 master weights (mixed precision)$' "$TMP/t1.out" ||
    fail "simulate --dtype bf16: the report does not say mixed precision"

# ---- a dtype the device lacks: one line naming the device and the dtype ----------
run p100 "$SF" simulate --model lenet5 --machine p100-4x4 --dtype bf16
expect_error p100
grep -q "device P100-SXM2 has no bf16 peak" "$TMP/p100.err" || fail "p100 bf16: $(cat "$TMP/p100.err")"
run p100h "$SF" simulate --model lenet5 --machine p100-4x4 --dtype fp16
expect_ok p100h
run k80 "$SF" search --model lenet5 --machine k80-16x4 --dtype fp16 --algo optcnn
expect_error k80
grep -q "device K80-GK210 has no fp16 peak" "$TMP/k80.err" || fail "k80 fp16: $(cat "$TMP/k80.err")"
run cpu "$SF" bench sim --model lenet5 --machine cpu --dtype bf16 --moves 1 --reps 1
expect_error cpu
grep -q "has no bf16 peak" "$TMP/cpu.err" || fail "bench sim cpu bf16: $(cat "$TMP/cpu.err")"
run bad "$SF" simulate --model lenet5 --dtype int8
expect_usage bad
grep -q "'int8'" "$TMP/bad.err" || fail "--dtype int8: $(cat "$TMP/bad.err")"

# ---- a machine file's peaks, dtype by dtype -------------------------------------
run mj "$SF" machines --json dgx-h100
expect_ok mj
python3 - "$TMP/mj.out" "$TMP" <<'PY' || fail "could not write the machine files"
import json, sys
m = json.load(open(sys.argv[1]))[0]
m["name"] = "half-h100"
m["device"]["peak_tflops"] = {"fp32": 67.0, "fp16": 500.0}  # bf16 absent: none
json.dump(m, open(sys.argv[2] + "/half.json", "w"))
PY
run mf16 "$SF" simulate --model lenet5 --machine "$TMP/half.json" --dtype fp16 --json
expect_ok mf16
run mh16 "$SF" simulate --model lenet5 --machine dgx-h100 --dtype fp16 --json
expect_ok mh16
awk -v a="$(json_num "$TMP/mf16.out" compute_ms)" -v b="$(json_num "$TMP/mh16.out" compute_ms)" \
    'BEGIN { exit !(a > b) }' || fail "a machine file's fp16 peak of 500 was not used"
run mb16 "$SF" simulate --model lenet5 --machine "$TMP/half.json" --dtype bf16
expect_error mb16
grep -q "machine 'half-h100': device H100-SXM5-80GB has no bf16 peak (it has fp32, fp16)" \
    "$TMP/mb16.err" || fail "machine file without bf16: $(cat "$TMP/mb16.err")"

# ---- search and bench sim plan in it ------------------------------------------
run se "$SF" search --model lenet5 --machine "dgx-h100[8]" --dtype bf16 --algo optcnn --json
expect_ok se
[ "$(str "$TMP/se.out" dtype)" = bf16 ] || fail "search --json: dtype is not bf16"
run be "$SF" bench sim --model lenet5 --machine "dgx-h100[8]" --dtype bf16 --moves 2 --reps 1 --json
expect_ok be
[ "$(str "$TMP/be.out" dtype)" = bf16 ] || fail "bench sim --json: dtype is not bf16"

# ---- graph: activations in the dtype, fp32 masters plus a compute copy ---------------
run g32 "$SF" graph --model alexnet --json
run g16 "$SF" graph --model alexnet --json --dtype bf16
expect_ok g32
expect_ok g16
act32=$(json_num "$TMP/g32.out" activation_bytes) act16=$(json_num "$TMP/g16.out" activation_bytes)
[ $((act16 * 2)) -eq "$act32" ] || fail "graph: activations $act16 in bf16, $act32 in fp32"
[ "$(json_num "$TMP/g16.out" weight_bytes)" = "$(json_num "$TMP/g32.out" weight_bytes)" ] ||
    fail "graph: the fp32 master weights changed with --dtype"
params=$(json_int "$TMP/g16.out" params)
[ "$(json_num "$TMP/g16.out" weight_copy_bytes)" -eq $((params * 2)) ] ||
    fail "graph: the bf16 compute copy is not 2 bytes a parameter"
[ "$(json_num "$TMP/g32.out" weight_copy_bytes)" -eq 0 ] || fail "graph: a compute copy in fp32"

# ---- the fp32 kernels: costs files, profile and train refuse the others, saying why --
run co "$SF" simulate --model lenet5 --machine dgx-h100 --costs "$TMP/none.json" --dtype bf16
expect_error co
grep -q "costs file holds fp32 times" "$TMP/co.err" || fail "--costs with bf16: $(cat "$TMP/co.err")"
run pr "$SF" profile --model lenet5 --dtype bf16 -o "$TMP/c.json"
expect_usage pr
grep -q "run in fp32 only" "$TMP/pr.err" || fail "profile --dtype bf16: $(cat "$TMP/pr.err")"
[ ! -e "$TMP/c.json" ] || fail "profile --dtype bf16 wrote a costs file"
run tr "$SF" train --model lenet5 --dtype bf16
expect_usage tr
grep -q "the runtime trains in fp32 on CPU" "$TMP/tr.err" || fail "train --dtype bf16: $(cat "$TMP/tr.err")"

# ---- every planning command's help has the option --------------------------------
for cmd in graph simulate search "bench sim" profile train; do
    # shellcheck disable=SC2086
    run help "$SF" $cmd --help
    expect_ok help
    grep -q -- '--dtype' "$TMP/help.out" || fail "$cmd --help: no --dtype"
done

exit 0
