#!/usr/bin/env bash
# cli_profile_interrupt.sh - `soapflow profile` keeps what it measured when it
# is stopped: the costs file is written as the run goes (--save-every), so a
# run killed with SIGKILL leaves a valid file with the entries of its last
# write; SIGTERM stops the run after its current task, writes every entry so
# far and exits 1 with one line saying so; a rerun resumes, reusing every
# entry the file holds. Before, the file was written once at the end, and an
# interrupted profile kept nothing.
#
# Run by CTest as: bash tests/cli_profile_interrupt.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_profile_interrupt.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-profile-int.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3 to read the costs file"
# 200 distinct tasks; at 300 timed runs each, about 20 s on this host (0.6 s at 10),
# stopped long before: the stops below come 0.3 s and 1 s in, whatever the host
P=(profile --model lenet5 --batch 64 --machine 'cpu[4]' --warmup 0)
C="$TMP/costs.json"

# entries FILE: the entry count of a valid costs file, or a failure
entries() {
    python3 - "$1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["format"] == "soapflow-costs" and j["device_kind"] == "cpu-rank", j
keys = [e["key"] for e in j["entries"]]
assert len(keys) == len(set(keys)) and all(e["reps"] >= 1 for e in j["entries"])
print(len(keys))
EOF
}

# wait_for FILE: until FILE exists (at most 60 s)
wait_for() {
    for _ in $(seq 600); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    fail "no $1 after 60 s"
}

# ---- SIGKILL: the last write survives -----------------------------------------------
"$SF" "${P[@]}" --reps 300 --save-every 0 --out "$C" >"$TMP/kill.out" 2>"$TMP/kill.err" &
pid=$!
wait_for "$C"
sleep 0.3
kill -KILL "$pid"
wait "$pid" 2>/dev/null
n1=$(entries "$C") || fail "after SIGKILL: not a valid costs file: $(head -c 300 "$C")"
[ "$n1" -ge 1 ] && [ "$n1" -lt 200 ] || fail "after SIGKILL: $n1 entries, want 1 to 199"

# ---- SIGTERM: every entry so far, one line, exit 1 ------------------------------------
"$SF" "${P[@]}" --reps 300 --out "$C" >"$TMP/term.out" 2>"$TMP/term.err" &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid"
echo $? >"$TMP/term.rc"
expect_error term
[ "$(rc_of term)" -eq 1 ] || fail "after SIGTERM: status $(rc_of term), want 1"
grep -q "^soapflow: profile: interrupted by SIGTERM after [0-9]* new entries; $C holds" \
    "$TMP/term.err" || fail "after SIGTERM: $(cat "$TMP/term.err")"
n2=$(entries "$C") || fail "after SIGTERM: not a valid costs file"
new=$(sed -n 's/.*after \([0-9]*\) new entries.*/\1/p' "$TMP/term.err")
[ "$n2" -eq $((n1 + new)) ] || fail "after SIGTERM: $n2 entries, want $n1 + $new"
grep -q "holds $n2, run again" "$TMP/term.err" || fail "after SIGTERM: count not $n2"

# ---- the rerun resumes: every entry in the file is reused (one timed run
# for the rest, to keep the test short) -----------------------------------------------
run resume "$SF" "${P[@]}" --reps 1 --out "$C" --json
expect_ok resume
python3 - "$TMP/resume.out" "$n2" <<'EOF' || fail "rerun: $(cat "$TMP/resume.out")"
import json, sys
j = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
assert j["reused"] == n and j["measured"] == j["keys"] - n - j["skipped"], (j, n)
assert j["entries"] == j["keys"] - j["skipped"]
EOF
[ "$(entries "$C")" -eq "$(json_int "$TMP/resume.out" entries)" ] || fail "rerun: file not whole"

run badsave "$SF" "${P[@]}" --save-every -1 --out "$C"
expect_usage badsave

echo "cli_profile_interrupt: ok"
