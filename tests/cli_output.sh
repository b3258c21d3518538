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
