#!/usr/bin/env bash
# cli_output.sh - output files and the process around them: paths that cannot
# take a file, a file size limit, devices and FIFOs, symbolic links, and an
# interrupt. The contract: one error line and a non-zero status, never a half
# file at the path and never a temporary file left beside it.
#
# Run by CTest as: bash tests/cli_output.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_output.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-output.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

no_temps() {
    local left
    left=$(find "$TMP" -name '*.tmp.*' | head -n 3)
    [ -z "$left" ] || fail "$1: temporary files left: $left"
}

# ---- paths that cannot take a file ----------------------------------------
mkdir "$TMP/dir"
run to_dir "$SF" simulate --model lenet5 --machine cpu --trace "$TMP/dir"
expect_error to_dir
grep -q "$TMP/dir: cannot write: Is a directory" "$TMP/to_dir.err" ||
    fail "--trace DIR: $(cat "$TMP/to_dir.err")"
run no_dir "$SF" graph --model lenet5 --save "$TMP/missing/m.json"
expect_error no_dir
grep -q "$TMP/missing/m.json: cannot create" "$TMP/no_dir.err" ||
    fail "--save MISSING/FILE: $(cat "$TMP/no_dir.err")"
no_temps "unwritable paths"

# ---- a failed run replaces no output: all are checked first, written together --
# Each case has an existing file among its outputs and one output that fails,
# before any work (a missing directory) or only as it is written (/dev/full,
# a file size limit); the existing file must keep its text.
keep() { printf 'keep me\n' >"$TMP/$1"; }
kept() {
    [ "$(cat "$TMP/$1")" = "keep me" ] || fail "$2: $1 was replaced by a failed run"
}
M="$TMP/missing/x"
keep s.json
run sv_trace "$SF" simulate --model lenet5 --machine cpu --save-strategy "$TMP/s.json" --trace "$M"
expect_error sv_trace
grep -q "$M: cannot create" "$TMP/sv_trace.err" || fail "sv_trace: $(cat "$TMP/sv_trace.err")"
kept s.json "simulate --save-strategy F --trace MISSING"
run sv_svg "$SF" simulate --model lenet5 --machine cpu --save-strategy "$TMP/s.json" --svg "$M"
expect_error sv_svg
kept s.json "simulate --save-strategy F --svg MISSING"
run sv_dot "$SF" simulate --model lenet5 --machine cpu --save-strategy "$TMP/s.json" --dot "$M"
expect_error sv_dot
kept s.json "simulate --save-strategy F --dot MISSING"
keep t.json
run tr_save "$SF" simulate --model lenet5 --machine cpu --trace "$TMP/t.json" --save-strategy "$M"
expect_error tr_save
kept t.json "simulate --trace F --save-strategy MISSING"
keep g.dot
run gr_save "$SF" graph --model lenet5 --dot "$TMP/g.dot" --save "$M"
expect_error gr_save
kept g.dot "graph --dot F --save MISSING"
keep g.json
run gr_dot "$SF" graph --model lenet5 --save "$TMP/g.json" --dot "$M"
expect_error gr_dot
kept g.json "graph --save F --dot MISSING"
keep o.json
run se_svg "$SF" search --model lenet5 --machine cpu --iters 5 --out "$TMP/o.json" --svg "$M"
expect_error se_svg
kept o.json "search --out F --svg MISSING"
if [ -w /dev/full ]; then
    run sv_full "$SF" simulate --model lenet5 --machine cpu --save-strategy "$TMP/s.json" \
        --trace /dev/full
    expect_error sv_full
    grep -q "/dev/full: cannot write: No space left" "$TMP/sv_full.err" ||
        fail "sv_full: $(cat "$TMP/sv_full.err")"
    kept s.json "simulate --save-strategy F --trace /dev/full"
    run gr_full "$SF" graph --model lenet5 --save "$TMP/g.json" --dot /dev/full
    expect_error gr_full
    kept g.json "graph --save F --dot /dev/full"
    run se_full "$SF" search --model lenet5 --machine cpu --iters 5 --out "$TMP/o.json" \
        --trace /dev/full
    expect_error se_full
    kept o.json "search --out F --trace /dev/full"
fi
run fsize_group bash -c "ulimit -f 8; exec \"\$0\" simulate --model lenet5 --machine cpu \
    --save-strategy \"$TMP/s.json\" --trace \"$TMP/big2.trace.json\"" "$SF"
expect_error fsize_group
kept s.json "simulate --save-strategy F --trace BIG under ulimit -f"
[ ! -e "$TMP/big2.trace.json" ] || fail "fsize_group: a file at the trace path"
no_temps "failed runs"
# and a run that succeeds writes them all
run sv_all "$SF" simulate --model lenet5 --machine cpu --save-strategy "$TMP/s.json" \
    --trace "$TMP/t.json" --svg "$TMP/all.svg" --dot "$TMP/all.dot"
expect_ok sv_all
valid_json "$TMP/s.json" || fail "sv_all: strategy file is not JSON"
valid_json "$TMP/t.json" || fail "sv_all: trace is not JSON"
grep -q '^<svg' "$TMP/all.svg" || fail "sv_all: no SVG"
grep -q '^digraph' "$TMP/all.dot" || fail "sv_all: no DOT"
no_temps "a run that succeeds"

# ---- a file size limit: SIGXFSZ would kill us mid-file and strand the temp --
run fsize bash -c "ulimit -f 8; exec \"\$0\" simulate --model lenet5 --machine cpu \
    --trace \"$TMP/big.trace.json\"" "$SF"
expect_error fsize
grep -q 'big.trace.json: cannot write: File too large' "$TMP/fsize.err" ||
    fail "ulimit -f: $(cat "$TMP/fsize.err")"
[ ! -e "$TMP/big.trace.json" ] || fail "ulimit -f: a file at the path"
no_temps "ulimit -f"

# ---- a FIFO is written through, not replaced by a regular file ------------
mkfifo "$TMP/out.fifo"
timeout 20 cat "$TMP/out.fifo" >"$TMP/fifo.text" &
reader=$!
run fifo timeout 20 "$SF" graph --model lenet5 --dot "$TMP/out.fifo"
wait "$reader"
expect_ok fifo
[ -p "$TMP/out.fifo" ] || fail "--dot FIFO: the FIFO was replaced"
grep -q '^digraph' "$TMP/fifo.text" || fail "--dot FIFO: the reader got no graph"

# ---- a symbolic link keeps pointing at the file it names ------------------
ln -s dir/strategy.json "$TMP/link.json"
run link "$SF" simulate --model lenet5 --machine cpu --save-strategy "$TMP/link.json"
expect_ok link
[ -L "$TMP/link.json" ] || fail "--save-strategy LINK: the link was replaced by a file"
[ -s "$TMP/dir/strategy.json" ] || fail "--save-strategy LINK: nothing at the link's target"
no_temps "symbolic link"

# ---- a termination request still stops the program as a signal ----------
# (the handler that removes a temporary file re-raises: the signal is not
# swallowed). SIGTERM rather than SIGINT: a background job of a script starts
# with SIGINT ignored, and soapflow rightly leaves an ignored signal ignored.
"$SF" search --model lenet5 --machine cpu --budget 20s --out "$TMP/int.json" >/dev/null 2>&1 &
pid=$!
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] || fail "search after SIGTERM: status $rc, want 143 (killed by SIGTERM)"
[ ! -e "$TMP/int.json" ] || fail "search after SIGTERM: a strategy file at --out"
no_temps "SIGTERM"

exit 0
