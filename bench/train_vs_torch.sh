#!/usr/bin/env bash
# train_vs_torch.sh - training throughput: soapflow on P MPI ranks (one BLAS
# thread each, data parallelism) against PyTorch with P threads
# (bench/torch_zoo.py: the same model, optimizer, data and timing), side by side
# in one invocation, and their ratio, for each model asked for.
#
#   bench/train_vs_torch.sh [--model M]... [--ranks P] [--reps N]
#                           [--epochs E | --iters N] [--batch B] [--mpi-args "ARGS"]
#
#   --model M      lenet5, mlp (784-4096-4096-10) or resnet18; repeat it for
#                  several (default: lenet5)
#   --ranks P      soapflow's ranks and PyTorch's threads (default 2)
#   --reps N       runs of each (default 3), alternating which goes first
#   --epochs E     passes over the data each run (default: 1 epoch, 937 steps,
#                  for lenet5; 100 steps for mlp; 12 for resnet18)
#   --iters N      steps each run instead of epochs (both still report test accuracy)
#   --batch B      the global batch (default 64; 8 for resnet18)
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
LEN=()
MPI_ARGS=""
MODELS=()
RANKS=2
BATCH=""
while [ $# -gt 0 ]; do
    case "$1" in
    --model)
        case "${2:-}" in
        lenet5 | mlp | resnet18) MODELS+=("$2") ;;
        *) echo "train_vs_torch.sh: unknown model '${2:-}' (lenet5, mlp or resnet18)" >&2; exit 2 ;;
        esac
        shift 2 ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --epochs) LEN=(--epochs "$2"); shift 2 ;;
    --iters) LEN=(--iters "$2"); shift 2 ;;
    --mpi-args) MPI_ARGS="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "train_vs_torch.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#MODELS[@]} -gt 0 ] || MODELS=(lenet5)

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
    mpirun -n "$RANKS" $MPI_ARGS "$SOAPFLOW" train --model "$MODEL" --batch "$B" --lr 0.01 \
        --momentum 0.9 --weight-decay 0 "${ML[@]}" --json > "$TMP/sf.$1.json"
}
run_torch() {
    OMP_NUM_THREADS="$RANKS" "$PYTHON" "$ROOT/bench/torch_zoo.py" --model "$MODEL" --batch "$B" \
        --threads "$RANKS" --lr 0.01 --momentum 0.9 --weight-decay 0 "${ML[@]}" --json \
        > "$TMP/pt.$1.json"
}

for MODEL in "${MODELS[@]}"; do
    B="$BATCH"
    if [ -z "$B" ]; then if [ "$MODEL" = resnet18 ]; then B=8; else B=64; fi; fi
    ML=("${LEN[@]}")
    if [ ${#ML[@]} -eq 0 ]; then
        case "$MODEL" in
        lenet5) ML=(--epochs 1) ;;
        mlp) ML=(--iters 100) ;;
        resnet18) ML=(--iters 12) ;;
        esac
    fi
    echo "$MODEL, batch $B, ${ML[*]}, $REPS runs each; $(nproc) cores; load before: $(load1)" >&2
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

    "$PYTHON" - "$TMP" "$REPS" "$(load1)" "$MPI_ARGS" "$MODEL" "$RANKS" "$B" <<'EOF'
import json, sys
tmp, reps, load_end, mpi_args, model, ranks, batch = sys.argv[1:8]
reps = int(reps)
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
pct = lambda v: f"{100 * v:.2f}%" if v is not None else "-"
num = lambda v: f"{v:.4f}" if v is not None else "-"
print(f"{model}: soapflow: mpirun -n {ranks}{' ' + mpi_args if mpi_args else ''}, 1 BLAS thread "
      f"a rank, strategy {sf[0]['strategy']}; PyTorch {pt[0]['torch']}, {pt[0]['threads']} "
      f"threads; batch {batch}, {sf[0]['steps']} steps a run, {reps} runs")
print()
print("| | soapflow best | PyTorch best | soapflow/PyTorch | soapflow median run | PyTorch median run | soapflow/PyTorch |")
print("|---|---|---|---|---|---|---|")
print(f"| images/s | {sb['images_per_s']:.1f} | {pb['images_per_s']:.1f} | "
      f"{sb['images_per_s'] / pb['images_per_s']:.2f}x | {sm['images_per_s']:.1f} | "
      f"{pm['images_per_s']:.1f} | {sm['images_per_s'] / pm['images_per_s']:.2f}x |")
print(f"| median iteration ms | {sb['iter_ms']:.3f} | {pb['iter_ms']:.3f} | | "
      f"{sm['iter_ms']:.3f} | {pm['iter_ms']:.3f} | |")
print(f"| test accuracy | {pct(sb.get('test_accuracy'))} | {pct(pb.get('test_accuracy'))} | | "
      f"{pct(sm.get('test_accuracy'))} | {pct(pm.get('test_accuracy'))} | |")
print(f"| final loss | {num(sb.get('loss_last'))} | {num(pb.get('loss_last'))} | | "
      f"{num(sm.get('loss_last'))} | {num(pm.get('loss_last'))} | |")
print()
fmt = lambda rs: ", ".join(f"{j['iter_ms']:.2f} ms (load {j['load']:.2f})" for j in rs)
print(f"every run: soapflow {fmt(sf)}; PyTorch {fmt(pt)}; load at the end {load_end}")
print(f"images/s = {batch} / median iteration time; ratio > 1: soapflow is faster")
print()
EOF
done
