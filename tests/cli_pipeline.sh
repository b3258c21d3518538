#!/usr/bin/env bash
# cli_pipeline.sh - pipelined strategy files on the command line (issue 27):
# simulate shows the pipeline (text and JSON), a saved file keeps it and
# simulates to the same time, trace and SVG are written, a pipeline of one
# stage and one micro-batch is the plain strategy's time, and bad pipelines
# (m not dividing the batch, a device in two stages, an unknown schedule, a
# boundary that is no operator) are one line naming the file.
#
# Run by CTest as: bash tests/cli_pipeline.sh <path-to-soapflow> <source-dir>
set -u

SF=${1:?usage: cli_pipeline.sh <path-to-soapflow> <source-dir>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sf-pipe.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

. "$(dirname "$0")/lib/cli.sh"
command -v python3 >/dev/null 2>&1 || fail "no python3 on PATH"

mlp=(--model mlp -b 64 --machine "p100-4x4[4]")
run single "$SF" simulate "${mlp[@]}" -s single --save-strategy "$TMP/single.json" --json
expect_ok single
# two stages of two devices (data parallel inside each): stage 0 on 0-1, 1 on 2-3;
# chunk c (from the c-th boundary on) on stage c % stages
make() { # make OUT STAGES MICRO SCHEDULE BOUNDARY...
    python3 - "$TMP/single.json" "$@" <<'PY'
import json, sys
src, out, stages, micro, sched = sys.argv[1:6]
bounds = sys.argv[6:]
d = json.load(open(src))
chunk = 0
for n in d["ops"]:
    if chunk < len(bounds) and n == bounds[chunk]:
        chunk += 1
    stage = chunk % int(stages)
    c = d["ops"][n]
    c["degrees"] = [2] + [1] * (len(c["degrees"]) - 1)
    c["devices"] = [2 * stage, 2 * stage + 1]
d["pipeline"] = {"stages": int(stages), "micro_batches": int(micro), "schedule": sched,
                 "boundaries": bounds}
json.dump(d, open(out, "w"), indent=1)
PY
}
make "$TMP/p.json" 2 4 1f1b fc2 || fail "could not write a pipelined strategy"
run text "$SF" simulate "${mlp[@]}" -s "$TMP/p.json" --trace "$TMP/p.trace.json" --svg "$TMP/p.svg"
expect_ok text
grep -q '^pipeline .*2 stages, 4 micro-batches of 16, 1f1b, chunks from fc2' "$TMP/text.out" ||
    fail "simulate does not show the pipeline: $(head -n 6 "$TMP/text.out")"
valid_json "$TMP/p.trace.json" || fail "trace is not JSON"
grep -q 'fc2@mb3' "$TMP/p.trace.json" || fail "trace lacks the micro-batches' tasks"
[ -s "$TMP/p.svg" ] || fail "no SVG"

run js "$SF" simulate "${mlp[@]}" -s "$TMP/p.json" --json --save-strategy "$TMP/saved.json"
expect_ok js
python3 - "$TMP/js.out" <<'PY' || fail "simulate --json: bad pipeline object: $(head -c 400 "$TMP/js.out")"
import json, sys
p = json.load(open(sys.argv[1]))["pipeline"]
assert p == {"stages": 2, "chunks_per_stage": 1, "micro_batches": 4, "schedule": "1f1b",
             "boundaries": ["fc2"]}, p
PY
grep -q '"pipeline"' "$TMP/saved.json" || fail "the saved strategy lost its pipeline"
run js2 "$SF" simulate "${mlp[@]}" -s "$TMP/saved.json" --json
expect_ok js2
[ "$(json_num "$TMP/js.out" iter_ms)" = "$(json_num "$TMP/js2.out" iter_ms)" ] ||
    fail "saved pipeline simulates to $(json_num "$TMP/js2.out" iter_ms), not $(json_num "$TMP/js.out" iter_ms)"

# every schedule runs; interleaved takes four chunks
for sch in gpipe 1f1b; do
    make "$TMP/$sch.json" 2 8 "$sch" fc2 || fail "make $sch"
    run "s$sch" "$SF" simulate "${mlp[@]}" -s "$TMP/$sch.json" --json
    expect_ok "s$sch"
done
make "$TMP/il.json" 2 8 interleaved:2 relu1 fc2 relu2 || fail "make interleaved"
run sil "$SF" simulate "${mlp[@]}" -s "$TMP/il.json" --json
expect_ok sil
grep -q '"schedule": "interleaved:2"' "$TMP/sil.out" || fail "interleaved: $(head -c 300 "$TMP/sil.out")"
# --pipeline-fast: the same time to rounding, pictures still of every task
make "$TMP/long.json" 2 32 1f1b fc2 || fail "make long"
run long "$SF" simulate "${mlp[@]}" -s "$TMP/long.json" --json
expect_ok long
run longf "$SF" simulate "${mlp[@]}" -s "$TMP/long.json" --json --pipeline-fast
expect_ok longf
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert abs(a["iter_ms"]-b["iter_ms"]) <= 1e-9*a["iter_ms"] and a["tasks"] == b["tasks"], (a["iter_ms"], b["iter_ms"])' \
    "$TMP/long.out" "$TMP/longf.out" || fail "--pipeline-fast: another time"
echo "cli_pipeline: --pipeline-fast took $(json_num "$TMP/longf.out" fast_copies) of 32 micro-batches"
run longt "$SF" simulate "${mlp[@]}" -s "$TMP/long.json" --pipeline-fast --trace "$TMP/long.trace.json"
expect_ok longt
grep -q 'fc2@mb31' "$TMP/long.trace.json" || fail "--pipeline-fast --trace lacks micro-batch 31"
# a one-stage, one-micro-batch pipeline is the plain strategy
python3 - "$TMP/single.json" "$TMP/one.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipeline"] = {"stages": 1, "micro_batches": 1}
json.dump(d, open(sys.argv[2], "w"))
PY
run one "$SF" simulate "${mlp[@]}" -s "$TMP/one.json" --json
expect_ok one
python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["iter_ms"]; b=json.load(open(sys.argv[2]))["iter_ms"]
assert abs(a-b) <= 1e-9*a, (a,b)' "$TMP/one.out" "$TMP/single.out" || fail "one-stage pipeline: not the plain time"

