#!/usr/bin/env bash
# cli_devices.sh - every device of a large machine usable (issue 25, item 2):
# on a 256-device machine data parallelism keeps every device busy and
# `simulate` and `search` say nothing; a strategy that leaves devices idle gets
# one warning line naming them, and simulate's JSON counts them; a strategy file
# with more than 64 parts on an operator reads and simulates.
#
# Run by CTest as: bash tests/cli_devices.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_devices.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-dev.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

# dgx-h100 with 32 nodes: 256 devices
run machines "$SF" machines --json dgx-h100
expect_ok machines
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))[0]
d["nodes"] = 32
d["name"] = "dgx-h100-256"
json.dump(d, open(sys.argv[2], "w"), indent=1)' "$TMP/machines.out" "$TMP/h256.json" ||
    fail "could not write the 256-device machine"
M="$TMP/h256.json"

# ---- data parallelism at 1 sample a device: every device busy, no warning ----
run data "$SF" simulate --model transformer --batch 256 --machine "$M" --json
expect_ok data
valid_json "$TMP/data.out" || fail "simulate --json: not valid JSON"
[ "$(json_int "$TMP/data.out" devices)" = 256 ] || fail "simulate: devices is not 256"
[ "$(json_int "$TMP/data.out" idle_devices)" = 0 ] ||
    fail "data parallelism on 256 devices: idle_devices $(json_int "$TMP/data.out" idle_devices), want 0"
[ ! -s "$TMP/data.err" ] || fail "data parallelism on 256 devices warned: $(cat "$TMP/data.err")"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
idle = [p["device"] for p in d["per_device"] if not p["busy_ms"] > 0]
sys.exit("devices without work: %s" % idle[:10] if idle else 0)' "$TMP/data.out" ||
    fail "data parallelism on 256 devices leaves a device without work"

# ---- a batch of 64: 192 devices idle, one warning line naming them -----------
run data64 "$SF" simulate --model transformer --batch 64 --machine "$M" --json
expect_ok data64
[ "$(json_int "$TMP/data64.out" idle_devices)" = 192 ] || fail "batch 64: idle_devices is not 192"
[ "$(wc -l <"$TMP/data64.err")" -eq 1 ] || fail "batch 64: want one warning line: $(cat "$TMP/data64.err")"
grep -q "^soapflow: warning: strategy 'data' leaves 192 of 256 devices idle (64-255)" \
    "$TMP/data64.err" || fail "batch 64: warning is '$(cat "$TMP/data64.err")'"

run single "$SF" simulate --model mlp --machine "$M" -s single
expect_ok single
[ "$(wc -l <"$TMP/single.err")" -eq 1 ] || fail "single: want one warning line: $(cat "$TMP/single.err")"
grep -q "leaves 255 of 256 devices idle (1-255)" "$TMP/single.err" ||
    fail "single: warning is '$(cat "$TMP/single.err")'"

# ---- a strategy file with 128 parts on an operator reads and simulates ---------
run save "$SF" simulate --model mlp --batch 256 --machine "$M" --save-strategy "$TMP/s.json"
expect_ok save
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
ops = s["ops"]
name = next(n for n, c in ops.items() if len(c["devices"]) == 256)
ops[name]["degrees"] = [128] + [1] * (len(ops[name]["degrees"]) - 1)
ops[name]["devices"] = list(range(255, 127, -1))
json.dump(s, open(sys.argv[1], "w"), indent=1)' "$TMP/s.json" || fail "could not edit the strategy"
run file "$SF" simulate --model mlp --batch 256 --machine "$M" -s "$TMP/s.json" --json
expect_ok file
[ "$(json_int "$TMP/file.out" idle_devices)" = 0 ] || fail "strategy file: idle_devices is not 0"
positive "$(json_num "$TMP/file.out" iter_ms)" || fail "strategy file: no iteration time"

# ---- search: the best strategy's idle devices, in JSON and one warning ----------
run search "$SF" search --model mlp --batch 256 --machine "$M" --algo mcmc --iters 30 --json
expect_ok search
valid_json "$TMP/search.out" || fail "search --json: not valid JSON"
n=$(json_int "$TMP/search.out" best_idle_devices)
[ -n "$n" ] || fail "search --json: no best_idle_devices"
if [ "$n" = 0 ]; then
    grep -q "devices idle" "$TMP/search.err" && fail "search warned with no idle device"
else
    [ "$(grep -c "devices idle" "$TMP/search.err")" -eq 1 ] ||
        fail "search: $n idle devices but no single warning line: $(cat "$TMP/search.err")"
fi
run search64 "$SF" search --model mlp --batch 64 --machine "$M" --algo mcmc --iters 5 --json
expect_ok search64
n=$(json_int "$TMP/search64.out" best_idle_devices)
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "search at batch 64 on 256 devices: best_idle_devices '$n'"
[ "$(grep -c "leaves $n of 256 devices idle" "$TMP/search64.err")" -eq 1 ] ||
    fail "search at batch 64: warning is '$(cat "$TMP/search64.err")'"
echo "cli_devices: ok"
