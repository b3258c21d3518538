#!/usr/bin/env bash
# cli_checkpoint.sh - `soapflow train` checkpoints as a careless or hostile user
# meets them (issue 29): metadata numbers out of range are one line naming the
# file and the key; operator names of any length make whole tensor names; a
# run killed by SIGKILL keeps the checkpoint --save-every last wrote, resumes
# from it to the weights of the run that was not killed, and its stranded
# temporary goes at the next start; the cosine schedule stays at 0 after its
# end, and a cosine run cut 3 + 3 with --lr-steps 6 is one run of 6, bit for
# bit. One rank and synthetic data keep it to seconds.
#
# Run by CTest as: bash tests/cli_checkpoint.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_checkpoint.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-ckpt.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3 (to read and edit safetensors headers)"
SMALL=(--model lenet5 --batch 8 --data synthetic)

# st_meta IN OUT KEY VALUE: a copy of a checkpoint with one metadata value set
st_meta() {
    python3 - "$@" <<'EOF'
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"][key] = value
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
EOF
}
# st_get FILE KEY: a metadata value
st_get() {
    python3 - "$1" "$2" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"].get(sys.argv[2], ""))
EOF
}
# st_same_weights A B: the two files hold the same weights (not momentum), byte for byte
st_same_weights() {
    python3 - "$1" "$2" <<'EOF'
import json, struct, sys
def weights(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    d = b[8 + n:]
    return {k: d[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in h.items() if k != "__metadata__" and not k.endswith(".momentum")}
a, b = weights(sys.argv[1]), weights(sys.argv[2])
sys.exit(0 if a and a == b else 1)
EOF
}

run base "$SF" train "${SMALL[@]}" --iters 2 --save "$TMP/base.st"
expect_ok base

# ---- item 3: metadata out of range ---------------------------------------------------
for case in "soapflow.step 9223372036854775807" "soapflow.step -1" "soapflow.step 12x" \
    "soapflow.seed -5" "soapflow.lr_steps 0" "soapflow.lr_steps 9223372036854775807"; do
    set -- $case
    st_meta "$TMP/base.st" "$TMP/bad.st" "$1" "$2" || fail "cannot edit the checkpoint"
    run bad "$SF" train "${SMALL[@]}" --iters 2 --resume "$TMP/bad.st"
    expect_error bad
    grep -q "bad.st: metadata '$1'" "$TMP/bad.err" ||
        fail "$1 = $2: the message names not the file and key: $(cat "$TMP/bad.err")"
done
# a step in range whose run would pass the bound
st_meta "$TMP/base.st" "$TMP/late.st" soapflow.step 1099511627775 || fail "cannot edit"
run late "$SF" train "${SMALL[@]}" --iters 2 --resume "$TMP/late.st"
expect_error late
grep -q "late.st: metadata 'soapflow.step'" "$TMP/late.err" ||
    fail "step near the bound: $(cat "$TMP/late.err")"

# ---- item 4: long operator names ---------------------------------------------------------
long=$(printf 'f%.0s' $(seq 158))
cat >"$TMP/long.json" <<EOF
{"format": "soapflow-model", "version": 1, "name": "long", "ops": [
 {"name": "x", "type": "input", "shape": [8, 784], "is_index": false},
 {"name": "$long", "type": "linear", "inputs": ["x"], "out_features": 10},
 {"name": "loss", "type": "softmax_ce", "inputs": ["$long"]}]}
EOF
run long "$SF" train --model "$TMP/long.json" --data synthetic --iters 2 --save "$TMP/long.st"
expect_ok long
for suffix in weight bias weight.momentum bias.momentum; do
    grep -aq "\"$long.$suffix\"" "$TMP/long.st" || fail "long names: no tensor '<op>.$suffix'"
done
run long_resume "$SF" train --model "$TMP/long.json" --data synthetic --iters 1 \
    --resume "$TMP/long.st"
expect_ok long_resume

# ---- item 6: --save-every, SIGKILL, stale temporaries ----------------------------------------
run every_usage "$SF" train "${SMALL[@]}" --iters 2 --save-every 1
expect_usage every_usage
# a temporary of the target (left by a kill) goes; another target's stays
: >"$TMP/p.st.tmp.AbC123"
: >"$TMP/q.st.tmp.XyZ789"
"$SF" train "${SMALL[@]}" --iters 100000 --save-every 5 --save "$TMP/p.st" --log-every 1 \
    >"$TMP/kill.out" 2>"$TMP/kill.err" &
pid=$!
for _ in $(seq 300); do
    [ -e "$TMP/p.st" ] && break
    sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ -e "$TMP/p.st" ] || fail "--save-every 5: no checkpoint within 30 s: $(cat "$TMP/kill.err")"
[ -e "$TMP/p.st.tmp.AbC123" ] && fail "a stale temporary of the target was not removed"
[ -e "$TMP/q.st.tmp.XyZ789" ] || fail "another target's temporary was removed"
S=$(st_get "$TMP/p.st" soapflow.step)
[ -n "$S" ] && [ $((S % 5)) -eq 0 ] && [ "$S" -gt 0 ] ||
    fail "--save-every 5: checkpoint at step '$S'"
run after_kill "$SF" train "${SMALL[@]}" --iters 3 --resume "$TMP/p.st" --save "$TMP/p.st"
expect_ok after_kill
ls "$TMP" | grep -q '^p\.st\.tmp\.' && fail "a temporary of p.st is left: $(ls "$TMP")"
run straight "$SF" train "${SMALL[@]}" --iters $((S + 3)) --save "$TMP/straight.st"
expect_ok straight
cmp -s "$TMP/p.st" "$TMP/straight.st" ||
    fail "killed at $S, resumed for 3: not the weights of $((S + 3)) straight steps"

# ---- item 13: the cosine schedule ---------------------------------------------------------------
COS=("${SMALL[@]}" --lr 0.05 --lr-schedule cosine)
run lr_steps_const "$SF" train "${SMALL[@]}" --iters 2 --lr-steps 4
expect_usage lr_steps_const
run c6 "$SF" train "${COS[@]}" --iters 6 --save "$TMP/c6.st"
expect_ok c6
run c3 "$SF" train "${COS[@]}" --iters 3 --lr-steps 6 --save "$TMP/c3.st"
expect_ok c3
[ "$(st_get "$TMP/c3.st" soapflow.lr_steps)" = 6 ] || fail "cosine: lr_steps not saved"
run c33 "$SF" train "${COS[@]}" --iters 3 --resume "$TMP/c3.st" --save "$TMP/c33.st"
expect_ok c33
cmp -s "$TMP/c6.st" "$TMP/c33.st" || fail "cosine 3 + 3 (--lr-steps 6) is not one run of 6"
# a finished schedule continued: the rate stays 0, the weights do not move
run fin "$SF" train "${COS[@]}" --iters 3 --save "$TMP/fin.st"
expect_ok fin
run more "$SF" train "${COS[@]}" --iters 2 --resume "$TMP/fin.st" --save "$TMP/more.st"
expect_ok more
st_same_weights "$TMP/fin.st" "$TMP/more.st" ||
    fail "cosine continued past its end changed the weights (the rate rose again)"
echo "cli_checkpoint: ok"
