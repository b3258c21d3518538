#!/usr/bin/env bash
# cli_optimizer.sh - `--optimizer sgd|adam|adamw` (issue 26, item 1): simulate,
# search and validate report it and price its state (Adam keeps 4 more bytes a
# weight than SGD: the peak grows by 4 x the weights of data parallelism's
# devices, exactly); sgd is the default and changes nothing; a bad value, or a
# hyperparameter of the other optimizer, is one line; train with Adam or AdamW
# for 10 steps is bit for bit the run cut into 5, --save, --resume and 5 more
# (the moments and the step count travel in the checkpoint), on one rank and
# on two under mpirun, ring and parameter server; a resume under another
# optimizer is refused in one line naming the file.
#
# Run by CTest as: bash tests/cli_optimizer.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_optimizer.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-optim.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"

str() { grep -o "\"$2\": *\"[^\"]*\"" "$1" | head -n 1 | sed 's/.*: *"//; s/"$//'; }

# ---- simulate: the default is sgd and changes nothing; adam's state is priced ------
sim=(--model mlp --machine "dgx-h100[8]" -s data --json)
run s0 "$SF" simulate "${sim[@]}"
expect_ok s0
run s1 "$SF" simulate "${sim[@]}" --optimizer sgd
expect_ok s1
cmp -s "$TMP/s0.out" "$TMP/s1.out" || fail "simulate: --optimizer sgd differs from the default"
[ "$(str "$TMP/s0.out" optimizer)" = sgd ] || fail "simulate --json: optimizer is not sgd by default"
for dt in fp32 bf16; do
    run "sg$dt" "$SF" simulate "${sim[@]}" --dtype "$dt"
    run "ad$dt" "$SF" simulate "${sim[@]}" --dtype "$dt" --optimizer adam
    expect_ok "sg$dt"
    expect_ok "ad$dt"
    [ "$(str "$TMP/ad$dt.out" optimizer)" = adam ] || fail "simulate --optimizer adam: not in the JSON"
    python3 - "$TMP/sg$dt.out" "$TMP/ad$dt.out" <<'EOF' || fail "simulate $dt: adam's memory is not sgd's + 4 bytes a weight"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for x, y in zip(a["per_device"], b["per_device"]):
    assert y["mem_bytes"] - x["mem_bytes"] == 4 * x["weight_elems"], (x, y)
assert b["iter_ms"] > a["iter_ms"]  # the update moves 32 (30) bytes a weight, not 24 (22)
EOF
done
run txt "$SF" simulate --model lenet5 --optimizer adamw
expect_ok txt
grep -q '^optimizer  *adamw (8 bytes of state a weight)$' "$TMP/txt.out" ||
    fail "simulate: the report does not name the optimizer: $(cat "$TMP/txt.out")"

# ---- search: the same option, in its JSON ----------------------------------------
run se "$SF" search --model lenet5 --machine "cpu[2]" --algo optcnn --optimizer adam --json
expect_ok se
[ "$(str "$TMP/se.out" optimizer)" = adam ] || fail "search --optimizer adam: not in the JSON"

# ---- bad values: one line --------------------------------------------------------
for cmd in simulate search train validate; do
    extra=()
    [ "$cmd" = validate ] && extra=(--strategies data)
    run "bad$cmd" "$SF" $cmd --model lenet5 "${extra[@]}" --optimizer rmsprop
    expect_usage "bad$cmd"
    grep -q "'rmsprop'" "$TMP/bad$cmd.err" || fail "$cmd --optimizer rmsprop: $(cat "$TMP/bad$cmd.err")"
done
run mom "$SF" train --model lenet5 --optimizer adam --momentum 0.5
expect_usage mom
run beta "$SF" train --model lenet5 --beta2 0.99
expect_usage beta
run beta1 "$SF" train --model lenet5 --optimizer adam --beta1 1
expect_usage beta1

