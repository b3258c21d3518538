#!/usr/bin/env bash
# cli_basic.sh - the soapflow command line as a user meets it.
#
# Run by CTest as: bash tests/cli_basic.sh <path-to-soapflow> <source-dir>
# Each check runs the real binary and stops at the first failure with a
# message saying what was expected and what came out.
set -u

SF=${1:?usage: cli_basic.sh <path-to-soapflow> <source-dir>}
SRC=${2:-.}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-cli.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

# ---- models: the names only, one a line --------------------------------
run models "$SF" models
expect_ok models
for m in lenet5 alexnet vgg16 resnet18 resnet50 resnet101 inception_v3 rnntc rnnlm nmt gnmt mlp \
    transformer gpt gpt2 gpt2-medium gpt2-large gpt2-xl gpt3; do
    grep -qx "$m" "$TMP/models.out" || fail "models: '$m' is not on a line of its own"
done
if grep -v '^[a-z0-9_-]*$' "$TMP/models.out" >/dev/null; then
    fail "models: plain output holds more than names: $(grep -v '^[a-z0-9_-]*$' "$TMP/models.out")"
fi
run models_json "$SF" models --json
expect_ok models_json
grep -q '"name": *"resnet50"' "$TMP/models_json.out" || fail "models --json: no resnet50"
grep -q '"summary"' "$TMP/models_json.out" || fail "models --json: no summary"

# ---- machines -----------------------------------------------------------
run machines "$SF" machines
expect_ok machines
grep -q '^p100-4x4 ' "$TMP/machines.out" || fail "machines: no p100-4x4 row"
run machines_json "$SF" machines --json
expect_ok machines_json
tr -d ' \n' <"$TMP/machines_json.out" | grep -q '"name":"p100-4x4","nodes":4,"devices_per_node":4' ||
    fail "machines --json: no p100-4x4 of 4 nodes of 4 devices"
# --json is an array of machine files, as the machine writer writes them: each
# element saved alone is a file that --machine reads as the same machine (the
# same description written again, the same simulation)
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TMP/machines_json.out" "$TMP" <<'EOF' || fail "machines --json: not valid JSON or not machine files"
import json, sys
ms = json.load(open(sys.argv[1]))
names = [m["name"] for m in ms]
assert len(names) == len(set(names)) and "p100-4x4" in names, names
p100 = ms[names.index("p100-4x4")]
assert p100["nodes"] * p100["devices_per_node"] == 16, p100
for m in ms:
    assert set(m) >= {"name", "nodes", "devices_per_node", "device", "intra", "inter"}, m
    with open("%s/preset-%s.json" % (sys.argv[2], m["name"]), "w") as f:
        json.dump(m, f, indent=2)
with open(sys.argv[2] + "/preset-names", "w") as f:
    f.write("\n".join(names) + "\n")
EOF
    while read -r name; do
        file="$TMP/preset-$name.json"
        run "again_$name" "$SF" machines --json "$file"
        expect_ok "again_$name"
        run "elem_$name" "$SF" machines --json "$name"
        expect_ok "elem_$name"
        cmp -s "$TMP/again_$name.out" "$TMP/elem_$name.out" ||
            fail "machines --json $file: not the description of preset $name again"
        run "sim_preset_$name" "$SF" simulate --model lenet5 --machine "$name" --strategy data --json
        expect_ok "sim_preset_$name"
        run "sim_file_$name" "$SF" simulate --model lenet5 --machine "$file" --strategy data --json
        expect_ok "sim_file_$name"
        cmp -s "$TMP/sim_preset_$name.out" "$TMP/sim_file_$name.out" ||
            fail "simulate --machine $file: not what preset $name simulates"
    done <"$TMP/preset-names"
fi

# A machine file works where a preset does, and sets the default batch.
cat >"$TMP/tiny.json" <<'JSON'
{
  "name": "tiny2x2",
  "nodes": 2,
  "devices_per_node": 2,
  "device": {"name": "X", "peak_tflops": {"fp32": 1.0}, "mem_bw_GBps": 100.0, "mem_GB": 8.0},
  "intra": {"topology": "switch", "bandwidth_GBps": 10.0, "latency_us": 1.0},
  "inter": {"nics_per_node": 1, "bandwidth_GBps": 5.0, "latency_us": 2.0}
}
JSON
run machine_file "$SF" machines --json "$TMP/tiny.json"
expect_ok machine_file
tr -d ' \n' <"$TMP/machine_file.out" | grep -q '"name":"tiny2x2","nodes":2,"devices_per_node":2' ||
    fail "machines FILE --json: no tiny2x2 of 2 nodes of 2 devices"
run machine_file_batch "$SF" graph --model lenet5 --machine "$TMP/tiny.json" --json
expect_ok machine_file_batch
[ "$(json_int "$TMP/machine_file_batch.out" batch)" = 256 ] ||
    fail "graph --machine FILE: batch $(json_int "$TMP/machine_file_batch.out" batch), want 256"

