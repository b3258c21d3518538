#!/usr/bin/env bash
# cli_optcnn_memory.sh - OptCNN under memory (issue 26, item 5): `search --algo
# optcnn` on a machine where OptCNN's fastest answer does not fit answers one
# that fits (its row fits, its peak within what --memory-headroom leaves), and
# says how much the fastest one needed; on a machine where nothing in its space
# fits it says by how much its answer misses and what the peak holds, in the
# text and in --json; where the fastest fits, nothing is bounded.
#
# Run by CTest as: bash tests/cli_optcnn_memory.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_optcnn_memory.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-ocmem.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3"

# machine NAME GB: one node of 4 H100s with GB (1e9 bytes) each
machine() {
    "$SF" machines dgx-h100 --json | python3 -c '
import json, sys
m = json.load(sys.stdin)[0]
m.update(name="h100-4-" + sys.argv[2], nodes=1, devices_per_node=4)
m["device"]["mem_GB"] = float(sys.argv[2])
json.dump(m, open(sys.argv[1], "w"))' "$TMP/$1.json" "$2" || fail "could not write machine $1"
}
mlp=(--model mlp --mlp-sizes 4096,4096,4096,4096,4096,16 -b 16384 --dtype bf16 --optimizer adam
    --algo optcnn)
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# ---- room for the fastest: nothing bounded ---------------------------------------
machine big 80
run big "$SF" search "${mlp[@]}" --machine "$TMP/big.json" --json
expect_ok big
[ "$(field "$TMP/big.out" optcnn_fits)" = True ] || fail "big: the fastest does not fit"
[ "$(field "$TMP/big.out" optcnn_bounded)" = False ] || fail "big: bounded"
[ "$(field "$TMP/big.out" optcnn_solves)" = 1 ] || fail "big: more than one solve"
fast=$(field "$TMP/big.out" optcnn_peak_mem_bytes)
run bigt "$SF" search "${mlp[@]}" --machine "$TMP/big.json"
expect_ok bigt
grep -q "^optcnn: its fastest\|^optcnn: does not fit" "$TMP/bigt.out" && fail "big: memory lines"

# ---- nothing fits: by how much, and what the peak holds --------------------------
machine tiny 0.01
run tiny "$SF" search "${mlp[@]}" --machine "$TMP/tiny.json" --json
expect_ok tiny
python3 - "$TMP/tiny.out" "$fast" <<'PY' || fail "tiny: $(head -c 800 "$TMP/tiny.out")"
import json, sys
d = json.load(open(sys.argv[1]))
fast = float(sys.argv[2])
assert d["optcnn_fits"] is False and d["optcnn_bounded"] is True
assert abs(d["optcnn_mem_cap_bytes"] - 0.9e7) < 1
over = d["optcnn_over_bytes"]
assert over > 0 and abs(d["optcnn_peak_mem_bytes"] - d["optcnn_mem_cap_bytes"] - over) < 1
kinds = d["optcnn_peak_kinds"]
assert abs(sum(kinds.values()) - d["optcnn_peak_mem_bytes"]) < 1e-6 * d["optcnn_peak_mem_bytes"]
assert kinds[d["optcnn_peak_dominant"]] == max(kinds.values())
assert d["optcnn_peak_mem_bytes"] < fast, "the least memory found is not below the fastest's"
PY
least=$(field "$TMP/tiny.out" optcnn_peak_mem_bytes)
run tinyt "$SF" search "${mlp[@]}" --machine "$TMP/tiny.json"
expect_ok tinyt
grep -q "^optcnn: does not fit: device [0-9]* needs .* over the .* it may use; the peak holds" \
    "$TMP/tinyt.out" || fail "tiny: no miss line: $(cat "$TMP/tinyt.out")"

# ---- between the two: the fastest does not fit, the answer does -------------------
gb=$(python3 -c 'import sys; l, f = map(float, sys.argv[1:]); print((l + 0.25 * (f - l)) / 0.9 / 1e9)' \
    "$least" "$fast")
machine mid "$gb"
run mid "$SF" search "${mlp[@]}" --machine "$TMP/mid.json" --json
expect_ok mid
python3 - "$TMP/mid.out" <<'PY' || fail "mid: $(head -c 800 "$TMP/mid.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["optcnn_bounded"] is True and d["optcnn_fits"] is True
assert d["optcnn_fastest_peak_mem_bytes"] > d["optcnn_mem_cap_bytes"]
assert d["optcnn_peak_mem_bytes"] <= d["optcnn_mem_cap_bytes"]
assert d["optcnn_cost_ms"] >= d["optcnn_fastest_cost_ms"]
assert d["optcnn_solves"] > 1
assert "optcnn_over_bytes" not in d
PY
run midt "$SF" search "${mlp[@]}" --machine "$TMP/mid.json"
expect_ok midt
grep -q "^optcnn: its fastest answer (additive .* ms) needs .*; bounded by memory in [0-9]* solves" \
    "$TMP/midt.out" || fail "mid: no bound line: $(cat "$TMP/midt.out")"
grep -q "^optcnn: does not fit" "$TMP/midt.out" && fail "mid: a miss line for a fitting answer"
grep -q "^optcnn .* yes$" "$TMP/midt.out" || fail "mid: the optcnn row does not fit: $(cat "$TMP/midt.out")"
# with no headroom the cap is the whole memory
run mid0 "$SF" search "${mlp[@]}" --machine "$TMP/mid.json" --memory-headroom 0 --json
expect_ok mid0
python3 - "$TMP/mid0.out" "$gb" <<'PY' || fail "mid0: $(head -c 600 "$TMP/mid0.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert abs(d["optcnn_mem_cap_bytes"] - float(sys.argv[2]) * 1e9) < 1e3
PY
echo "cli_optcnn_memory: ok"
