#!/usr/bin/env bash
# cli_options.sh - option values at and past their edges, as fuzzing the command
# line found them: each must give a result or one error line with status 1 or 2,
# never a sanitizer report, a crash or an opaque message from deep inside.
#
# Run by CTest as: bash tests/cli_options.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_options.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-options.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

# ---- sizes whose products overflow int64 ----------------------------------
# (2^40 x 2^40 weights was a signed overflow in the parameter count; now each
# size is at most 2^31 and each tensor or weight set at most 2^40 elements)
run mlp_huge "$SF" graph --model mlp --mlp-sizes 2147483648,2147483648,10 --batch 1
expect_error mlp_huge
grep -q "operator 'fc1' (linear): its weights exceed the limit" "$TMP/mlp_huge.err" ||
    fail "mlp 2^31 x 2^31: $(cat "$TMP/mlp_huge.err")"
run mlp_wide "$SF" graph --model mlp --mlp-sizes 1099511627776,10 --batch 1
expect_error mlp_wide
grep -q "attribute 'shape' is 1099511627776, beyond the limit" "$TMP/mlp_wide.err" ||
    fail "mlp input of 2^40: $(cat "$TMP/mlp_wide.err")"
run batch_huge "$SF" graph --model transformer --seq-len 2147483648 --batch 2147483648
expect_error batch_huge
grep -q "exceeds the limit of 1099511627776 elements" "$TMP/batch_huge.err" ||
    fail "transformer 2^31 x 2^31 tokens: $(cat "$TMP/batch_huge.err")"
run vocab_huge "$SF" simulate --model rnnlm --vocab 2147483648 --batch 1 --machine cpu
expect_error vocab_huge
grep -q "'embed' (embedding): its weights exceed the limit" "$TMP/vocab_huge.err" ||
    fail "rnnlm --vocab 2^31: $(cat "$TMP/vocab_huge.err")"

# ---- model options a zoo model does not read are refused, not ignored ------
run lenet_seq "$SF" graph --model lenet5 --seq-len 5
expect_usage lenet_seq
grep -q "\-\-seq-len does not apply to lenet5, which takes --batch" "$TMP/lenet_seq.err" ||
    fail "lenet5 --seq-len: $(cat "$TMP/lenet_seq.err")"
run tf_chunk "$SF" simulate --model transformer --chunk 2 --machine cpu
expect_usage tf_chunk
grep -q "\-\-chunk does not apply to transformer, which takes --batch, --seq-len, --hidden, --vocab" \
    "$TMP/tf_chunk.err" || fail "transformer --chunk: $(cat "$TMP/tf_chunk.err")"
run mlp_vocab "$SF" search --model mlp --vocab 3 --machine cpu --iters 10
expect_usage mlp_vocab
run rnn_ok "$SF" graph --model nmt --seq-len 8 --chunk 2 --hidden 64 --vocab 100 --batch 4
expect_ok rnn_ok

# ---- the largest chunk count the zoo builds is one the simulator takes ------
# (64 chunks built, but the concat of 64 inputs failed in the simulator)
run chunks64 "$SF" simulate --model rnnlm --seq-len 64 --chunk 1 --batch 8 --machine cpu --json
expect_ok chunks64
run chunks65 "$SF" simulate --model rnnlm --seq-len 65 --chunk 1 --batch 8 --machine cpu
expect_error chunks65
grep -q "at most 64 allowed" "$TMP/chunks65.err" || fail "65 chunks: $(cat "$TMP/chunks65.err")"

# ---- search --budget: above 0 and finite once scaled -----------------------
for b in 0 0s 1e308h +1 inf; do
    run "budget_$b" "$SF" search --model lenet5 --machine cpu --budget "$b"
    expect_error "budget_$b"
    [ "$(rc_of "budget_$b")" = 2 ] || fail "--budget $b: status $(rc_of "budget_$b"), want 2"
    grep -q -- "--budget wants a duration above 0" "$TMP/budget_$b.err" ||
        fail "--budget $b: $(cat "$TMP/budget_$b.err")"
done

# ---- an output that cannot be written is said before the work, not after ---
# (timeout: the 20 s search or a resnet50 profile would run out its time first)
run search_out timeout 10 "$SF" search --model lenet5 --machine cpu --budget 20s \
    --out "$TMP/missing/best.json"
expect_error search_out
grep -q "missing/best.json: cannot create" "$TMP/search_out.err" ||
    fail "search --out MISSING/: $(cat "$TMP/search_out.err")"
run search_svg timeout 10 "$SF" search --model lenet5 --machine cpu --budget 20s --svg "$TMP"
expect_error search_svg
run profile_out timeout 10 "$SF" profile --model resnet50 --out "$TMP/missing/costs.json"
expect_error profile_out
grep -q "missing/costs.json: cannot create" "$TMP/profile_out.err" ||
    fail "profile --out MISSING/: $(cat "$TMP/profile_out.err")"
[ -z "$(find "$TMP" -name '*.tmp.*')" ] || fail "a probe left a temporary file"

# ---- NAME[N]: within one node or whole nodes, said as such; a file by its path --
run sub6 "$SF" simulate --model lenet5 --machine 'p100-4x4[6]'
expect_error sub6
grep -q "machine 'p100-4x4\[6\]': the first 6 devices are neither within one node nor whole nodes: N must be at most 4 or a multiple of 4" \
    "$TMP/sub6.err" || fail "p100-4x4[6]: $(cat "$TMP/sub6.err")"
for n in 3 8 12; do
    run "sub$n" "$SF" graph --model lenet5 --machine "p100-4x4[$n]" --json
    expect_ok "sub$n"
done
cat >"$TMP/m.json" <<'JSON'
{
  "name": "field-name",
  "nodes": 2,
  "devices_per_node": 2,
  "device": {"name": "X", "peak_tflops": {"fp32": 1.0}, "mem_bw_GBps": 100.0, "mem_GB": 8.0},
  "intra": {"topology": "switch", "bandwidth_GBps": 10.0, "latency_us": 1.0},
  "inter": {"nics_per_node": 1, "bandwidth_GBps": 5.0, "latency_us": 2.0}
}
JSON
for cmd in "graph" "simulate" "search --iters 5" "bench sim --moves 2"; do
    # shellcheck disable=SC2086
    run subf "$SF" $cmd --model lenet5 --machine "$TMP/m.json[3]"
    expect_error subf
    grep -q "machine '$TMP/m.json\[3\]': the first 3 devices" "$TMP/subf.err" ||
        fail "$cmd --machine FILE[3]: $(cat "$TMP/subf.err")"
    if grep -q "field-name" "$TMP/subf.err"; then
        fail "$cmd --machine FILE[3]: names the file's name field: $(cat "$TMP/subf.err")"
    fi
done
for cmd in graph simulate search profile "bench sim"; do
    # shellcheck disable=SC2086
    run subhelp "$SF" $cmd --help
    grep -q "NAME\[N\]: its first N devices, N at most one node's" "$TMP/subhelp.out" ||
        fail "$cmd --help: says nothing of NAME[N]'s rule"
done

# ---- help --help: the hint of 'help' errors points to it --------------------
run help_help "$SF" help --help
expect_ok help_help
grep -q '^usage: soapflow' "$TMP/help_help.out" || fail "help --help: no usage"

exit 0
