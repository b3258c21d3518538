#!/usr/bin/env bash
# cli_partial_sums.sh - reduction degrees (partial sums) at the command line:
# `search --reduce-splits` proposes them in both searches and finds the
# row-parallel linear where it pays; without the flag no config splits a
# reduction dimension; `simulate` reads the strategy back to the same time and
# writes a reduce degree of 1 left out (the file format of before); attention
# heads and softmax_ce's classes come with the flag alone.
#
# Run by CTest as: bash tests/cli_partial_sums.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_partial_sums.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-psum.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

# fc1 (4096 -> 8192) then a narrow fc2 (8192 -> 16): with fc1 split on its
# outputs, fc2 split on its inputs reads its pieces where they lie and
# all-reduces 8 x 16 partial sums instead of gathering 8 x 8192 inputs
cat >"$TMP/rp.json" <<'JSON'
{
  "format": "soapflow-model",
  "version": 1,
  "name": "rp",
  "ops": [
    {"name": "x", "type": "input", "shape": [8, 4096], "is_index": false},
    {"name": "fc1", "type": "linear", "inputs": ["x"], "out_features": 8192, "bias": true},
    {"name": "fc2", "type": "linear", "inputs": ["fc1"], "out_features": 16, "bias": true}
  ]
}
JSON
M='p100-4x4[4]'

# fc2's degrees: its reduce degree (the third entry), 1 when left out
reduce_of() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["ops"]["fc2"]["degrees"]; print(d[2] if len(d) > 2 else 1)' "$1"; }

"$SF" search --help | grep -q -- "--reduce-splits" || fail "search --help: no --reduce-splits"
for algo in optcnn mcmc; do
    run "$algo" "$SF" search --model "$TMP/rp.json" --machine "$M" --algo "$algo" --iters 1500 \
        --json --out "$TMP/$algo.json"
    expect_ok "$algo"
    [ "$(reduce_of "$TMP/$algo.json")" = 1 ] || fail "$algo without --reduce-splits: a reduce split"
    run "$algo-r" "$SF" search --model "$TMP/rp.json" --machine "$M" --algo "$algo" --iters 1500 \
        --reduce-splits --json --out "$TMP/$algo-r.json"
    expect_ok "$algo-r"
    r=$(reduce_of "$TMP/$algo-r.json")
    [ "$r" -gt 1 ] || fail "$algo --reduce-splits: fc2 not split on its inputs: $(grep fc2 "$TMP/$algo-r.json")"
    best=$(json_num "$TMP/$algo-r.out" best_ms)
    plain=$(json_num "$TMP/$algo.out" best_ms)
    awk -v a="$best" -v b="$plain" 'BEGIN { exit !(a < b) }' ||
        fail "$algo --reduce-splits: $best ms, not faster than $plain ms without"
    run "$algo-sim" "$SF" simulate --model "$TMP/rp.json" --machine "$M" --strategy "$TMP/$algo-r.json" \
        --json --save-strategy "$TMP/$algo-back.json"
    expect_ok "$algo-sim"
    [ "$(json_num "$TMP/$algo-sim.out" iter_ms)" = "$best" ] ||
        fail "$algo: simulate gives $(json_num "$TMP/$algo-sim.out" iter_ms) ms, search said $best"
    cmp -s <(grep -v '"machine"' "$TMP/$algo-r.json") <(grep -v '"machine"' "$TMP/$algo-back.json") ||
        fail "$algo: the strategy does not write back the same"
done

# an unsplit reduction is left out of the file: fc1's degrees have two entries
grep -q '"fc1": {"degrees": \[[0-9]*, [0-9]*\]' "$TMP/optcnn.json" ||
    fail "a reduce degree of 1 was written: $(grep fc1 "$TMP/optcnn.json")"
# attention heads (a reduction after (N, T, D)) come with the flag: OptCNN
# splits a small GPT's attentions on heads, and simulate reads it back
G=(--model gpt --layers 2 --hidden 256 --heads 8 --seq-len 64 --vocab 1000 -b 16 --machine "$M")
heads_of() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["ops"]["h0.attn"]["degrees"]; print(d[3] if len(d) > 3 else 1)' "$1"; }
run gpt "$SF" search "${G[@]}" --algo optcnn --json --out "$TMP/gpt.json"
expect_ok gpt
[ "$(heads_of "$TMP/gpt.json")" = 1 ] || fail "gpt without --reduce-splits: a head split"
run gpt-r "$SF" search "${G[@]}" --algo optcnn --reduce-splits --json --out "$TMP/gpt-r.json"
expect_ok gpt-r
[ "$(heads_of "$TMP/gpt-r.json")" -gt 1 ] ||
    fail "gpt --reduce-splits: h0.attn not split on heads: $(grep h0.attn "$TMP/gpt-r.json")"
