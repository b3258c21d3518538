#!/usr/bin/env bash
# train_vs_torch.sh - LeNet-5 training throughput: soapflow on 2 MPI ranks (one
# BLAS thread each, data parallelism, batch 64 in all) against PyTorch with 2
# threads (bench/torch_lenet5.py: the same model, optimizer, data and timing),
# side by side in one invocation, and their ratio.
#
#   bench/train_vs_torch.sh [--reps N] [--epochs E | --iters N] [--mpi-args "ARGS"]
#
#   --reps N       runs of each (default 3), alternating which goes first
#   --epochs E     passes over Fashion-MNIST each run (default 1: 937 steps)
#   --iters N      steps each run instead of epochs (both still report test accuracy)
#   --mpi-args A   extra mpirun arguments, e.g. "--mca mpi_yield_when_idle 1"
#   SOAPFLOW=path  the binary (default build/soapflow); PYTHON=path (default
#                  /usr/bin/python3: Debian's python3-torch installs for it)
#
# Each run reports the median iteration time after the first 10% of steps (both
# time the step only: forward, backward, all-reduce or not, update). The table
# gives, per framework, the best run (lowest median) and the median run over the
# N runs, with the load average before each run: the development machine is
# shared, and a figure taken at a load above its core count is not a measure of
# the code.
#
# If PyTorch is missing it installs Debian's python3-torch with apt-get, which
# needs root (or sudo); it says so before it does.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOAPFLOW="${SOAPFLOW:-$ROOT/build/soapflow}"
PYTHON="${PYTHON:-/usr/bin/python3}"
REPS=3
LEN=(--epochs 1)
MPI_ARGS=""
while [ $# -gt 0 ]; do
    case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --epochs) LEN=(--epochs "$2"); shift 2 ;;
    --iters) LEN=(--iters "$2"); shift 2 ;;
    --mpi-args) MPI_ARGS="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "train_vs_torch.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

[ -x "$SOAPFLOW" ] || { echo "train_vs_torch.sh: no $SOAPFLOW: build first (cmake --build build)" >&2; exit 1; }
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    echo "train_vs_torch.sh: PyTorch is missing for $PYTHON: installing Debian's python3-torch" \
         "with apt-get (needs root)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "train_vs_torch.sh: need root or sudo" >&2; exit 1; }
        SUDO=sudo
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

load1() { cut -d' ' -f1 /proc/loadavg; }

run_soapflow() {
    # shellcheck disable=SC2086  # MPI_ARGS is a list of words
    mpirun -n 2 $MPI_ARGS "$SOAPFLOW" train --model lenet5 --batch 64 --lr 0.01 --momentum 0.9 \
        --weight-decay 0 "${LEN[@]}" --json > "$TMP/sf.$1.json"
}
run_torch() {
    OMP_NUM_THREADS=2 "$PYTHON" "$ROOT/bench/torch_lenet5.py" --threads 2 --lr 0.01 \
        --momentum 0.9 --weight-decay 0 "${LEN[@]}" --json > "$TMP/pt.$1.json"
}

echo "lenet5, batch 64, ${LEN[*]}, $REPS runs each; $(nproc) cores; load before: $(load1)" >&2
for r in $(seq 1 "$REPS"); do
    if [ $((r % 2)) -eq 1 ]; then order="soapflow torch"; else order="torch soapflow"; fi
    for w in $order; do
        l=$(load1)
        t0=$(date +%s%N)
        if [ "$w" = soapflow ]; then run_soapflow "$r"; echo "$l" > "$TMP/sf.$r.load"
        else run_torch "$r"; echo "$l" > "$TMP/pt.$r.load"; fi
        printf '  run %d %-8s load %s, %d s\n' "$r" "$w" "$l" \
            $(( ($(date +%s%N) - t0) / 1000000000 )) >&2
    done
done

"$PYTHON" - "$TMP" "$REPS" "$(load1)" "$MPI_ARGS" <<'EOF'
import json, statistics, sys
tmp, reps, load_end, mpi_args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def runs(p):
    out = []
    for r in range(1, reps + 1):
        j = json.load(open(f"{tmp}/{p}.{r}.json"))
        j["load"] = float(open(f"{tmp}/{p}.{r}.load").read())
        out.append(j)
    return out
sf, pt = runs("sf"), runs("pt")
def pick(rs):
    by = sorted(rs, key=lambda j: j["iter_ms"])
    return by[0], by[(len(by) - 1) // 2]   # best, median (lower median for even N)
(sb, sm), (pb, pm) = pick(sf), pick(pt)
print(f"soapflow: mpirun -n 2{' ' + mpi_args if mpi_args else ''}, 1 BLAS thread a rank, "
      f"strategy {sf[0]['strategy']}; PyTorch {pt[0]['torch']}, {pt[0]['threads']} threads; "
      f"batch 64, {sf[0]['steps']} steps a run, {reps} runs")
print()
print("| | soapflow best | PyTorch best | soapflow/PyTorch | soapflow median run | PyTorch median run | soapflow/PyTorch |")
print("|---|---|---|---|---|---|---|")
print(f"| images/s | {sb['images_per_s']:.0f} | {pb['images_per_s']:.0f} | "
      f"{sb['images_per_s'] / pb['images_per_s']:.2f}x | {sm['images_per_s']:.0f} | "
      f"{pm['images_per_s']:.0f} | {sm['images_per_s'] / pm['images_per_s']:.2f}x |")
print(f"| median iteration ms | {sb['iter_ms']:.3f} | {pb['iter_ms']:.3f} | | "
      f"{sm['iter_ms']:.3f} | {pm['iter_ms']:.3f} | |")
print(f"| test accuracy | {100 * sb['test_accuracy']:.2f}% | {100 * pb['test_accuracy']:.2f}% | | "
      f"{100 * sm['test_accuracy']:.2f}% | {100 * pm['test_accuracy']:.2f}% | |")
print(f"| final loss | {sb['loss_last']:.4f} | {pb['loss_last']:.4f} | | "
      f"{sm['loss_last']:.4f} | {pm['loss_last']:.4f} | |")
print()
fmt = lambda rs: ", ".join(f"{j['iter_ms']:.2f} ms (load {j['load']:.2f})" for j in rs)
print(f"every run: soapflow {fmt(sf)}; PyTorch {fmt(pt)}; load at the end {load_end}")
print("images/s = 64 / median iteration time; ratio > 1: soapflow is faster")
EOF
