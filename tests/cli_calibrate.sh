#!/usr/bin/env bash
# cli_calibrate.sh - `mpirun -np 2 soapflow calibrate` writes a machine file that
# the other commands read. Small sizes keep it to a few seconds; it checks that
# the figures are there and valid, never what they are.
#
# Run by CTest as: bash tests/cli_calibrate.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_calibrate.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-cal.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# OpenMPI as root, more ranks than cores, one BLAS thread a rank (DESIGN.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
# Under AddressSanitizer, OpenMPI's own allocations at exit read as leaks;
# soapflow's are checked by every other test.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"

OUT="$TMP/machine.json"
timeout 240 mpirun -np 2 "$SF" calibrate --out "$OUT" --sizes 8:64K --gemm-size 128 \
    >"$TMP/cal.out" 2>"$TMP/cal.err" ||
    fail "mpirun -np 2 soapflow calibrate: status $?: $(cat "$TMP/cal.err")"
[ -s "$OUT" ] || fail "calibrate: no machine file"
for word in SGEMM 'half round trip' allreduce device link written; do
    grep -q "$word" "$TMP/cal.out" || fail "calibrate: no '$word' in the summary"
done
# the input pipeline: timed on the dataset when it is installed, left out with --data none
if [ -d /usr/share/datasets/fashion-mnist ] || [ -n "${SF_DATA_DIR:-}" ]; then
    grep -q '^input .*samples/s a rank' "$TMP/cal.out" ||
        fail "calibrate: no input pipeline rate: $(grep '^input' "$TMP/cal.out")"
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["device"]["input_samples_per_s"] > 0' \
        "$OUT" || fail "calibrate: no device.input_samples_per_s in $(cat "$OUT")"
fi
timeout 240 "$SF" calibrate --out "$TMP/none.json" --sizes 8:64K --gemm-size 128 --data none \
    >"$TMP/none.out" 2>&1 || fail "calibrate --data none: $(cat "$TMP/none.out")"
grep -q '^input .*not measured: --data none' "$TMP/none.out" ||
    fail "calibrate --data none: $(grep '^input' "$TMP/none.out")"
grep -q input_samples_per_s "$TMP/none.json" && fail "calibrate --data none wrote a rate"
"$SF" calibrate --out "$TMP/x.json" --data nope >"$TMP/bad.out" 2>&1 &&
    fail "calibrate --data nope succeeded"
[ "$(wc -l <"$TMP/bad.out")" -eq 1 ] && grep -q "'nope'" "$TMP/bad.out" ||
    fail "calibrate --data nope: $(cat "$TMP/bad.out")"
[ -e "$TMP/x.json" ] && fail "calibrate --data nope wrote a file"
# only rank 0 prints
[ "$(grep -c '^calibrated 2 ranks' "$TMP/cal.out")" -eq 1 ] || fail "calibrate: summary not once"
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary file was left behind: $(ls "$TMP")"

"$SF" machines --json "$OUT" >"$TMP/m.out" 2>"$TMP/m.err" ||
    fail "machines --json on the calibrated file: $(cat "$TMP/m.err")"
# machines --json shows the file as the machine writer writes it: the same
# machine, every figure there and positive
python3 - "$TMP/m.out" "$OUT" <<'EOF' || fail "calibrated machine: $(cat "$TMP/m.out")"
import json, math, sys
[m] = json.load(open(sys.argv[1]))
f = json.load(open(sys.argv[2]))
assert m["nodes"] == 1 and m["devices_per_node"] == 2, m
assert m["device"]["name"] == "cpu-rank" and m["intra"]["topology"] == "shm", m
for v in (m["device"]["peak_tflops"]["fp32"], m["device"]["mem_bw_GBps"], m["device"]["mem_GB"],
          m["intra"]["bandwidth_GBps"], m["intra"]["latency_us"], m["runtime"]["copy_GBps"]):
    assert v > 0, m
def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-15, abs_tol=0)
    return a == b
assert same(m, f), (m, f)
EOF

# what the runtime adds: its copies' rate always, the all-reduce rate with pairs
python3 - "$OUT" <<'EOF' || fail "calibrated machine: bad runtime object: $(cat "$OUT")"
import json, sys
rt = json.load(open(sys.argv[1]))["runtime"]
assert rt["copy_GBps"] > 0, rt
pts = rt.get("allreduce", [])
assert all(p["bytes"] >= 1 and p["link_GBps"] > 0 for p in pts), rt
assert [p["bytes"] for p in pts] == sorted(set(p["bytes"] for p in pts)), rt
assert "cores_per_node" not in rt, rt  # 2 ranks on a machine of at least 2 cores
EOF
# more ranks than cores: the cores are written, and every rank is pinned to one
CORES=$(nproc)
NP=$((CORES + 1))
timeout 240 mpirun -np "$NP" "$SF" calibrate --out "$TMP/over.json" --sizes 8:4K --gemm-size 64 \
    >"$TMP/over.out" 2>"$TMP/over.err" ||
    fail "mpirun -np $NP soapflow calibrate: status $?: $(cat "$TMP/over.err")"
grep -q "$NP ranks on $CORES cores" "$TMP/over.out" || fail "calibrate on $NP ranks: no cores line"
python3 - "$TMP/over.json" "$CORES" <<'EOF' || fail "oversubscribed machine: $(cat "$TMP/over.json")"
import json, sys
assert json.load(open(sys.argv[1]))["runtime"]["cores_per_node"] == int(sys.argv[2])
EOF

# the planning commands take it as a machine
"$SF" graph --model lenet5 --machine "$OUT" --json >"$TMP/g.out" 2>"$TMP/g.err" ||
    fail "graph --machine calibrated.json: $(cat "$TMP/g.err")"
[ "$(json_num "$TMP/g.out" batch)" = 128 ] || fail "graph on 2 ranks: batch is not 64 x 2"

# one rank, no mpirun: still a machine, with the preset's link kept
"$SF" calibrate --out "$TMP/one.json" --sizes 8:1K --gemm-size 64 >"$TMP/one.out" \
    2>"$TMP/one.err" || fail "calibrate on one rank: $(cat "$TMP/one.err")"
grep -q 'one rank' "$TMP/one.out" || fail "calibrate on one rank: does not say so"
"$SF" machines --json "$TMP/one.json" >/dev/null 2>&1 || fail "one-rank machine file unreadable"

"$SF" calibrate --sizes 64K:8 >/dev/null 2>"$TMP/bad.err"
rc=$?
[ "$rc" -eq 2 ] || fail "calibrate --sizes 64K:8: status $rc, want 2"
grep -q '^soapflow: ' "$TMP/bad.err" || fail "calibrate bad sizes: no 'soapflow: ' line"

# an --out rank 0 cannot write stops every rank before the measurements (an
# 8192^3 SGEMM would take far longer than the timeout), with one error line
timeout 20 mpirun -np 2 "$SF" calibrate --out "$TMP/missing/m.json" --gemm-size 8192 \
    >/dev/null 2>"$TMP/out.err"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "calibrate --out MISSING/: status $rc"
[ "$(grep -c '^soapflow: .*missing/m.json: cannot create' "$TMP/out.err")" -eq 1 ] ||
    fail "calibrate --out MISSING/: not one error line: $(cat "$TMP/out.err")"

echo "cli_calibrate: all checks passed"
