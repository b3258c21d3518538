#!/bin/sh
# pipe_table.sh BUILD_DIR - bench/RESULTS.md's pipeline scale table: the zoo's
# gpt at GPT-3 175B's shape (96 layers, hidden 12288, 96 heads, sequence 2048,
# bf16, Adam) under tensor x pipeline x data parallelism (1F1B, one sample per
# data-parallel group and micro-batch) on bench/h100-1024.json's node type cut
# to the row's devices; bench_pipe's JSON, one line a row. Identical
# data-parallel replicas are simulated once (the default); EVERY=1 adds, for
# the rows small enough, the same row with --every-replica 1 (every replica
# simulated), whose iteration must be the same.
set -e
B=${1:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
here=$(dirname "$0")
row() { # devices tp pp dp micro [every]
    nodes=$(($1 / 8))
    sed "s/\"nodes\": 128/\"nodes\": $nodes/; s/h100-1024/h100-$1/" "$here/h100-1024.json" >"$T/m$1.json"
    /usr/bin/time -f '%M' -o "$T/rss" "$B/bench_pipe" "$T/m$1.json" --tp "$2" --pp "$3" --dp "$4" \
        --micro "$5" --reps "${REPS:-3}" --every-replica "${6:-0}" | tr -d '\n'
    echo ", \"max_rss_kB\": $(cat "$T/rss")"
}
row 8 8 1 1 8
row 64 8 4 2 16
row 128 8 8 2 16
row 256 8 8 4 32
row 512 8 16 4 32
row 1024 8 16 8 16
row 1024 8 16 8 48
row 1024 8 16 8 192
if [ "${EVERY:-0}" = 1 ]; then
    row 64 8 4 2 16 1
    row 256 8 8 4 32 1
    row 1024 8 16 8 16 1
    row 1024 8 16 8 48 1
fi