# ---- graph: ResNet-50 has torchvision's parameter count ------------------
run r50 "$SF" graph --model resnet50 --batch 1 --json
expect_ok r50
params=$(json_int "$TMP/r50.out" params)
[ "$params" = 25557032 ] || fail "graph resnet50: params '$params', want 25557032"
[ "$(json_int "$TMP/r50.out" batch)" = 1 ] || fail "graph resnet50 --batch 1: batch is not 1"
for key in model ops flops_fwd flops_bwd activation_bytes; do
    grep -q "\"$key\":" "$TMP/r50.out" || fail "graph --json: no \"$key\""
done

# ---- graph: the GPTs count the published parameters (the tied head once) --
for pair in gpt2:124439808 gpt2-medium:354823168 gpt2-large:774030080 gpt2-xl:1557611200 \
    gpt3:174604259328; do
    m=${pair%%:*}
    run "gpt_$m" "$SF" graph --model "$m" --batch 1 --json
    expect_ok "gpt_$m"
    [ "$(json_int "$TMP/gpt_$m.out" params)" = "${pair#*:}" ] ||
        fail "graph $m: params '$(json_int "$TMP/gpt_$m.out" params)', want ${pair#*:}"
done
# the sizes as options: 12 L h^2 + 13 L h + (V + S) h + 2h = 13,536 for L 1, h 32, S 8, V 16
run gpt_small "$SF" graph --model gpt --layers 1 --hidden 32 --heads 4 --seq-len 8 --vocab 16 \
    --batch 2 --json
expect_ok gpt_small
[ "$(json_int "$TMP/gpt_small.out" params)" = 13536 ] ||
    fail "graph gpt --layers 1 ...: params '$(json_int "$TMP/gpt_small.out" params)', want 13536"
# the tied head survives a model file: share_weights across types, counted once
run gpt_save "$SF" graph --model gpt --layers 1 --hidden 32 --heads 4 --seq-len 8 --vocab 16 \
    --batch 2 --save "$TMP/gpt.json"
expect_ok gpt_save
grep -q '"name": "lm_head", .*"bias": false, "share_weights": "wte"' "$TMP/gpt.json" ||
    fail "graph gpt --save: the head is not tied to wte"
run gpt_load "$SF" graph --model "$TMP/gpt.json" --json
expect_ok gpt_load
[ "$(json_int "$TMP/gpt_load.out" params)" = 13536 ] ||
    fail "gpt model file: params '$(json_int "$TMP/gpt_load.out" params)', want 13536"
run gpt_heads "$SF" graph --model gpt --hidden 32 --heads 5
expect_error gpt_heads
grep -q "hidden (32) must be a multiple of heads (5)" "$TMP/gpt_heads.err" ||
    fail "gpt --heads 5: $(cat "$TMP/gpt_heads.err")"
run lenet_layers "$SF" graph --model lenet5 --layers 2
expect_usage lenet_layers
grep -q "\-\-layers does not apply to lenet5" "$TMP/lenet_layers.err" ||
    fail "lenet5 --layers: $(cat "$TMP/lenet_layers.err")"

# The default batch is 64 per device of the machine (p100-4x4: 16 devices).
run r50_default "$SF" graph --model resnet50 --json
expect_ok r50_default
[ "$(json_int "$TMP/r50_default.out" batch)" = 1024 ] ||
    fail "graph resnet50: default batch $(json_int "$TMP/r50_default.out" batch), want 1024"
run r50_a100 "$SF" graph --model resnet50 --machine dgx-a100 --json
expect_ok r50_a100
[ "$(json_int "$TMP/r50_a100.out" batch)" = 4096 ] ||
    fail "graph --machine dgx-a100: batch $(json_int "$TMP/r50_a100.out" batch), want 4096"

# Text mode shows the exact count with separators, and --ops a row per operator.
run r50_text "$SF" graph --model resnet50 --batch 2 --ops
expect_ok r50_text
grep -q '25,557,032' "$TMP/r50_text.out" || fail "graph text: no '25,557,032'"
grep -q 'N:s C:p' "$TMP/r50_text.out" || fail "graph --ops: no parallel dims column"

# ---- graph: pictures and model files -----------------------------------
run dot "$SF" graph --model lenet5 --batch 4 --dot "$TMP/lenet.dot"
expect_ok dot
[ -s "$TMP/lenet.dot" ] || fail "graph --dot: no file written"
head -c 7 "$TMP/lenet.dot" | grep -q '^digraph' || fail "graph --dot: file does not start with digraph"

run save "$SF" graph --model resnet18 --batch 8 --json --save "$TMP/r18.json"
expect_ok save
[ -s "$TMP/r18.json" ] || fail "graph --save: no file written"
run load "$SF" graph --model "$TMP/r18.json" --json
expect_ok load
for key in params flops_fwd flops_bwd batch ops; do
    a=$(json_num "$TMP/save.out" "$key")
    b=$(json_num "$TMP/load.out" "$key")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "graph --save then load: $key '$a' != '$b'"