run gpt-sim "$SF" simulate "${G[@]}" --strategy "$TMP/gpt-r.json" --json
expect_ok gpt-sim
[ "$(json_num "$TMP/gpt-sim.out" iter_ms)" = "$(json_num "$TMP/gpt-r.out" best_ms)" ] ||
    fail "gpt: simulate gives $(json_num "$TMP/gpt-sim.out" iter_ms) ms, search said $(json_num "$TMP/gpt-r.out" best_ms)"
# softmax_ce's classes (its inner dimension) come with the flag too: after a
# column-parallel 32000-class layer, OptCNN keeps the logits where they are
# and splits the loss on its classes (vocabulary-parallel cross-entropy)
V=(--model mlp --mlp-sizes 1024,4096,32000 -b 64 --machine "$M")
classes_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ops"]["loss"]["degrees"][1])' "$1"; }
run vp "$SF" search "${V[@]}" --algo optcnn --json --out "$TMP/vp.json"
expect_ok vp
[ "$(classes_of "$TMP/vp.json")" = 1 ] || fail "mlp without --reduce-splits: a class split"
run vp-r "$SF" search "${V[@]}" --algo optcnn --reduce-splits --json --out "$TMP/vp-r.json"
expect_ok vp-r
[ "$(classes_of "$TMP/vp-r.json")" -gt 1 ] ||
    fail "mlp --reduce-splits: loss not split on its classes: $(grep loss "$TMP/vp-r.json")"
awk -v a="$(json_num "$TMP/vp-r.out" best_ms)" -v b="$(json_num "$TMP/vp.out" best_ms)" \
    'BEGIN { exit !(a < b) }' || fail "mlp --reduce-splits: not faster than without"
run vp-sim "$SF" simulate "${V[@]}" --strategy "$TMP/vp-r.json" --json
expect_ok vp-sim
[ "$(json_num "$TMP/vp-sim.out" iter_ms)" = "$(json_num "$TMP/vp-r.out" best_ms)" ] ||
    fail "mlp: simulate gives $(json_num "$TMP/vp-sim.out" iter_ms) ms, search said $(json_num "$TMP/vp-r.out" best_ms)"

# a GPT's tied table (wte and lm_head): megatron splits both on the vocabulary
# alike, a file that splits them two ways is refused in one line naming the file
# and both operators, and search --reduce-splits keeps the tie
G=(--model gpt --layers 1 --hidden 32 --heads 4 --seq-len 8 --vocab 16 --batch 4 --machine 'cpu[4]')
run tie-mega "$SF" simulate "${G[@]}" --strategy megatron --json --save-strategy "$TMP/tie.json"
expect_ok tie-mega
python3 - "$TMP/tie.json" "$TMP/tie-bad.json" <<'PY' || fail "megatron: the tied table is not split on the vocabulary: $(grep -E 'wte|lm_head' "$TMP/tie.json")"
import json, sys
d = json.load(open(sys.argv[1]))
w, h = d["ops"]["wte"], d["ops"]["lm_head"]
assert w["degrees"][3] == 4 and h["degrees"][2] == 4 and w["devices"] == h["devices"], (w, h)
d["ops"]["lm_head"] = {"degrees": [1, 1, 2], "devices": [0, 1]}
json.dump(d, open(sys.argv[2], "w"))
PY
run tie-bad "$SF" simulate "${G[@]}" --strategy "$TMP/tie-bad.json"
expect_error tie-bad
grep -q "tie-bad.json: tied operators 'wte' .* and 'lm_head'" "$TMP/tie-bad.err" ||
    fail "tie-bad: $(cat "$TMP/tie-bad.err")"
run tie-search "$SF" search "${G[@]}" --reduce-splits --iters 600 --out "$TMP/tie-s.json"
expect_ok tie-search
run tie-back "$SF" simulate "${G[@]}" --strategy "$TMP/tie-s.json"
expect_ok tie-back
echo "cli_partial_sums: ok"
