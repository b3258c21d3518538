#!/usr/bin/env bash
# cli_profile.sh - `soapflow profile` and `simulate --costs` as a user meets them.
#
# Run by CTest as: bash tests/cli_profile.sh <path-to-soapflow> <source-dir>
# Checks behaviour, never wall time: a costs file is written, a second run
# reuses it whole, a simulation reads it, and bad input fails in one line.
set -u

SF=${1:?usage: cli_profile.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-prof.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1

. "$(dirname "$0")/lib/cli.sh"
COSTS="$TMP/costs.json"

# ---- profile: a costs file with conv2d and linear entries ------------------
run prof "$SF" profile --model lenet5 --machine cpu --batch 16 --reps 1 --warmup 0 \
    --out "$COSTS" --json
expect_ok prof
valid_json "$TMP/prof.out" || fail "profile --json: not valid JSON"
valid_json "$COSTS" || fail "profile: the costs file is not valid JSON"
grep -q '"format": "soapflow-costs"' "$COSTS" || fail "profile: no format in the costs file"
grep -q '"device_kind": "cpu-rank"' "$COSTS" || fail "profile: device kind is not cpu-rank"
grep -q '"op": "conv2d"' "$COSTS" || fail "profile: no conv2d entries"
grep -q '"op": "linear"' "$COSTS" || fail "profile: no linear entries"
measured=$(json_num "$TMP/prof.out" measured)
[ "$measured" -gt 0 ] || fail "profile: measured '$measured', want > 0"
[ "$(json_num "$TMP/prof.out" reused)" = 0 ] || fail "profile: first run reused entries"
entries=$(grep -c '"key":' "$COSTS")
[ "$entries" = "$(json_num "$TMP/prof.out" entries)" ] ||
    fail "profile: $entries entries in the file, report says $(json_num "$TMP/prof.out" entries)"
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary file was left behind: $(ls "$TMP")"

# ---- a second run measures nothing new -----------------------------------
run again "$SF" profile --model lenet5 --machine cpu --batch 16 --reps 1 --out "$COSTS" --json
expect_ok again
[ "$(json_num "$TMP/again.out" measured)" = 0 ] ||
    fail "profile again: measured $(json_num "$TMP/again.out" measured), want 0"
[ "$(json_num "$TMP/again.out" reused)" = "$measured" ] ||
    fail "profile again: reused $(json_num "$TMP/again.out" reused), want $measured"

# Text mode names what it did.
run text "$SF" profile --model lenet5 --machine cpu --batch 16 --out "$COSTS"
expect_ok text
for word in measured reused skipped time written; do
    grep -q "$word" "$TMP/text.out" || fail "profile text: no '$word'"
done

# ---- simulate with the costs ----------------------------------------------
if "$SF" simulate --help 2>/dev/null | grep -q -- '--costs'; then
    run sim "$SF" simulate --model lenet5 --machine cpu --batch 16 --strategy data \
        --costs "$COSTS" --json
    expect_ok sim
    valid_json "$TMP/sim.out" || fail "simulate --costs --json: not valid JSON"
    run sim_a "$SF" simulate --model lenet5 --machine cpu --batch 16 --strategy data --json
    expect_ok sim_a
    a=$(json_num "$TMP/sim_a.out" compute_ms)
    p=$(json_num "$TMP/sim.out" compute_ms)
    [ -n "$p" ] && [ "$a" != "$p" ] || fail "simulate --costs: compute_ms '$p' is the analytic '$a'"
    # what was profiled is not reported as missing; conv2d and linear were profiled
    grep 'not measured' "$TMP/sim.err" | grep -q -e conv2d -e linear &&
        fail "simulate --costs: conv2d or linear reported missing: $(cat "$TMP/sim.err")"
    # profiled for one device only: the 4-way data parallel parts are missing, and said so
    run prof1 "$SF" profile --model lenet5 --machine cpu --batch 16 --max-devices 1 --reps 1 \
        --warmup 0 --out "$TMP/one.json"
    expect_ok prof1
    run sim1 "$SF" simulate --model lenet5 --machine cpu --batch 16 --strategy data \
        --costs "$TMP/one.json" --json
    expect_ok sim1
    grep 'not measured' "$TMP/sim1.err" | grep -q conv2d ||
        fail "simulate --costs: no warning naming conv2d: $(cat "$TMP/sim1.err")"
    valid_json "$TMP/sim1.out" || fail "simulate --costs with a warning: stdout is not JSON"
    run sim_bad "$SF" simulate --model lenet5 --machine cpu --costs "$TMP/none.json"
    expect_error_last sim_bad
    grep -q 'none.json' "$TMP/sim_bad.err" || fail "simulate --costs missing file: not named"
else
    echo "cli_profile: simulate has no --costs yet; skipping those checks" >&2
fi

# ---- errors: one line, a status, never a crash -----------------------------
printf '{\n  "format": "soapflow-costs",\n  "version": 1,,\n}\n' >"$TMP/broken.json"
run broken "$SF" profile --model lenet5 --batch 16 --max-devices 1 --out "$TMP/broken.json"
expect_error_last broken
grep -q 'broken.json:3:' "$TMP/broken.err" || fail "broken costs: no file:line: $(cat "$TMP/broken.err")"

run kind "$SF" profile --model lenet5 --machine p100-4x4 --batch 16 --max-devices 1 --out "$COSTS"
expect_error_last kind
grep -q 'cpu-rank' "$TMP/kind.err" || fail "device kind mismatch: kind not said"

run no_model "$SF" profile --machine cpu
expect_error_last no_model
[ "$(rc_of no_model)" -eq 2 ] || fail "profile without --model: status $(rc_of no_model), want 2"
run bad_reps "$SF" profile --model lenet5 --reps 0
expect_error_last bad_reps
run bad_dir "$SF" profile --model lenet5 --batch 16 --max-devices 1 --out "$TMP/no/such/c.json"
expect_error_last bad_dir

for args in "profile --help" "help profile" "calibrate --help"; do
    # shellcheck disable=SC2086
    run help "$SF" $args
    expect_ok help
    grep -q "example" "$TMP/help.out" || fail "soapflow $args: no example"
done

echo "cli_profile: all checks passed"