# ---- bad pipelines: one line naming the file --------------------------------------
make "$TMP/bad_m.json" 2 5 1f1b fc2
run bad_m "$SF" simulate "${mlp[@]}" -s "$TMP/bad_m.json"
expect_error bad_m
grep -q 'bad_m.json.*do not divide the batch of 64' "$TMP/bad_m.err" || fail "bad m: $(cat "$TMP/bad_m.err")"
make "$TMP/bad_s.json" 2 4 pipedream fc2
run bad_s "$SF" simulate "${mlp[@]}" -s "$TMP/bad_s.json"
expect_error bad_s
grep -q 'bad_s.json.*schedule' "$TMP/bad_s.err" || fail "bad schedule: $(cat "$TMP/bad_s.err")"
make "$TMP/bad_b.json" 2 4 1f1b nope
run bad_b "$SF" simulate "${mlp[@]}" -s "$TMP/bad_b.json"
expect_error bad_b
grep -q "bad_b.json.*not an operator" "$TMP/bad_b.err" || fail "bad boundary: $(cat "$TMP/bad_b.err")"
python3 - "$TMP/p.json" "$TMP/bad_d.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["ops"]["fc3"]["devices"] = [0, 3]
json.dump(d, open(sys.argv[2], "w"))
PY
run bad_d "$SF" simulate "${mlp[@]}" -s "$TMP/bad_d.json"
expect_error bad_d
grep -q "bad_d.json.*device 0 is in stage 0 .* stages share no device" "$TMP/bad_d.err" ||
    fail "shared device: $(cat "$TMP/bad_d.err")"
echo "cli_pipeline: ok"
