#!/usr/bin/env bash
# Run the libFuzzer harnesses of a fuzzing build (make fuzz-build), one after
# the other, each for FUZZ_SECONDS (default 600), and print one line of
# figures per harness. Exits non-zero when any harness found something (a
# crash, a failed check, a leak, a timeout, too much memory): every harness
# still runs, so one finding does not hide another.
#   scripts/fuzz.sh [BUILD_DIR [NAME ...]]    NAME: model_json, idx, ... (default: all)
# Environment: FUZZ_SECONDS, FUZZ_TIMEOUT (seconds per input, default 10),
# FUZZ_RSS_MB (default 2048), FUZZ_ARGS (more libFuzzer flags).
#
# Per harness NAME (fuzz/README.md): the binary BUILD/fuzz_NAME; the committed
# seeds fuzz/corpus/NAME/ (read, never written); the corpus the runs grow,
# BUILD/corpus/NAME/ (kept, so that each run starts where the last one ended);
# fuzz/NAME.dict when it exists; a log BUILD/fuzz-logs/NAME.log; inputs that
# failed in BUILD/fuzz-artifacts/NAME/. Each run appends its figures to
# BUILD/fuzz-history.tsv, the record bench/RESULTS.md's totals come from.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build-fuzz}"
shift || true
SECONDS_EACH="${FUZZ_SECONDS:-600}"
TIMEOUT="${FUZZ_TIMEOUT:-10}"
RSS_MB="${FUZZ_RSS_MB:-2048}"

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for src in "$ROOT"/fuzz/fuzz_*.c; do
        n="$(basename "$src" .c)"
        names+=("${n#fuzz_}")
    done
fi

# LeakSanitizer on (libFuzzer checks each input that allocates more than it
# frees); UBSan reports stop the run (the build also has -fno-sanitize-recover).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

mkdir -p "$BUILD/fuzz-logs" "$BUILD/corpus"
history="$BUILD/fuzz-history.tsv"
[ -s "$history" ] || printf 'date\tharness\tseconds\texecs\tcov\tft\tcorpus\tresult\n' >"$history"

failed=()
printf '%-14s %8s %10s %7s %7s %7s  %s\n' harness seconds execs cov ft corpus result
for name in "${names[@]}"; do
    bin="$BUILD/fuzz_$name"
    seeds="$ROOT/fuzz/corpus/$name"
    work="$BUILD/corpus/$name"
    arts="$BUILD/fuzz-artifacts/$name"
    log="$BUILD/fuzz-logs/$name.log"
    if [ ! -x "$bin" ]; then
        echo "fuzz.sh: no harness $bin (make fuzz-build)" >&2
        failed+=("$name")
        continue
    fi
    mkdir -p "$work" "$arts"
    args=(-max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB"
          -print_final_stats=1 -artifact_prefix="$arts/")
    [ -f "$ROOT/fuzz/$name.dict" ] && args+=(-dict="$ROOT/fuzz/$name.dict")
    # shellcheck disable=SC2086
    start=$(date +%s)
    dirs=("$work")
    [ -d "$seeds" ] && dirs+=("$seeds")
    "$bin" "${args[@]}" ${FUZZ_ARGS:-} "${dirs[@]}" >"$log" 2>&1
    rc=$?
    # figures: the last status line (cov:, ft:, corp:) and the final stats
    last="$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)"
    cov="$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")"
    ft="$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")"
    execs="$(sed -nE 's/^stat::number_of_executed_units: ([0-9]+)/\1/p' "$log" | tail -n 1)"
    secs="$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' "$log" | tail -n 1)"
    [ -n "$secs" ] || secs=$(($(date +%s) - start)) # stopped by a finding: the wall time
    [ -n "$execs" ] || execs="$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")"
    corp="$(find "$work" -type f | wc -l)"
    result=ok
    if [ $rc -ne 0 ] || grep -qE '^==[0-9]+==ERROR|runtime error:|^SUMMARY: |check failed:' "$log"; then
        result="FAILED (exit $rc; $log; inputs in $arts)"
        failed+=("$name")
    fi
    printf '%-14s %8s %10s %7s %7s %7s  %s\n' "$name" "${secs:-?}" "${execs:-?}" "${cov:-?}" \
        "${ft:-?}" "$corp" "$result"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$name" "${secs:-0}" \
        "${execs:-0}" "${cov:-}" "${ft:-}" "$corp" "${result%% *}" >>"$history"
    if [ "$result" != ok ]; then
        grep -E -m 20 'ERROR|runtime error|check failed|SUMMARY|Test unit written' "$log" | sed 's/^/    /'
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: findings in: ${failed[*]}" >&2
    exit 1
fi
