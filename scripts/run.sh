#!/usr/bin/env bash
# run.sh - the main job of `make run`: plan LeNet-5 for two MPI ranks on this
# host, then train it with the plan on Fashion-MNIST for one epoch, printing
# the simulator's predicted iteration time beside the measured one and the
# test accuracy. Usage: scripts/run.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
SF="$BUILD/soapflow"
PLAN="$BUILD/lenet5-plan.json"
# OpenMPI as root, more ranks than cores, one BLAS thread a rank (DESIGN.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1

echo "== plan: lenet5, batch 64, on 2 local ranks (the cpu preset's figures)"
"$SF" search --model lenet5 --batch 64 --machine 'cpu[2]' --budget 5s --out "$PLAN"
echo
echo "== train: the plan on 2 MPI ranks, Fashion-MNIST, one epoch"
mpirun -n 2 "$SF" train --model lenet5 --batch 64 --strategy "$PLAN" --epochs 1 --lr 0.03 \
    --weight-decay 0.0005 --lr-schedule cosine
