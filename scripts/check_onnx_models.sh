#!/usr/bin/env bash
# check_onnx_models.sh - the torchvision models and the LSTM language model that
# `scripts/make_onnx_fixtures.py --big DIR` exported: each must import with
# PyTorch's parameter count (DIR/expected.json), and `soapflow search` must run
# on it; one that names a zoo model ("zoo": "gpt2") must also have that model's
# operator count, parameters and forward FLOPs. Prints a markdown table, one row
# per model with the figures bench/RESULTS.md records (a refused model's row says
# what it lacks), and on stderr how many held.
#
#   /usr/bin/python3 scripts/make_onnx_fixtures.py --big /tmp/onnx-big
#   [ONLY=name,...] scripts/check_onnx_models.sh /tmp/onnx-big [build/soapflow] [search options...]
#
# The default search is --machine p100-4x4 --iters 2000 (the default batch:
# 64 per device). Goes on past a model that does not hold; exits non-zero if any
# did not.
set -u
DIR=${1:?usage: check_onnx_models.sh DIR [soapflow] [search options...]}
SF=${2:-"$(cd "$(dirname "$0")/.." && pwd)/build/soapflow"}
shift $(($# >= 2 ? 2 : 1))
SEARCH=("$@")
[ ${#SEARCH[@]} -gt 0 ] || SEARCH=(--machine p100-4x4 --iters 2000)
[ -x "$SF" ] || { echo "check_onnx_models: no soapflow at $SF" >&2; exit 1; }
[ -f "$DIR/expected.json" ] || { echo "check_onnx_models: no $DIR/expected.json" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-onnx-big.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# name file params zoo, one line each, from expected.json (no jq needed)
python3 - "$DIR/expected.json" "${ONLY:-}" >"$TMP/list" <<'PY' || exit 1
import json, sys
only = set(sys.argv[2].split(",")) if sys.argv[2] else None
for name, e in json.load(open(sys.argv[1])).items():
    if only and name not in only:
        continue
    print(name, e["file"], e["params"], e.get("zoo", "-"))
PY

status=0 ok=0 all=0
echo "| model | file | parameters imported | PyTorch's | operators | forward GFLOP | import | data parallel | best found | search |"
echo "|---|---|---|---|---|---|---|---|---|---|"
while read -r name file want zoo; do
    all=$((all + 1))
    if [ ! -f "$DIR/$file" ]; then
        echo "| $name | (not exported) | | $want | | | | | | refused by torch.onnx.export: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]].get("export_error", "no file"))' "$DIR/expected.json" "$name") |"
        status=1
        continue
    fi
    mb=$(python3 -c 'import os,sys; print("%.1f MB" % (os.path.getsize(sys.argv[1]) / 1e6))' "$DIR/$file")
    t0=$(date +%s.%N)
    if ! "$SF" graph --model "$DIR/$file" --json >"$TMP/g.json" 2>"$TMP/g.err"; then
        echo "| $name | $mb | | $want | | | | | | refused: $(tr '|' '/' <"$TMP/g.err" | head -c 400) |"
        status=1
        continue
    fi
    ti=$(python3 -c 'import sys; print("%.2f s" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$(date +%s.%N)")
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params"])' "$TMP/g.json")
    ops=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ops"])' "$TMP/g.json")
    gf=$(python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["flops_fwd"] / 1e9))' "$TMP/g.json")
    if [ "$got" != "$want" ]; then
        echo "$name: $got parameters imported, PyTorch has $want" >&2
        status=1
    fi
    if [ "$zoo" != "-" ]; then
        "$SF" graph --model "$zoo" --json >"$TMP/z.json" 2>"$TMP/z.err" ||
            { echo "$name: zoo model $zoo: $(cat "$TMP/z.err")" >&2; status=1; continue; }
        python3 - "$TMP/g.json" "$TMP/z.json" "$name" "$zoo" <<'PY' || status=1
import json, sys
g, z = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bad = [k for k in ("ops", "params", "flops_fwd", "flops_bwd") if g[k] != z[k]]
if bad:
    sys.exit("%s: %s differ from the zoo's %s" % (sys.argv[3], ", ".join(bad), sys.argv[4]))
PY
    fi
    t0=$(date +%s.%N)
    if ! "$SF" search --model "$DIR/$file" "${SEARCH[@]}" --json >"$TMP/s.json" 2>"$TMP/s.err"; then
        echo "| $name | $mb | $got | $want | $ops | $gf | $ti | | | search failed: $(tr '|' '/' <"$TMP/s.err" | head -c 400) |"
        status=1
        continue
    fi
    t1=$(date +%s.%N)
    [ "$got" = "$want" ] && ok=$((ok + 1))
    python3 - "$TMP/s.json" "$name" "$got" "$want" "$ops" "$gf" "$t0" "$t1" "$mb" "$ti" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
name, got, want, ops, gf, t0, t1, mb, ti = sys.argv[2:11]
fit = lambda ok: "" if ok else ", does not fit"
print("| %s | %s | %s | %s | %s | %s | %s | %.3f ms%s | %.3f ms (%s, %.2fx%s) | %.1f s |" % (
    name, mb, "{:,}".format(int(got)), "{:,}".format(int(want)), ops,
    "{:,}".format(float(gf)), ti, s["baselines"]["data"], fit(s["data_fits"]), s["best_ms"],
    s["best"], s["speedup_vs_data"], fit(s["best_fits"]), float(t1) - float(t0)))
PY
done <"$TMP/list"
echo "$ok of $all import with PyTorch's parameter count and search on them" >&2
exit $status
