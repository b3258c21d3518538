# tests/lib/cli.sh - what the CLI test scripts (tests/cli_*.sh) share. Sourced
# after the script has set SF (the soapflow binary) and TMP (a scratch folder).

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# run NAME CMD...: run a command, keeping stdout, stderr and the status.
run() {
    local name=$1
    shift
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}
rc_of() { cat "$TMP/$1.rc"; }

expect_ok() {
    [ "$(rc_of "$1")" -eq 0 ] || fail "$1: status $(rc_of "$1"): $(cat "$TMP/$1.err")"
}

# A failure must be a clean exit with a status of 1 or 2 (not 0, not a signal
# 128 + n, not a sanitizer abort) and one "soapflow: " line on stderr.
expect_error() {
    local name=$1 rc lines
    rc=$(rc_of "$name")
    [ "$rc" -ne 0 ] || fail "$name: expected a non-zero status, got 0"
    [ "$rc" -le 2 ] || fail "$name: expected status 1 or 2, got $rc: $(cat "$TMP/$name.err")"
    lines=$(wc -l <"$TMP/$name.err")
    [ "$lines" -eq 1 ] || fail "$name: expected one error line, got $lines: $(cat "$TMP/$name.err")"
    grep -q '^soapflow: ' "$TMP/$name.err" || fail "$name: error line lacks 'soapflow: '"
}

# A usage error: expect_error with status 2.
expect_usage() {
    expect_error "$1"
    [ "$(rc_of "$1")" -eq 2 ] || fail "$1: status $(rc_of "$1"), want 2: $(cat "$TMP/$1.err")"
}

# The same for a command that may warn first: the last line is the error.
expect_error_last() {
    local name=$1 rc
    rc=$(rc_of "$name")
    [ "$rc" -ne 0 ] || fail "$name: expected a non-zero status, got 0"
    [ "$rc" -le 2 ] || fail "$name: expected status 1 or 2, got $rc: $(cat "$TMP/$name.err")"
    tail -n 1 "$TMP/$name.err" | grep -q '^soapflow: ' ||
        fail "$name: error line lacks 'soapflow: ': $(cat "$TMP/$name.err")"
}

# json_int FILE KEY: the integer value of the first "KEY": N in FILE.
json_int() { grep -o "\"$2\": *-\?[0-9]*" "$1" | head -n 1 | sed 's/.*: *//'; }
# json_num FILE KEY: the number value (integer or real) as written.
json_num() { grep -o "\"$2\": *[-0-9.eE+]*" "$1" | head -n 1 | sed 's/.*: *//'; }
# positive NUMBER: true when NUMBER > 0.
positive() { awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; }

# valid_json FILE: parses as JSON (python3 when there is one, else a rough check).
valid_json() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null
    else
        head -c 1 "$1" | grep -q '{' && tail -c 3 "$1" | grep -q '}'
    fi
}

[ -x "$SF" ] || fail "no executable at $SF"
