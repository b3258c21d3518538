#!/usr/bin/env bash
# check_install.sh [WORK_DIR] - soapflow as a library that others install
# (docs/embedding.md), checked the way a user meets it:
#  1. configure a build without MPI and without ONNX (SF_WITH_MPI=OFF,
#     SF_WITH_ONNX=OFF, no tests) and install it into a temporary prefix;
#  2. build examples/consumer/plan_lenet5.c against that prefix with
#     `pkg-config --cflags --libs soapflow` and with find_package(soapflow),
#     and run both;
#  3. show that the planning library needs jansson and libm alone: the consumer
#     links with exactly what soapflow.pc gives (-lsoapflow_plan -ljansson -lm),
#     no symbol it leaves undefined belongs to MPI, BLAS, protobuf-c or zlib, and
#     ldd lists nothing else;
#  4. build the planning library shared (BUILD_SHARED_LIBS=ON) and check that
#     it exports exactly the SF_API functions of include/soapflow/ it defines,
#     and that the consumer runs with it;
#  5. the installed soapflow program says what it was built without, in one line.
# WORK_DIR (default build-install) holds the build trees; the prefix is removed
# at the end. Any failed step fails the script.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$src/build-install}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
prefix=$(mktemp -d "${TMPDIR:-/tmp}/soapflow-prefix.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fail() {
    echo "check_install: $*" >&2
    exit 1
}
cc=${CC:-cc}

echo "== configure without MPI and ONNX, build, install into $prefix"
cmake -S "$src" -B "$work/lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSF_WERROR=ON -DSF_WITH_MPI=OFF \
    -DSF_WITH_ONNX=OFF -DSF_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$work/lib" -j "$jobs" >/dev/null
cmake --install "$work/lib" --prefix "$prefix" >/dev/null
(cd "$prefix" && find . -type f | sort)

echo "== the consumer, built with pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
flags=$(pkg-config --cflags --libs soapflow)
echo "pkg-config --cflags --libs soapflow: $flags"
# shellcheck disable=SC2086 # the flags are words
"$cc" -std=c11 -Wall -Wextra -Werror -o "$work/plan_lenet5_pc" \
    "$src/examples/consumer/plan_lenet5.c" $flags
"$work/plan_lenet5_pc" | tee "$work/plan_lenet5_pc.txt"

echo "== the consumer, built with find_package(soapflow)"
cmake -S "$src/examples/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/plan_lenet5" | tee "$work/plan_lenet5_cmake.txt"
cmp -s "$work/plan_lenet5_pc.txt" "$work/plan_lenet5_cmake.txt" ||
    fail "the two builds of the consumer print different plans"

echo "== the planning library needs jansson and libm alone"
plan_a="$prefix/lib/libsoapflow_plan.a"
[ -f "$plan_a" ] || fail "no $plan_a"
# what the archive leaves undefined, less what it defines itself
nm "$plan_a" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u >"$work/plan_undefined.txt"
nm --defined-only "$plan_a" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u >"$work/plan_defined.txt"
comm -23 "$work/plan_undefined.txt" "$work/plan_defined.txt" >"$work/plan_external.txt"
echo "libsoapflow_plan.a leaves $(wc -l <"$work/plan_external.txt") symbols undefined:" \
    "$(grep -c '^json_' "$work/plan_external.txt") of jansson (json_*), and these:"
grep -v '^json_' "$work/plan_external.txt" | tr '\n' ' ' | fold -s -w 100
echo
if grep -E '^(MPI_|PMPI_|ompi_|cblas_|openblas_|sgemm|protobuf_c_|inflate|deflate|gz|crc32|adler32)' \
    "$work/plan_external.txt"; then
    fail "libsoapflow_plan.a needs the symbols above (MPI, BLAS, protobuf-c or zlib)"
fi
if grep -E '^sf_' "$work/plan_external.txt"; then
    fail "libsoapflow_plan.a calls the soapflow functions above without holding them" \
        "(the runtime's, the datasets'?)"
