#!/usr/bin/env bash
# cli_escape.sh - every SVG and DOT soapflow writes stays well-formed whatever
# the names in it hold: a model named `R&D <v2> "q" 'a'` with operators named
# with <, &, > quotes and backslashes, through graph --dot, simulate --svg
# --dot, search --svg and validate --svg (two ranks). The SVGs must parse
# as XML (python3's minidom, and xmllint when there is one); the DOT files must
# tokenize (quoted strings closed, escapes valid, braces balanced), and their
# labels must give the names back exactly.
#
# Run by CTest as: bash tests/cli_escape.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_escape.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-escape.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3 to parse the pictures"
command -v mpirun >/dev/null 2>&1 || fail "no mpirun on PATH (Debian: openmpi-bin)"

M="$TMP/rd.json"
cat >"$M" <<'EOF'
{"format": "soapflow-model", "version": 1, "name": "R&D <v2> \"q\" 'a'",
 "ops": [
  {"name": "x<&>\"in\\put", "type": "input", "shape": [16, 8]},
  {"name": "fc1 <&> ]]>", "type": "linear", "inputs": ["x<&>\"in\\put"], "out_features": 16},
  {"name": "r\"elu\\n", "type": "relu", "inputs": ["fc1 <&> ]]>"]},
  {"name": "fc2", "type": "linear", "inputs": ["r\"elu\\n"], "out_features": 4},
  {"name": "loss", "type": "softmax_ce", "inputs": ["fc2"]}
 ]}
EOF

# xml FILE: parses as XML, and holds the model's name as text
xml() {
    python3 - "$1" <<'EOF' || fail "$1: not well-formed XML"
import sys, xml.dom.minidom as m
doc = m.parse(sys.argv[1])
text = "".join(n.data for e in doc.getElementsByTagName("text") + doc.getElementsByTagName("title")
               for n in e.childNodes if n.nodeType == n.TEXT_NODE)
assert "R&D <v2> \"q\" 'a'" in text, "the model's name is not in the picture"
EOF
    if command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$1" 2>"$TMP/xmllint.err" || fail "$1: xmllint: $(cat "$TMP/xmllint.err")"
    fi
}

# dot FILE: tokenizes as DOT, and its labels give every operator's name back
dot() {
    python3 - "$1" <<'EOF' || fail "$1: not well-formed DOT"
import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
strings, i, depth = [], 0, 0
while i < len(t):
    c = t[i]
    if c == '"':
        j, s = i + 1, []
        while True:
            assert j < len(t), "an unterminated string"
            if t[j] == "\\":
                s.append(t[j:j + 2])
                j += 2
            elif t[j] == '"':
                break
            else:
                assert t[j] != "\n", "a raw line break in a string"
                s.append(t[j])
                j += 1
        strings.append("".join(s))
        i = j + 1
        continue
    assert re.match(r"[\w\s\[\]{}=;,.>#-]", c), "stray character %r outside a string" % c
    depth += {"{": 1, "}": -1}.get(c, 0)
    assert depth >= 0
    i += 1
assert depth == 0, "unbalanced braces"
def unescape(s):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)
assert unescape(strings[0]) == "R&D <v2> \"q\" 'a'", strings[0]
names = {unescape(s).split("\n")[0] for s in strings}
for n in ["x<&>\"in\\put", "fc1 <&> ]]>", "r\"elu\\n", "fc2", "loss"]:
    assert n in names, "no label starts with " + repr(n)
EOF
}

run graph "$SF" graph --model "$M" --dot "$TMP/graph.dot"
expect_ok graph
dot "$TMP/graph.dot"

run sim "$SF" simulate --model "$M" --machine 'cpu[2]' --svg "$TMP/sim.svg" --dot "$TMP/sim.dot"
expect_ok sim
xml "$TMP/sim.svg"
dot "$TMP/sim.dot"

run search "$SF" search --model "$M" --machine 'cpu[2]' --iters 20 --out "$TMP/best.json" \
    --svg "$TMP/search.svg"
expect_ok search
xml "$TMP/search.svg"

run validate timeout 120 mpirun -n 2 "$SF" validate --model "$M" --strategies data,model \
    --iters 2 --warmup 1 --svg "$TMP/validate.svg"
expect_ok validate
xml "$TMP/validate.svg"

echo "cli_escape: ok"