# ---- train: 10 steps == 5, save, resume, 5 more, bit for bit ----------------------
small=(--model lenet5 --batch 8 --data synthetic)
for opt in adam adamw; do
    run "f$opt" "$SF" train "${small[@]}" --iters 10 --optimizer "$opt" --save "$TMP/full.st"
    expect_ok "f$opt"
    run "h$opt" "$SF" train "${small[@]}" --iters 5 --optimizer "$opt" --save "$TMP/half.st"
    expect_ok "h$opt"
    run "r$opt" "$SF" train "${small[@]}" --iters 5 --optimizer "$opt" --resume "$TMP/half.st" \
        --save "$TMP/res.st"
    expect_ok "r$opt"
    cmp -s "$TMP/full.st" "$TMP/res.st" || fail "train --optimizer $opt: 5 + resume 5 is not 10"
    python3 - "$TMP/res.st" "$opt" <<'EOF' || fail "train --optimizer $opt: the checkpoint lacks the moments or the optimizer"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
assert h["__metadata__"]["soapflow.optimizer"] == sys.argv[2]
assert h["__metadata__"]["soapflow.step"] == "10"
assert "conv1.weight.exp_avg" in h and "conv1.weight.exp_avg_sq" in h, sorted(h)[:8]
assert not any(k.endswith(".momentum") for k in h)
EOF
done
# the state matters: continuing the AdamW run from its weights alone (--init:
# fresh moments, step count 1) is another run
run init "$SF" train "${small[@]}" --iters 5 --optimizer adamw --init "$TMP/half.st" \
    --save "$TMP/init.st"
expect_ok init
python3 - "$TMP/init.st" "$TMP/res.st" <<'EOF' || fail "train: --init from an adamw checkpoint trains as --resume"
import json, struct, sys
def weights(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in h.items() if k.endswith(".weight")}
sys.exit(0 if weights(sys.argv[1]) != weights(sys.argv[2]) else 1)
EOF

# under mpirun, two ranks, ring and parameter server
for scheme in ring ps; do
    mp=(timeout 120 mpirun -n 2 "$SF" train "${small[@]}" --optimizer adam --sync-scheme "$scheme")
    run "mf$scheme" "${mp[@]}" --iters 10 --save "$TMP/mfull.st"
    expect_ok "mf$scheme"
    run "mh$scheme" "${mp[@]}" --iters 5 --save "$TMP/mhalf.st"
    expect_ok "mh$scheme"
    run "mr$scheme" "${mp[@]}" --iters 5 --resume "$TMP/mhalf.st" --save "$TMP/mres.st"
    expect_ok "mr$scheme"
    cmp -s "$TMP/mfull.st" "$TMP/mres.st" ||
        fail "mpirun -n 2 train --optimizer adam --sync-scheme $scheme: 5 + resume 5 is not 10"
done

# ---- a resume under another optimizer: one line naming the file ------------------
run other "$SF" train "${small[@]}" --iters 1 --resume "$TMP/half.st"
expect_error other
grep -q "half.st: saved by a run with --optimizer adamw" "$TMP/other.err" ||
    fail "resume under sgd: $(cat "$TMP/other.err")"
run sgdck "$SF" train "${small[@]}" --iters 2 --save "$TMP/sgd.st"
expect_ok sgdck
run other2 "$SF" train "${small[@]}" --iters 1 --optimizer adam --resume "$TMP/sgd.st"
expect_error other2
grep -q "sgd.st: saved by a run with --optimizer sgd, this one has adam" "$TMP/other2.err" ||
    fail "resume an sgd checkpoint under adam: $(cat "$TMP/other2.err")"

# ---- validate: the runtime and the predictions take it -----------------------------
run va timeout 120 mpirun -n 2 "$SF" validate --model lenet5 --batch 8 --strategies data \
    --iters 2 --rounds 1 --warmup 0 --optimizer adam --json
expect_ok va
[ "$(str "$TMP/va.out" optimizer)" = adam ] || fail "validate --optimizer adam: not in the JSON"

echo "cli_optimizer: ok"
