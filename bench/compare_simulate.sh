#!/usr/bin/env bash
# compare_simulate.sh OLD NEW [MACHINE_FILE] - `simulate --json` of two soapflow binaries
# over zoo models x machines x baselines x sync settings: prints every case whose
# iter_ms, sync_bytes, transfer_bytes, peak_mem_bytes, compute_ms or sync_ms differ,
# then "N of M differ" (cases the OLD binary refuses are skipped and counted). A structural change of the simulator should print 0 (or
# explain each line); warnings (stderr) are not compared. MACHINE_FILE (optional) adds a machine of your own, e.g. one
# written by `soapflow calibrate` (runtime object: copies, all-reduce curve, cores).
set -u
OLD=${1:?usage: compare_simulate.sh OLD NEW [MACHINE_FILE]}
NEW=${2:?usage: compare_simulate.sh OLD NEW [MACHINE_FILE]}
machines=(p100-4x4 "k80-16x4[16]" "cpu[2]")
[ $# -ge 3 ] && machines+=("$3")
fields() {
    "$@" --json 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print(d["iter_ms"], d["sync_bytes"], d["transfer_bytes"], d["peak_mem_bytes"],
          d["compute_ms"], d["sync_ms"])
except Exception as e:
    print("error:", e)'
}
diffs=0 total=0 skipped=0
for model in lenet5 alexnet inception_v3 resnet101 rnnlm nmt mlp transformer; do
    for mach in "${machines[@]}"; do
        for strat in data model owt expert; do
            for sync in "--sync overlap" "--sync bulk" "--sync-scheme ps --sync bulk" \
                        "--sync-scheme hierarchical" "--segments 3"; do
                # shellcheck disable=SC2086
                a=$(fields "$OLD" simulate --model $model --machine "$mach" -s $strat $sync)
                # shellcheck disable=SC2086
                b=$(fields "$NEW" simulate --model $model --machine "$mach" -s $strat $sync)
                if [ "${a#error}" != "$a" ]; then # OLD cannot run it (a newer option)
                    skipped=$((skipped + 1))
                    continue
                fi
                total=$((total + 1))
                if [ "$a" != "$b" ]; then
                    diffs=$((diffs + 1))
                    echo "DIFF $model $mach $strat $sync: $a | $b"
                fi
            done
        done
    done
done
echo "$diffs of $total differ ($skipped cases OLD cannot run)"
