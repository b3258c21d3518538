#!/usr/bin/env bash
# Install the Debian packages soapflow needs, only those missing. Idempotent:
# when everything is present it does nothing and needs no root.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libjansson-dev libcmocka-dev libopenblas-dev
      libopenmpi-dev openmpi-bin libprotobuf-c-dev protobuf-c-compiler libonnx-dev)

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
