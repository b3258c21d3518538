#!/usr/bin/env bash
# cli_docs.sh - what the docs, the help and the comments say about the code
# soapflow imitates. `--sync bulk --sync-scheme ps` imitates the simulator of
# FlexFlow's Legion runtime (src/runtime/simulator.cc, 2020-21), not FlexFlow's
# 2018 stand-alone prototype (scripts/simulator.cc), which added a
# parameter-server formula after the makespan; the docs once called the setting
# plainly "FlexFlow's simulator" or "its public code" (issue 20, item 10).
#
# Run by CTest as: bash tests/cli_docs.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_docs.sh <path-to-soapflow> <source-dir>}
SRC=${2:?usage: cli_docs.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-docs.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

. "$(dirname "$0")/lib/cli.sh"

# ---- the claims that said which FlexFlow without saying which --------------
files=("$SRC/README.md" "$SRC"/docs/*.md "$SRC/bench/RESULTS.md")
mapfile -t code < <(find "$SRC/src" "$SRC/include" -name '*.[ch]')
for claim in "is how FlexFlow's simulator" "FlexFlow's public simulator" \
    "FlexFlow's simulator setting" "FlexFlow's simulator default" \
    "FlexFlow's simulator uses by" "as FlexFlow's simulator models it" \
    "shard class (FlexFlow's simulator)" "first part's device (FlexFlow's)" \
    "under the papers' sync model"; do
    hits=$(grep -n -F -- "$claim" "${files[@]}" "${code[@]}" | head -n 3)
    [ -z "$hits" ] || fail "says '$claim' without saying which FlexFlow code: $hits"
done

# ---- the simulator docs name both, and which one the setting imitates ------
doc="$SRC/docs/simulator.md"
grep -q 'src/runtime/simulator.cc' "$doc" || fail "docs/simulator.md: no Legion-runtime simulator"
grep -q 'scripts/simulator.cc' "$doc" || fail "docs/simulator.md: no 2018 prototype"
grep -q -- '--sync-scheme ps` imitates how the simulator of' "$doc" ||
    fail "docs/simulator.md: does not say what --sync bulk --sync-scheme ps imitates"

# ---- and so does every command's help --------------------------------------
for cmd in simulate search "bench sim"; do
    # shellcheck disable=SC2086
    run help "$SF" $cmd --help
    expect_ok help
    tr -s ' \n' ' ' <"$TMP/help.out" >"$TMP/help.flat"
    grep -q "FlexFlow's 2020-21 Legion-runtime simulator, not its 2018 prototype" "$TMP/help.flat" ||
        fail "$cmd --help: --sync-scheme ps does not say which FlexFlow it imitates"
done

exit 0
