#!/bin/sh
# check_frames.sh SOURCE_DIR - every public header that opens with an example
# has a tests/examples/example_NAME.c that builds and runs it, and every such
# file belongs to a header that still has one; run by CTest, so that a new
# header's tutorial cannot go unbuilt.
set -eu
src=${1:?usage: check_frames.sh SOURCE_DIR}
here=$src/tests/examples
bad=0
for h in "$src"/include/soapflow/*.h; do
    name=$(basename "$h" .h)
    if [ -n "$(sh "$here/extract.sh" "$h")" ] && [ ! -f "$here/example_$name.c" ]; then
        echo "include/soapflow/$name.h opens with an example, but tests/examples/example_$name.c" \
            "does not exist to build and run it" >&2
        bad=1
    fi
done
for f in "$here"/example_*.c; do
    name=$(basename "$f" .c | sed 's/^example_//')
    h=$src/include/soapflow/$name.h
    if [ ! -f "$h" ] || [ -z "$(sh "$here/extract.sh" "$h")" ]; then
        echo "tests/examples/example_$name.c has no example to build in include/soapflow/$name.h" >&2
        bad=1
    fi
done
exit $bad