done
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary file was left behind: $(ls "$TMP")"

# ---- the sample in docs/formats-model.md is a model that loads -------------
sed -n '/^```json$/,/^```$/p' "$SRC/docs/formats-model.md" | sed '1d;$d' >"$TMP/doc_model.json"
[ -s "$TMP/doc_model.json" ] || fail "docs/formats-model.md: no JSON sample found"
run doc_model "$SF" graph --model "$TMP/doc_model.json"
expect_ok doc_model
grep -q "operators    7" "$TMP/doc_model.out" ||
    fail "docs/formats-model.md sample: $(cat "$TMP/doc_model.out")"

# ---- errors: one line, a status, never a crash --------------------------
printf '{\n  "format": "soapflow-model",\n  "version": 1,,\n  "ops": []\n}\n' >"$TMP/broken.json"
run broken "$SF" graph --model "$TMP/broken.json"
expect_error broken
grep -q "broken.json" "$TMP/broken.err" || fail "malformed model: message lacks the file name"
grep -q ":3:" "$TMP/broken.err" || fail "malformed model: message lacks ':3:': $(cat "$TMP/broken.err")"

# A model without operators has nothing to plan: every command refuses it at
# load, with the same line naming the file (search's table once crashed on it).
printf '{"format": "soapflow-model", "version": 1, "name": "e", "ops": []}\n' >"$TMP/no_ops.json"
for args in "graph" "graph --json" "simulate" "simulate --json" "search --iters 10" \
    "search --iters 10 --json" "bench sim --moves 2" "profile --out $TMP/no_ops_costs.json"; do
    # shellcheck disable=SC2086
    run no_ops "$SF" $args --model "$TMP/no_ops.json" --machine cpu
    expect_error no_ops
    grep -q "no_ops.json:1:[0-9]*: \"ops\" is empty: a model needs at least one operator" \
        "$TMP/no_ops.err" || fail "$args on a model without operators: $(cat "$TMP/no_ops.err")"
done
[ ! -e "$TMP/no_ops_costs.json" ] || fail "profile on a model without operators wrote a file"

run missing_file "$SF" graph --model "$TMP/nope.json"
expect_error missing_file

run unknown_model "$SF" graph --model no_such_model
expect_error unknown_model
grep -q "no_such_model" "$TMP/unknown_model.err" || fail "unknown model: message lacks its name"

run unknown_machine "$SF" graph --model lenet5 --machine no_such_machine
expect_error unknown_machine

run unknown_cmd "$SF" frobnicate
expect_error unknown_cmd
[ "$(rc_of unknown_cmd)" -eq 2 ] || fail "unknown command: status $(rc_of unknown_cmd), want 2"
grep -q "frobnicate" "$TMP/unknown_cmd.err" || fail "unknown command: message lacks its name"

run unknown_opt "$SF" graph --model lenet5 --frobnicate
expect_error unknown_opt
[ "$(rc_of unknown_opt)" -eq 2 ] || fail "unknown option: status $(rc_of unknown_opt), want 2"
grep -q -- "--frobnicate" "$TMP/unknown_opt.err" || fail "unknown option: message lacks its name"
grep -q -- "--help" "$TMP/unknown_opt.err" || fail "unknown option: no hint to --help"

for bad in 0 -3 12x 99999999999999999999 ''; do
    run bad_batch "$SF" graph --model lenet5 --batch "$bad"
    expect_error bad_batch
    [ "$(rc_of bad_batch)" -eq 2 ] || fail "graph --batch '$bad': status $(rc_of bad_batch), want 2"
done
run eq_batch "$SF" graph --model lenet5 --batch=3 --json
expect_ok eq_batch
[ "$(json_int "$TMP/eq_batch.out" batch)" = 3 ] || fail "graph --batch=3: batch is not 3"

run no_model "$SF" graph
expect_error no_model

run file_batch "$SF" graph --model "$TMP/r18.json" --batch 4
expect_error file_batch

# A write that fails leaves no file and says so.
run bad_dot "$SF" graph --model lenet5 --batch 1 --dot "$TMP/no/such/dir/x.dot"
expect_error bad_dot

# ---- help: every command has one, and it exits 0 ------------------------
for args in "--help" "-h" "help" "models --help" "machines --help" "graph --help" "help graph" \
    "--version"; do
    # shellcheck disable=SC2086
    run help "$SF" $args
    expect_ok help
    [ -s "$TMP/help.out" ] || fail "soapflow $args: printed nothing on stdout"
done
for cmd in models machines graph; do
    run help "$SF" "$cmd" --help
    grep -q "example" "$TMP/help.out" || fail "soapflow $cmd --help: no example"
done

echo "cli_basic: all checks passed"