fi
echo "ldd plan_lenet5 (pkg-config build):"
ldd "$work/plan_lenet5_pc" | tee "$work/plan_ldd.txt"
if grep -vE '^\s*(linux-vdso|/lib.*/ld-linux|libjansson\.so|libm\.so|libc\.so)' \
    "$work/plan_ldd.txt"; then
    fail "the consumer loads libraries beyond jansson, libm and libc (above)"
fi

echo "== the planning library shared: it exports the SF_API functions it defines"
cmake -S "$src" -B "$work/shared" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSF_WERROR=ON -DSF_WITH_MPI=OFF \
    -DSF_WITH_ONNX=OFF -DSF_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=ON >/dev/null
cmake --build "$work/shared" -j "$jobs" --target soapflow_plan >/dev/null
so="$work/shared/libsoapflow_plan.so"
nm -D --defined-only "$so" | awk 'NF == 3 && $3 !~ /^_(init|fini)$/ {print $3}' |
    sort -u >"$work/shared_exported.txt"
# the functions of the static archive whose names the installed headers declare
grep -ohE '\bsf_[a-z0-9_]+\s*\(' "$prefix"/include/soapflow/*.h | tr -d ' (' | sort -u \
    >"$work/header_names.txt"
nm --defined-only "$plan_a" | awk '$2 == "T" {print $3}' | sort -u |
    comm -12 - "$work/header_names.txt" >"$work/public_defined.txt"
if ! diff "$work/public_defined.txt" "$work/shared_exported.txt" >"$work/shared_diff.txt"; then
    cat "$work/shared_diff.txt" >&2
    fail "libsoapflow_plan.so exports other symbols than the public functions it defines" \
        "(< defined and declared in include/soapflow/ but hidden: SF_API missing;" \
        "> exported but not declared there)"
fi
echo "exported: $(wc -l <"$work/shared_exported.txt") functions, each declared SF_API"
ldd "$so"
if ldd "$so" | grep -vE '^\s*(linux-vdso|/lib.*/ld-linux|libjansson\.so|libm\.so|libc\.so)'; then
    fail "libsoapflow_plan.so loads libraries beyond jansson, libm and libc (above)"
fi
"$cc" -std=c11 -Wall -Wextra -Werror -o "$work/plan_lenet5_so" \
    "$src/examples/consumer/plan_lenet5.c" -I"$prefix/include" -L"$work/shared" \
    -Wl,-rpath,"$work/shared" -lsoapflow_plan
"$work/plan_lenet5_so" >"$work/plan_lenet5_so.txt"
cmp -s "$work/plan_lenet5_pc.txt" "$work/plan_lenet5_so.txt" ||
    fail "the consumer over the shared library prints another plan"

echo "== the installed program, built without MPI and ONNX"
sf="$prefix/bin/soapflow"
"$sf" --version
[ "$("$sf" --version)" = "soapflow $(sed -n 's/^#define SOAPFLOW_VERSION_STRING "\(.*\)"/\1/p' \
    "$prefix/include/soapflow/version.h")" ] || fail "soapflow --version is not version.h's"
expect_one_line() { # expect_one_line WORDS -- COMMAND...: fails with one stderr line holding WORDS
    local words=$1
    shift 2
    if "$@" >/dev/null 2>"$work/err.txt"; then fail "'$*' succeeded"; fi
    cat "$work/err.txt"
    [ "$(wc -l <"$work/err.txt")" -eq 1 ] && grep -q "$words" "$work/err.txt" ||
        fail "'$*' did not say in one line: $words"
}
printf 'not protobuf' >"$work/model.onnx"
expect_one_line "built without ONNX support (SF_WITH_ONNX=OFF)" -- \
    "$sf" graph --model "$work/model.onnx"
expect_one_line "built without MPI (SF_WITH_MPI=OFF)" -- "$sf" train --model lenet5 --iters 1
"$sf" simulate --model lenet5 --machine 'cpu[2]' --strategy data | head -3
echo "check_install: ok"
