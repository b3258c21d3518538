#!/usr/bin/env bash
# cli_onnx.sh - ONNX files (tests/fixtures/onnx/, made by scripts/make_onnx_fixtures.py)
# wherever a model is taken: graph, simulate, search, profile, train (nanoGPT's
# model.py on one rank and on two, with the same losses).
#
# Run by CTest as: bash tests/cli_onnx.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_onnx.sh <path-to-soapflow> <source-dir>}
SRC=${2:?usage: cli_onnx.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-onnx.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
FIX="$SRC/tests/fixtures/onnx"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1

. "$(dirname "$0")/lib/cli.sh"

# ---- graph: every fixture, PyTorch's parameter count ----------------------------
for f in "$FIX"/*.onnx; do
    name=$(basename "$f" .onnx)
    run "graph_$name" "$SF" graph --model "$f" --json
    expect_ok "graph_$name"
    want=$(json_int "$FIX/$name.json" params)
    got=$(json_int "$TMP/graph_$name.out" params)
    [ "$got" = "$want" ] || fail "graph $name.onnx: $got parameters, PyTorch has $want"
    [ "$(json_int "$TMP/graph_$name.out" batch)" = 1024 ] ||
        fail "graph $name.onnx: the dynamic batch is not 64 x 16 devices"
done

# ---- the exported lenet5 is the zoo's: the same figures and simulated times -------
run zoo_graph "$SF" graph --model lenet5 --json
run onnx_graph "$SF" graph --model "$FIX/lenet5.onnx" --json
for key in ops params flops_fwd flops_bwd activation_bytes weight_bytes batch; do
    [ "$(json_num "$TMP/zoo_graph.out" $key)" = "$(json_num "$TMP/onnx_graph.out" $key)" ] ||
        fail "lenet5.onnx: $key differs from the zoo's lenet5"
done
for s in data model owt; do
    run "zoo_sim_$s" "$SF" simulate --model lenet5 --strategy "$s" --json
    run "onnx_sim_$s" "$SF" simulate --model "$FIX/lenet5.onnx" --strategy "$s" --json
    expect_ok "onnx_sim_$s"
    [ "$(json_num "$TMP/zoo_sim_$s.out" iter_ms)" = "$(json_num "$TMP/onnx_sim_$s.out" iter_ms)" ] ||
        fail "lenet5.onnx, strategy $s: simulated time differs from the zoo's"
done

# ---- --batch: a dynamic batch takes it; a fixed one refuses another ----------------
run batch8 "$SF" graph --model "$FIX/lstm_lm.onnx" --batch 8 --json
expect_ok batch8
[ "$(json_int "$TMP/batch8.out" batch)" = 8 ] || fail "graph --batch 8: batch not 8"
run seqlen "$SF" graph --model "$FIX/lstm_lm.onnx" --seq-len 5
expect_usage seqlen
grep -q "keeps its own" "$TMP/seqlen.err" || fail "--seq-len with an ONNX file: $(cat "$TMP/seqlen.err")"

# ---- registered buffers: the sidecar beside the model, --onnx-buffers, refusals -----
cp "$FIX/buffers_op17_train.onnx" "$TMP/buf.onnx"
run buf_none "$SF" graph --model "$TMP/buf.onnx" --json
expect_ok buf_none
[ "$(json_int "$TMP/buf_none.out" params)" = 117 ] ||
    fail "buffers without their file: not learned (117 parameters)"
run buf_opt "$SF" graph --model "$TMP/buf.onnx" --onnx-buffers "$FIX/buffers_op17_train.buffers.json" --json
expect_ok buf_opt
[ "$(json_int "$TMP/buf_opt.out" params)" = 77 ] || fail "--onnx-buffers: not PyTorch's 77 parameters"
cp "$FIX/buffers_op17_train.buffers.json" "$TMP/buf.buffers.json"
run buf_side "$SF" graph --model "$TMP/buf.onnx" --json
[ "$(json_int "$TMP/buf_side.out" params)" = 77 ] || fail "buf.buffers.json beside the model: not read"
run buf_missing "$SF" graph --model "$TMP/buf.onnx" --onnx-buffers "$TMP/none.json"
expect_error buf_missing
grep -q "cannot read the buffers file $TMP/none.json" "$TMP/buf_missing.err" ||
    fail "--onnx-buffers of a missing file: $(cat "$TMP/buf_missing.err")"
run buf_zoo "$SF" graph --model lenet5 --onnx-buffers "$TMP/buf.buffers.json"
expect_usage buf_zoo

# ---- search, and its strategy simulated and trained -------------------------------
run search "$SF" search --model "$FIX/transformer.onnx" --machine p100-4x4 --iters 300 \
    --out "$TMP/best.json" --json
expect_ok search
[ -s "$TMP/best.json" ] || fail "search --out: no strategy file"
run sim_best "$SF" simulate --model "$FIX/transformer.onnx" --machine p100-4x4 \
    --strategy "$TMP/best.json" --json
expect_ok sim_best
run search_lstm "$SF" search --model "$FIX/lstm_lm.onnx" --iters 300
expect_ok search_lstm
grep -q "^best:" "$TMP/search_lstm.out" || fail "search lstm_lm.onnx: no best strategy"

# ---- profile: the CPU kernels on an imported model --------------------------------
run profile "$SF" profile --model "$FIX/resblock.onnx" --batch 4 --machine "cpu[1]" \
    --out "$TMP/costs.json" --reps 1 --warmup 0
expect_ok profile
[ -s "$TMP/costs.json" ] || fail "profile: no costs file"

# ---- train: from the file's weights; --init overrides them -------------------------
# With a zero learning rate the saved weights are the initial ones. The zoo's
# lenet5 starts from seeded weights, the file from its own; given the zoo's
# checkpoint with --init, the file's model trains exactly as the zoo's did.
train_args=(--data synthetic --iters 2 --lr 0 --json)
# Under AddressSanitizer, OpenMPI's own allocations at exit read as leaks (as in
# cli_calibrate.sh); the importer's are checked by the commands above.
mpi() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$@"; }
run tr_zoo mpi "$SF" train --model lenet5 "${train_args[@]}" --save "$TMP/zoo.st"
expect_ok tr_zoo
run tr_onnx mpi "$SF" train --model "$FIX/lenet5.onnx" "${train_args[@]}" --save "$TMP/onnx.st"
expect_ok tr_onnx
cmp -s "$TMP/zoo.st" "$TMP/onnx.st" && fail "train lenet5.onnx: started from seeded weights, not the file's"
run tr_init mpi "$SF" train --model "$FIX/lenet5.onnx" "${train_args[@]}" --init "$TMP/zoo.st" \
    --save "$TMP/init.st"
expect_ok tr_init
cmp -s "$TMP/zoo.st" "$TMP/init.st" || fail "train lenet5.onnx --init: not the checkpoint's weights"
[ "$(json_num "$TMP/tr_zoo.out" loss_first)" = "$(json_num "$TMP/tr_init.out" loss_first)" ] ||
    fail "train lenet5.onnx --init zoo.st: another loss than the zoo model's"
# a file without its weights starts from the seeded ones (the zoo's, under the same name)
cp "$FIX/lenet5_op9.onnx" "$TMP/lenet5.onnx"
run tr_noweights mpi "$SF" train --model "$TMP/lenet5.onnx" "${train_args[@]}" --save "$TMP/nw.st"
expect_ok tr_noweights
cmp -s "$TMP/zoo.st" "$TMP/nw.st" || fail "train of a file without weights: not the seeded start"
# a sequence model trains on synthetic tokens
run tr_lm mpi "$SF" train --model "$FIX/lstm_lm.onnx" --batch 4 --iters 3 --json
expect_ok tr_lm
positive "$(json_num "$TMP/tr_lm.out" loss_first)" || fail "train lstm_lm.onnx: no loss"

# ---- nanoGPT's model.py: 2 ranks train as one ----------------------------------------
# The GPT-2-style decoder written with products and masked_fill imports as the
# zoo's gpt (tests/test_io_onnx.c compares the operators); here it trains, on one
# rank and on two (data parallel, and Megatron's split of the attention heads and
# MLP), with the same losses step for step (within float rounding of the sums).
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * (a < 0 ? -a : a)) }'; }
nano=(--model "$FIX/nanogpt.onnx" --batch 4 --iters 3 --data synthetic --lr 0.05 --json)
run tr_nano1 mpi "$SF" train "${nano[@]}"
expect_ok tr_nano1
for s in data megatron; do
    run "tr_nano2_$s" mpi timeout 120 mpirun -n 2 "$SF" train "${nano[@]}" --strategy "$s"
    expect_ok "tr_nano2_$s"
    [ "$(json_int "$TMP/tr_nano2_$s.out" ranks)" = 2 ] || fail "train nanogpt.onnx --strategy $s: not 2 ranks"
    for key in loss_first loss_last; do
        one=$(json_num "$TMP/tr_nano1.out" $key)
        two=$(json_num "$TMP/tr_nano2_$s.out" $key)
        close "$one" "$two" || fail "train nanogpt.onnx: $key $one on one rank, $two on two ($s)"
    done
done

# ---- broken files: one line naming the file -----------------------------------------
head -c 3000 "$FIX/lenet5.onnx" >"$TMP/cut.onnx"
run cut "$SF" graph --model "$TMP/cut.onnx"
expect_error cut
grep -q "cut.onnx: not a valid ONNX model: at byte [0-9]*, in graph > " "$TMP/cut.err" ||
    fail "a truncated file: $(cat "$TMP/cut.err")"
printf '{"format": "soapflow-model"}' >"$TMP/json.onnx"
run notonnx "$SF" simulate --model "$TMP/json.onnx"
expect_error notonnx
grep -q "json.onnx: not a valid ONNX model" "$TMP/notonnx.err" || fail "JSON as ONNX: $(cat "$TMP/notonnx.err")"
: >"$TMP/empty.onnx"
run empty "$SF" search --model "$TMP/empty.onnx"
expect_error empty
grep -q "empty file" "$TMP/empty.err" || fail "an empty file: $(cat "$TMP/empty.err")"
run missing "$SF" graph --model "$TMP/none.onnx"
expect_error missing
grep -q "none.onnx: cannot open" "$TMP/missing.err" || fail "a missing file: $(cat "$TMP/missing.err")"
exit 0
