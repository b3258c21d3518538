#!/bin/sh
# extract.sh HEADER [OUT] - the example that opens a public header, as C.
#
# A header's opening comment may hold one example: its first run of lines
# indented four spaces past the comment's " * " (blank comment lines inside the
# run belong to it). The run is printed with that indentation taken off,
# after a #line directive, so that a compiler error points at the header's
# own line. Prints nothing (and exits 0) for a header without one; exits 1
# when HEADER does not open with a comment. The build compiles each example
# inside tests/examples/example_NAME.c and runs it as a test (CMakeLists.txt).
set -eu
header=$1
extract() {
awk -v file="$header" '
    NR == 1 && $0 !~ /^\/\*/ { bad = 1; exit }
    /\*\// { exit }
    /^ \*     / {
        if (!started) { started = 1; printf "#line %d \"%s\"\n", NR, file }
        for (; blank > 0; blank--) print ""
        print substr($0, 8)
        next
    }
    started && /^ \*$/ { blank++; next }
    started { exit }
    END { exit bad }
' "$header"
}
if [ $# -ge 2 ]; then extract >"$2"; else extract; fi
