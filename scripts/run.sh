#!/usr/bin/env bash
# run.sh - the main job of `make run`: first plan a 10 B GPT (48 layers of
# 4096) for 64 H100s in 8 DGX nodes with the analytic model (the baselines,
# the pipeline pass over Megatron's tensor x pipeline x data grid, OptCNN and
# MCMC with layer templates), then measure this host as two MPI ranks
# (calibrate: links, BLAS, copies, all-reduces) and LeNet-5's tasks on it
# (profile), plan LeNet-5 for those ranks with the measured machine and costs,
# then train it with the plan on Fashion-MNIST for one epoch, printing the
# simulator's predicted iteration time beside the measured one and the test
# accuracy. Usage: scripts/run.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
SF="$BUILD/soapflow"
MACHINE="$BUILD/local-2.json"
COSTS="$BUILD/costs-lenet5-2.json"
PLAN="$BUILD/lenet5-plan.json"
# OpenMPI as root, more ranks than cores, one BLAS thread a rank (DESIGN.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1

echo "== plan: a 10 B GPT (48 x 4096, seq 2048, bf16, Adam) on 64 H100s in 8 nodes, analytic model"
"$SF" search --model gpt --layers 48 --hidden 4096 --heads 32 --batch 64 --seq-len 2048 \
    --dtype bf16 --optimizer adam --machine dgx-h100 --budget 6s --templates
echo
echo "== measure: this host as 2 MPI ranks, lenet5's tasks on them"
# the whole summary goes to a file; its last lines say what the machine file holds
mpirun -n 2 "$SF" calibrate --out "$MACHINE" >"$BUILD/calibrate.txt"
grep -E '^(device|link|runtime|written) ' "$BUILD/calibrate.txt"
"$SF" profile --model lenet5 --batch 64 --machine "$MACHINE" --out "$COSTS" | grep -E '^written '
echo
echo "== plan: lenet5, batch 64, on those 2 ranks (measured machine and costs)"
"$SF" search --model lenet5 --batch 64 --machine "$MACHINE" --costs "$COSTS" --budget 5s \
    --out "$PLAN"
echo
echo "== train: the plan on 2 MPI ranks, Fashion-MNIST, one epoch"
mpirun -n 2 "$SF" train --model lenet5 --batch 64 --machine "$MACHINE" --costs "$COSTS" \
    --strategy "$PLAN" --epochs 1 --lr 0.03 --weight-decay 0.0005 --lr-schedule cosine
